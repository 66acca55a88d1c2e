"""Kubernetes objects the tests, the demo and the benchmarks build, and reading them back."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from libaccurate.constants import ANNOTATION_PROPAGATE


def secret(namespace: str, name: str, mode: str | None, data: Mapping[str, str]) -> dict[str, Any]:
    """A Secret holding ``data`` (plain text, encoded here), propagated in ``mode`` if any."""
    annotations = {ANNOTATION_PROPAGATE: mode} if mode else {}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def secret_data(obj: Mapping[str, Any] | None) -> dict[str, str] | None:
    """A Secret's data in plain text; None when there is no Secret."""
    if obj is None:
        return None
    return {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}


def controller_stand_in(namespace: str, pod: Mapping[str, Any]) -> dict[str, Any]:
    """A Deployment named as accurate-controller's, with no replicas: what the plugin reads of
    an installed controller (its ServiceAccount, its config volume), with nothing running."""
    labels = {"app": "accurate"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "accurate-controller-manager", "namespace": namespace},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": dict(pod)},
        },
    }


def namespace_manifest(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": dict(labels or {})},
    }
