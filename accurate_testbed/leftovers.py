"""Removing, by label, what test runs made on a cluster: webhook configurations, namespaces and
the cluster-scoped objects tests make (CRDs, the SubNamespace one when a run installed it;
ClusterRoles and ClusterRoleBindings).

Order matters on a real cluster. Webhook configurations go first: one left pointing at a server
that is gone fails every write it covers (failurePolicy Fail), deletions of its own namespaces
included. Then SubNamespaces let go of their finalizers, since no controller may be left to
remove them and their namespaces would stay Terminating for ever. Namespaces are deleted without
waiting: the cluster's namespace controller empties and removes them in the background. The
cluster-scoped objects go last, CRDs with whatever custom objects are left.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from accurate_testbed.manifests import CRDS
from libaccurate.constants import FINALIZER, GROUP, SUBNAMESPACE_PLURAL
from libaccurate.kube import ApiError, Kube, resource_path

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


def remove(kube: Kube, selector: str) -> None:
    """Remove the webhook configurations, namespaces and cluster-scoped objects ``selector``
    matches."""
    remove_webhook_configurations(kube, selector)
    remove_namespaces(kube, selector)
    remove_cluster_objects(kube, selector)


def remove_webhook_configurations(kube: Kube, selector: str) -> None:
    _remove_selected(kube, WEBHOOK_CONFIGURATIONS, selector)


def remove_cluster_objects(kube: Kube, selector: str) -> None:
    """Delete the CRDs, ClusterRoleBindings and ClusterRoles ``selector`` matches."""
    _remove_selected(kube, CLUSTER_OBJECTS, selector)


def _remove_selected(kube: Kube, collections: tuple[str, ...], selector: str) -> None:
    for collection in collections:
        for item in kube.list_objects(collection, labelSelector=selector).get("items") or []:
            _delete(kube, f"{collection}/{item['metadata']['name']}")


def remove_namespaces(kube: Kube, selector: str) -> None:
    """Delete the namespaces ``selector`` matches, after freeing the SubNamespaces in them."""
    names = [
        item["metadata"]["name"]
        for item in kube.list_objects(NAMESPACES, labelSelector=selector).get("items") or []
    ]
    for name in names:
        _release_subnamespaces(kube, name)
        _delete(kube, f"{NAMESPACES}/{name}")


def _release_subnamespaces(kube: Kube, namespace: str) -> None:
    collection = resource_path(GROUP, "v2", SUBNAMESPACE_PLURAL, namespace)
    try:
        items = kube.list_objects(collection).get("items") or []
    except ApiError as error:
        if error.not_found:  # the CRD is not installed
            return
        raise
    for item in items:
        if FINALIZER in (item["metadata"].get("finalizers") or []):
            path = f"{collection}/{item['metadata']['name']}"
            _tolerating_gone(
                functools.partial(kube.patch, path, {"metadata": {"finalizers": None}})
            )


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
