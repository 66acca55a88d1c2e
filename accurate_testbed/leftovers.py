"""Removing, by label, what test runs made on a cluster: webhook configurations, namespaces and
the cluster-scoped objects tests make (CRDs, the SubNamespace one when a run installed it;
ClusterRoles and ClusterRoleBindings).

Order matters on a real cluster. Webhook configurations go first: one left pointing at a server
that is gone fails every write it covers (failurePolicy Fail), deletions of its own namespaces
included. Then whatever holds a namespace lets go of its finalizer, since no controller (nor
test) may be left to remove it and the namespace would stay Terminating for ever: the
SubNamespaces' finalizer, and ``HOLD`` on the namespace and its ConfigMaps. Namespaces are
deleted without waiting: the cluster's namespace controller empties and removes them in the
background. The cluster-scoped objects go last, CRDs with whatever custom objects are left,
once those let go of ``HOLD`` too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from accurate_testbed.manifests import CRDS
from libaccurate.constants import FINALIZER, GROUP, SUBNAMESPACE_PLURAL
from libaccurate.network.kube import ApiError, Kube, resource_path

# The finalizer tests hold objects with (a namespace, a ConfigMap, a custom object).
HOLD = "example.com/hold"
NAMESPACES = resource_path("", "v1", "namespaces")
WEBHOOK_CONFIGURATIONS = tuple(
    resource_path("admissionregistration.k8s.io", "v1", plural)
    for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
)
# Bindings before the roles they name, so no binding is ever left pointing at nothing.
CLUSTER_OBJECTS = (
    CRDS,
    *(
        resource_path("rbac.authorization.k8s.io", "v1", plural)
        for plural in ("clusterrolebindings", "clusterroles")
    ),
)

Listed = list[tuple[str, dict[str, Any]]]


def remove(kube: Kube, selector: str) -> None:
    """Remove the webhook configurations, namespaces and cluster-scoped objects ``selector``
    matches."""
    remove_webhook_configurations(kube, selector)
    remove_namespaces(kube, selector)
    remove_cluster_objects(kube, selector)


def remove_webhook_configurations(kube: Kube, selector: str) -> None:
    for collection in WEBHOOK_CONFIGURATIONS:
        _delete_all(kube, _listed(kube, collection, labelSelector=selector))


def remove_namespaces(kube: Kube, selector: str) -> None:
    """Delete the namespaces ``selector`` matches, after letting go of what holds them."""
    namespaces = _listed(kube, NAMESPACES, labelSelector=selector)
    _let_go(kube, namespaces, HOLD)
    for path, namespace in namespaces:
        name = namespace["metadata"]["name"]
        subnamespaces = resource_path(GROUP, "v2", SUBNAMESPACE_PLURAL, name)
        _let_go(kube, _listed(kube, subnamespaces), FINALIZER)
        _let_go(kube, _listed(kube, resource_path("", "v1", "configmaps", name)), HOLD)
        _delete(kube, path)


def remove_cluster_objects(kube: Kube, selector: str) -> None:
    """Delete the CRDs (after letting go of their held objects), ClusterRoleBindings and
    ClusterRoles ``selector`` matches."""
    for collection in CLUSTER_OBJECTS:
        listed = _listed(kube, collection, labelSelector=selector)
        if collection == CRDS:
            for _, crd in listed:
                _let_go(kube, _custom_objects(kube, crd), HOLD)
        _delete_all(kube, listed)


def _custom_objects(kube: Kube, crd: dict[str, Any]) -> Listed:
    """A CRD's objects in every namespace, each with its path."""
    spec = crd["spec"]
    served = [version["name"] for version in spec["versions"] if version.get("served")]
    if not served:
        return []
    group, version, plural = spec["group"], served[0], spec["names"]["plural"]
    listed = []
    for item in _items(kube, resource_path(group, version, plural)):
        meta = item["metadata"]
        where = resource_path(group, version, plural, meta.get("namespace"), meta["name"])
        listed.append((where, item))
    return listed


def _listed(kube: Kube, collection: str, **query: str) -> Listed:
    """The objects of a collection (cluster-scoped, or of one namespace), each with its path."""
    return [
        (f"{collection}/{item['metadata']['name']}", item)
        for item in _items(kube, collection, **query)
    ]


def _items(kube: Kube, collection: str, **query: str) -> list[dict[str, Any]]:
    """The objects of a collection; none when the kind is not served (a CRD not installed, or
    gone)."""
    try:
        return list(kube.list_objects(collection, **query).get("items") or [])
    except ApiError as error:
        if error.not_found:
            return []
        raise


def _let_go(kube: Kube, objects: Iterable[tuple[str, dict[str, Any]]], finalizer: str) -> None:
    """Take ``finalizer`` off each of ``objects`` that carries it."""
    for path, obj in objects:
        finalizers = obj["metadata"].get("finalizers") or []
        if finalizer in finalizers:
            kept = [f for f in finalizers if f != finalizer] or None
            patch = {"metadata": {"finalizers": kept}}
            _tolerating_gone(functools.partial(kube.patch, path, patch))


def _delete_all(kube: Kube, objects: Listed) -> None:
    for path, _ in objects:
        _delete(kube, path)


def _delete(kube: Kube, path: str) -> None:
    _tolerating_gone(functools.partial(kube.delete, path))


def _tolerating_gone(action: Callable[[], object]) -> None:
    """Something else (the namespace controller, a test's own cleanup) may have removed it
    already, or be removing it (a namespace being deleted answers 409)."""
    try:
        action()
    except ApiError as error:
        if not (error.not_found or error.conflict):
            raise
