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


def namespace_manifest(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": dict(labels or {})},
    }
