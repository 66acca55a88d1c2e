"""The sudoer keeper: the cluster-scoped RBAC that the roots' sudo grants imply, kept in line.

For every user a root's sudo grant names (libaccurate.access.sudoers) there is a ClusterRole
letting them impersonate themselves and the sudo group of each such root, and a
ClusterRoleBinding giving it to them. The keeper creates them when the first grant names the
user, rewrites the ClusterRole when the set of roots changes, deletes both when no grant names
the user any more, and touches nothing else: only objects carrying its label are its own.

It runs in the reconcile loop's passes, from the same cache picture as the planner, and writes
only when that picture asks for something other than what it last achieved; after a failure
it tries again in the next pass. Its rights amount to cluster-admin, so they are opt-in
(controller/config/sudo, the chart's tenantAccess.sudo) and not part of the startup check: a
controller without them goes on propagating, and once a sudo grant exists it says, once, what
it lacks and what to install; a cluster that never grants sudo runs as before.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from controller import selfcheck
from controller.selfcheck import MissingPermissions, Permission
from libaccurate.access import (
    ANNOTATION_SUDOER,
    KEEPER_RIGHTS,
    LABEL_SUDOER,
    RBAC_GROUP,
    TURN_SUDO_ON,
    sudoer_objects,
    sudoers,
)
from libaccurate.config import WatchedResource
from libaccurate.forest import Forest
from libaccurate.network.kube import ApiError, Kube, KubeError, resource_path
from libaccurate.planner import Snapshot

Obj = dict[str, Any]
Wanted = Mapping[str, tuple[str, ...]]
_PLURALS = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}
# What the keeper does, and all that controller/config/sudo grants (tests/test_manifests.py).
PERMISSIONS = tuple(Permission(*right) for right in KEEPER_RIGHTS)
TURN_ON = (
    "sudo grants are not carried out: the controller may not keep the sudoers' cluster-wide "
    f"RBAC. To turn sudo on, {TURN_SUDO_ON}"
)

log = logging.getLogger(__name__)


class Sudoers:
    """Keeps the sudoers' ClusterRoles and ClusterRoleBindings; call ``keep`` every pass."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._kept: Wanted | None = None
        self._told_forbidden = False

    def keep(self, snapshot: Snapshot) -> None:
        wanted = sudoers(_role_bindings(snapshot), _roots(snapshot))
        if wanted == self._kept:
            return
        try:
            self._reconcile(wanted)
        except KubeError as error:
            if isinstance(error, ApiError) and error.code == 403:
                self._forbidden(wanted, error)
            else:
                log.warning("sudo grants not carried out yet", extra={"error": str(error)})
            return
        except Exception:
            # A bug here must not hold up propagation, which runs in the same pass.
            log.exception("sudo grants not carried out")
            return
        self._kept = wanted
        self._told_forbidden = False

    def _forbidden(self, wanted: Wanted, error: ApiError) -> None:
        """Without its rights (sudo is off): with no grant, nothing to say; with grants, say
        once, until the keeper next succeeds, which rights it lacks and where to get them (every
        pass tries again, and a message per pass would drown the log)."""
        if not wanted:
            self._kept = wanted
            return
        if self._told_forbidden:
            return
        self._told_forbidden = True
        try:
            selfcheck.check(self.kube, PERMISSIONS)
            lacking = str(error)
        except (MissingPermissions, KubeError) as problem:
            lacking = str(problem)
        roots = sorted({root for granted in wanted.values() for root in granted})
        log.error(TURN_ON, extra={"roots": roots, "lacking": lacking})

    def _reconcile(self, wanted: Wanted) -> None:
        for kind in ("ClusterRoleBinding", "ClusterRole"):
            for obj in self._list(kind):
                if _user_of(obj) not in wanted:
                    self._delete(kind, obj)
        current = {kind: {_user_of(o): o for o in self._list(kind)} for kind in _PLURALS}
        for user, roots in wanted.items():
            for obj in sudoer_objects(user, roots):
                self._put(obj, current[obj["kind"]].get(user))

    def _list(self, kind: str) -> list[Obj]:
        path = resource_path(RBAC_GROUP, "v1", _PLURALS[kind])
        return list(self.kube.list_objects(path, labelSelector=LABEL_SUDOER).get("items") or [])

    def _put(self, wanted: Obj, current: Obj | None) -> None:
        """Create the object, or replace it when what it grants differs."""
        collection = resource_path(RBAC_GROUP, "v1", _PLURALS[wanted["kind"]])
        if current is None:
            self.kube.create(collection, wanted)
            log.info("sudoer RBAC created", extra=_about(wanted))
        elif any(current.get(key) != wanted.get(key) for key in ("rules", "subjects", "roleRef")):
            version = current["metadata"].get("resourceVersion")
            body = {**wanted, "metadata": {**wanted["metadata"], "resourceVersion": version}}
            self.kube.replace(f"{collection}/{wanted['metadata']['name']}", body)
            log.info("sudoer RBAC updated", extra=_about(wanted))

    def _delete(self, kind: str, obj: Obj) -> None:
        path = resource_path(RBAC_GROUP, "v1", _PLURALS[kind], name=obj["metadata"]["name"])
        try:
            self.kube.delete(path)
        except ApiError as error:
            if not error.not_found:
                raise
        log.info("sudoer RBAC deleted", extra=_about(obj))


def keeps_sudoers(watched: WatchedResource) -> bool:
    """Sudo grants are RoleBindings: the keeper runs when the controller propagates those."""
    return watched.gvk.group == RBAC_GROUP and watched.gvk.kind == "RoleBinding"


def _role_bindings(snapshot: Snapshot) -> list[Mapping[str, Any]]:
    return [
        obj
        for gvk, objects in snapshot.objects.items()
        if gvk.group == RBAC_GROUP and gvk.kind == "RoleBinding"
        for obj in objects
    ]


def _roots(snapshot: Snapshot) -> set[str]:
    forest = snapshot.forest
    if forest is None:
        forest = Forest.build(snapshot.namespaces)
    return {name for name in forest.roots() if not forest.nodes[name].terminating}


def _user_of(obj: Obj) -> str:
    return str((obj["metadata"].get("annotations") or {}).get(ANNOTATION_SUDOER, ""))


def _about(obj: Obj) -> dict[str, str]:
    return {"kind": obj["kind"], "object": obj["metadata"]["name"], "user": _user_of(obj)}
