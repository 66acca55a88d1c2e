"""The startup check that the controller's account may do everything the controller does.

Without it, a missing RBAC rule shows up much later as a stream of 403s on one kind of write,
with the cache looking fine. Each permission is asked of the API server with a
SelfSubjectAccessReview. Startup fails with one message naming every missing permission the
controller cannot run without (its cache's reads, the sub-namespaces' writes); a missing write
on a watched kind only degrades propagation of that kind, as it does for the Go Accurate (whose
chart's default rule for ResourceQuotas lacks ``update``), so it is reported as a warning naming
what will not work, and the controller starts: an operator replacing the Go controller with the
same values gets what they had, and is told what is missing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from libaccurate.config import WatchedResource
from libaccurate.constants import GROUP, SUBNAMESPACE_PLURAL
from libaccurate.network.kube import Kube, KubeError, resource_path

REVIEWS = resource_path("authorization.k8s.io", "v1", "selfsubjectaccessreviews")


@dataclass(frozen=True)
class Permission:
    """Verbs on a resource (``plural`` or ``plural/subresource``), cluster-wide unless
    ``namespace`` is given."""

    group: str
    resource: str
    verbs: tuple[str, ...]
    namespace: str = ""
    consequence: str = ""
    """What stops working without these verbs; empty when the controller cannot run at all."""

    def describe(self, verbs: Iterable[str]) -> str:
        plural, _, subresource = self.resource.partition("/")
        name = f"{plural}.{self.group}" if self.group else plural
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"{', '.join(verbs)} {name}{'/' + subresource if subresource else ''}{where}"


class MissingPermissions(Exception):
    """The account lacks permissions it cannot run without; the message names each of them."""


def required(watched: Iterable[WatchedResource], lease_namespace: str | None) -> list[Permission]:
    """What the controller does: the cache lists and watches, the writes of every action, the
    events, and the Lease when leader election is on."""
    needed = [
        Permission("", "namespaces", ("list", "watch", "create", "patch", "delete")),
        Permission(GROUP, SUBNAMESPACE_PLURAL, ("list", "watch", "patch")),
        Permission(GROUP, f"{SUBNAMESPACE_PLURAL}/status", ("patch",)),
        Permission("", "events", ("create", "patch")),
    ]
    for w in watched:
        needed.append(Permission(w.gvk.group, w.plural, ("list", "watch")))
        writes = ("create", "update", "patch", "delete")
        consequence = f"propagation of {w.gvk.kind} fails where it needs them"
        needed.append(Permission(w.gvk.group, w.plural, writes, consequence=consequence))
    if lease_namespace is not None:
        leases = ("get", "create", "update")
        needed.append(Permission("coordination.k8s.io", "leases", leases, lease_namespace))
    return needed


def _allowed(kube: Kube, permission: Permission, verb: str) -> bool:
    plural, _, subresource = permission.resource.partition("/")
    attributes = {"group": permission.group, "resource": plural, "verb": verb}
    if subresource:
        attributes["subresource"] = subresource
    if permission.namespace:
        attributes["namespace"] = permission.namespace
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    answer = kube.create(REVIEWS, review)
    return bool((answer.get("status") or {}).get("allowed"))


def check(kube: Kube, permissions: Iterable[Permission]) -> list[str]:
    """The warnings for missing permissions the controller can run without; raises
    MissingPermissions naming every other permission not granted, KubeError when the API
    cannot be asked."""
    lacking = []
    warnings = []
    try:
        for permission in permissions:
            denied = [verb for verb in permission.verbs if not _allowed(kube, permission, verb)]
            if denied and permission.consequence:
                warnings.append(
                    f"the controller's account may not {permission.describe(denied)}: "
                    f"{permission.consequence}"
                )
            elif denied:
                lacking.append(permission.describe(denied))
    except KubeError as error:
        raise KubeError(f"cannot check the controller's permissions: {error}") from error
    if lacking:
        raise MissingPermissions(
            "the controller's account lacks permissions it needs: " + "; ".join(lacking)
        )
    return warnings
