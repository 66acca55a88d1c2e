"""The project's deploy manifests as objects, rendered by ``kubectl kustomize``, and the webhook
configurations from them pointed at a webhook server on this machine."""

from __future__ import annotations

import copy
import functools
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from libaccurate.constants import LABEL_PARENT
from libaccurate.network.kube import ApiError, Kube, resource_path

MANIFESTS = Path(__file__).resolve().parents[1] / "controller" / "config"
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
NAMESPACES = resource_path("", "v1", "namespaces")
CRDS = resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")


def render(directory: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize`` renders from a kustomize directory (fresh copies)."""
    return [obj for obj in yaml.safe_load_all(_kustomize(directory)) if obj]


@functools.cache
def _kustomize(directory: Path) -> str:
    """The rendering is the same for the whole run, and kubectl takes a while to produce it."""
    result = subprocess.run(
        ["kubectl", "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise AssertionError(f"kubectl kustomize {directory} failed: {result.stderr}")
    return result.stdout


def registration(
    objects: Sequence[dict[str, Any]],
    base_url: str,
    bundle: str,
    suffix: str,
    labels: Mapping[str, str] | None = None,
    scope: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The manifests' webhook configurations, renamed with ``suffix``, carrying ``labels`` and
    pointed at ``base_url`` (each webhook keeps its path) with ``bundle`` as CA. With ``scope``,
    each webhook sees only namespaces with those labels (a Namespace by its own labels, a
    SubNamespace by its namespace's), so it can never stand in the way of anyone else's."""
    configurations = []
    for obj in objects:
        if obj["kind"] not in WEBHOOK_KINDS:
            continue
        configuration = copy.deepcopy(obj)
        configuration["metadata"] = {
            "name": f"{obj['metadata']['name']}-{suffix}",
            "labels": dict(labels or {}),
        }
        for webhook in configuration["webhooks"]:
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": base_url + path, "caBundle": bundle}
            if scope:
                webhook["namespaceSelector"] = {"matchLabels": dict(scope)}
        configurations.append(configuration)
    return configurations


def subnamespace_crd_manifest() -> dict[str, Any]:
    (crd,) = render(MANIFESTS / "crd")
    return crd


def namespace_hook_answers(kube: Kube, probe: str, labels: Mapping[str, str] | None = None) -> bool:
    """Whether the namespace webhook refuses a namespace named ``probe`` with ``labels`` that is
    its own parent (a server-side dry run: nothing is created)."""
    selfish = {"metadata": {"name": probe, "labels": {**(labels or {}), LABEL_PARENT: probe}}}
    try:
        kube.create(NAMESPACES, selfish, dryRun="All")
    except ApiError as error:
        return error.code == 403
    return False
