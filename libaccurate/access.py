"""The tenant access model: which RoleBindings in a root stand for which grants, and which
cluster-scoped RBAC the sudo grants imply.

A tree's access is a few RoleBindings in its root, annotated to be propagated in update mode, so
that the controller keeps a copy in every namespace below; there is no CRD of our own, and the
Go controller propagates them just as well. One RoleBinding per level binds its people:

- ``view``, ``edit``, ``admin`` to the built-in ClusterRole of that name;
- ``manage`` to the ClusterRole ``accurate:manage`` we ship (sub-namespaces and grants only);
- ``sudo`` to the ClusterRole ``accurate:sudo:<root>``, which grants only the impersonation of
  the group ``accurate:sudo:<root>``. A RoleBinding's rules hold in its namespace only, and
  impersonation is cluster-scoped, so that binding gives nobody anything by itself. It is a
  record that Kubernetes guards: the escalation rule lets only someone who may already
  impersonate that group (a sudoer, a cluster administrator) write it. From it the controller
  keeps, per person, a ClusterRole and ClusterRoleBinding that let them impersonate themselves
  and the sudo group of each root naming them; a second RoleBinding gives that group ``admin``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from libaccurate.constants import (
    ANNOTATION_FROM,
    ANNOTATION_PROPAGATE,
    CREATED_BY_VALUE,
    GROUP,
    LABEL_CREATED_BY,
    PROPAGATE_UPDATE,
)

Obj = dict[str, Any]

RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_API_VERSION = f"{RBAC_GROUP}/v1"
LEVELS = ("view", "edit", "admin", "manage", "sudo")
MANAGE_ROLE = "accurate:manage"
SUDO_PREFIX = "accurate:sudo:"
SUDOER_PREFIX = "accurate:sudoer:"
BINDING_PREFIX = "accurate-access-"
# The RoleBinding that gives a root's sudo group admin in the tree.
SUDO_GROUP_BINDING = f"{BINDING_PREFIX}sudo-group"
# On the cluster-scoped objects the controller keeps for a sudoer: how it finds them (label)
# and whom each is for (annotation: a user name may be too long or odd for a label value).
LABEL_SUDOER = f"{GROUP}/sudoer"
ANNOTATION_SUDOER = f"{GROUP}/sudoer"
# What the controller's sudo keeper does (group, resource, verbs): all that controller/config/sudo
# grants. Without them a sudo grant gives nobody anything.
KEEPER_RIGHTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (RBAC_GROUP, "clusterroles", ("list", "create", "update", "delete", "escalate", "bind")),
    (RBAC_GROUP, "clusterrolebindings", ("list", "create", "update", "delete")),
)
# What a cluster administrator does to turn the sudo keeper on; the controller's log, the
# plugin and docs/tenant-access.md say it in these words.
TURN_SUDO_ON = (
    "apply controller/config/sudo (kustomize) or set the Helm chart's tenantAccess.sudo=true "
    "(see docs/tenant-access.md)"
)
_BUILTIN_ROLES = {"view": "view", "edit": "edit", "admin": "admin", "manage": MANAGE_ROLE}
_NAME_LIMIT = 253

SubjectKind = Literal["User", "Group"]


class AccessError(ValueError):
    """A grant that cannot be expressed; the message says what to change."""


@dataclass(frozen=True, order=True)
class Subject:
    """Whom a grant names: a user or a group, as RBAC subjects name them."""

    kind: SubjectKind
    name: str

    def to_rbac(self) -> Obj:
        return {"apiGroup": RBAC_GROUP, "kind": self.kind, "name": self.name}

    def __str__(self) -> str:
        return f"group:{self.name}" if self.kind == "Group" else self.name


def parse_subject(text: str) -> Subject:
    """``alice`` or ``user:alice`` is a user, ``group:devs`` a group."""
    kind, separator, name = text.partition(":")
    if separator and kind in ("user", "group"):
        if not name:
            raise AccessError(f"{text!r} names no {kind}")
        return Subject("Group" if kind == "group" else "User", name)
    if not text:
        raise AccessError("an empty name is neither a user nor a group")
    return Subject("User", text)


def sudo_group(root: str) -> str:
    return SUDO_PREFIX + root


def binding_name(level: str) -> str:
    """The RoleBinding in the root that lists the people of ``level``."""
    return BINDING_PREFIX + level


def level_of_binding(name: str) -> str | None:
    level = name.removeprefix(BINDING_PREFIX)
    return level if name.startswith(BINDING_PREFIX) and level in LEVELS else None


def role_of(level: str, root: str) -> str:
    """The ClusterRole a level's RoleBinding refers to."""
    return sudo_group(root) if level == "sudo" else _BUILTIN_ROLES[level]


def subjects_of(binding: Mapping[str, Any]) -> list[Subject]:
    """The users and groups a RoleBinding names (ServiceAccounts are not ours to list)."""
    return [
        Subject(s["kind"], s.get("name", ""))
        for s in binding.get("subjects") or ()
        if s.get("kind") in ("User", "Group")
    ]


def _binding(root: str, name: str, role: str, subjects: Iterable[Subject]) -> Obj:
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "RoleBinding",
        "metadata": {
            "name": name,
            "namespace": root,
            "labels": {LABEL_CREATED_BY: CREATED_BY_VALUE},
            "annotations": {ANNOTATION_PROPAGATE: PROPAGATE_UPDATE},
        },
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
        "subjects": [s.to_rbac() for s in sorted(set(subjects))],
    }


def grant_binding(root: str, level: str, subjects: Iterable[Subject]) -> Obj:
    return _binding(root, binding_name(level), role_of(level, root), subjects)


def sudo_group_binding(root: str) -> Obj:
    return _binding(root, SUDO_GROUP_BINDING, "admin", [Subject("Group", sudo_group(root))])


def sudo_role(root: str) -> Obj:
    """The ClusterRole a root's sudoers are bound to: impersonating the root's sudo group."""
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRole",
        "metadata": {"name": sudo_group(root), "labels": {LABEL_CREATED_BY: CREATED_BY_VALUE}},
        "rules": [_impersonate("groups", [sudo_group(root)])],
    }


def _impersonate(resource: str, names: Sequence[str]) -> Obj:
    return {
        "apiGroups": [""],
        "resources": [resource],
        "verbs": ["impersonate"],
        "resourceNames": list(names),
    }


def check_sudo_subjects(subjects: Iterable[Subject]) -> None:
    """Sudo is for users: Kubernetes impersonation needs a user (``--as``), and RBAC cannot let
    a group's members impersonate only themselves."""
    groups = [s.name for s in subjects if s.kind == "Group"]
    if groups:
        raise AccessError(
            f"sudo is granted to users, not groups ({', '.join(groups)}): impersonation needs "
            "--as=<user>, and RBAC cannot let each member of a group impersonate only themselves"
        )


# Writes a grant or a revocation stands for, in the order they must be made.

Verb = Literal["create", "replace", "delete"]


@dataclass(frozen=True)
class Edit:
    """One object to create, replace (``obj`` carries the resourceVersion read) or delete."""

    verb: Verb
    obj: Obj

    def describe(self) -> str:
        meta = self.obj["metadata"]
        where = f"{meta['namespace']}/" if meta.get("namespace") else ""
        people = ", ".join(str(s) for s in subjects_of(self.obj))
        suffix = f" ({people})" if people and self.verb != "delete" else ""
        return f"{self.verb} {self.obj['kind']} {where}{meta['name']}{suffix}"


def grant(
    root: str, level: str, wanted: Sequence[Subject], existing: Mapping[str, Obj | None]
) -> list[Edit]:
    """What ``access grant`` writes; ``existing`` holds what is there now, by object name (the
    level's RoleBinding, and for sudo the group's RoleBinding and the ClusterRole)."""
    if level == "sudo":
        check_sudo_subjects(wanted)
    edits: list[Edit] = []
    if level == "sudo":
        edits += _ensure(sudo_role(root), existing)
        edits += _ensure(sudo_group_binding(root), existing)
    current = existing.get(binding_name(level))
    if current is None:
        return [*edits, Edit("create", grant_binding(root, level, wanted))]
    have = subjects_of(current)
    if set(wanted) <= set(have):
        return edits
    return [*edits, Edit("replace", _with_subjects(current, [*have, *wanted]))]


def revoke(
    root: str, level: str, unwanted: Sequence[Subject], existing: Mapping[str, Obj | None]
) -> list[Edit]:
    """What ``access revoke`` writes; the last sudoer gone takes the sudo group's RoleBinding
    and ClusterRole with it."""
    current = existing.get(binding_name(level))
    if current is None or not set(unwanted) & set(subjects_of(current)):
        return []
    left = [s for s in subjects_of(current) if s not in set(unwanted)]
    if left:
        return [Edit("replace", _with_subjects(current, left))]
    edits = [Edit("delete", current)]
    if level == "sudo":
        for name in (SUDO_GROUP_BINDING, sudo_group(root)):
            found = existing.get(name)
            if found is not None:
                edits.append(Edit("delete", found))
    return edits


def _ensure(wanted: Obj, existing: Mapping[str, Obj | None]) -> list[Edit]:
    return [] if existing.get(wanted["metadata"]["name"]) else [Edit("create", wanted)]


def _with_subjects(binding: Mapping[str, Any], subjects: Iterable[Subject]) -> Obj:
    """The binding with these users and groups (other subjects, ServiceAccounts, kept)."""
    others = [s for s in binding.get("subjects") or () if s.get("kind") not in ("User", "Group")]
    ours = [s.to_rbac() for s in sorted(set(subjects))]
    return {**binding, "subjects": others + ours}


# Listing grants


@dataclass(frozen=True)
class GrantRow:
    """One person's grant as found in one namespace: in the root itself, or a copy."""

    namespace: str
    level: str
    subject: Subject
    source: str

    def to_data(self) -> Obj:
        return {
            "namespace": self.namespace,
            "level": self.level,
            "subject": str(self.subject),
            "from": self.source,
        }


def grant_rows(root: str, bindings: Iterable[Mapping[str, Any]]) -> list[GrantRow]:
    """The grants among a tree's RoleBindings: the root's own, and the copies of them."""
    rows = []
    for binding in bindings:
        meta = binding["metadata"]
        level = level_of_binding(meta["name"])
        if level is None:
            continue
        origin = (meta.get("annotations") or {}).get(ANNOTATION_FROM)
        namespace = meta.get("namespace", "")
        source = f"copy of {origin}/{meta['name']}" if origin else "grant"
        if namespace != root and not origin:
            source = "not a copy: ignored by the access model"
        rows += [GrantRow(namespace, level, s, source) for s in subjects_of(binding)]
    return sorted(
        rows, key=lambda r: (r.namespace != root, r.namespace, LEVELS.index(r.level), r.subject)
    )


# The cluster-scoped objects the controller keeps for sudoers


def sudoers(
    bindings: Iterable[Mapping[str, Any]], roots: Iterable[str]
) -> dict[str, tuple[str, ...]]:
    """Each user the roots' sudo grants name, and the roots that name them.

    Only a root's own sudo RoleBinding counts, and only when it refers to that root's sudo
    ClusterRole: copies below a root, and bindings anyone could write, give nothing.
    """
    root_set = set(roots)
    found: dict[str, set[str]] = {}
    for binding in bindings:
        meta = binding.get("metadata") or {}
        root = meta.get("namespace", "")
        ref = binding.get("roleRef") or {}
        if (
            root not in root_set
            or meta.get("name") != binding_name("sudo")
            or ref.get("kind") != "ClusterRole"
            or ref.get("name") != sudo_group(root)
        ):
            continue
        for subject in subjects_of(binding):
            if subject.kind == "User":
                found.setdefault(subject.name, set()).add(root)
    return {user: tuple(sorted(roots_)) for user, roots_ in sorted(found.items())}


def sudoer_name(user: str) -> str:
    """The name of the ClusterRole and ClusterRoleBinding kept for ``user``: readable when the
    user name may be part of an object name, else a digest of it."""
    name = SUDOER_PREFIX + user
    if len(name) <= _NAME_LIMIT and user not in (".", "..") and not set(user) & {"/", "%"}:
        return name
    return SUDOER_PREFIX + "sha256-" + hashlib.sha256(user.encode()).hexdigest()


def sudoer_objects(user: str, roots: Sequence[str]) -> tuple[Obj, Obj]:
    """The ClusterRole that lets ``user`` impersonate themselves and the sudo groups of
    ``roots``, and the ClusterRoleBinding that gives it to them."""
    name = sudoer_name(user)
    metadata = {
        "name": name,
        "labels": {LABEL_SUDOER: "true", LABEL_CREATED_BY: CREATED_BY_VALUE},
        "annotations": {ANNOTATION_SUDOER: user},
    }
    role = {
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRole",
        "metadata": metadata,
        "rules": [
            _impersonate("users", [user]),
            _impersonate("groups", [sudo_group(root) for root in roots]),
        ],
    }
    binding = {
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRoleBinding",
        "metadata": metadata,
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
        "subjects": [Subject("User", user).to_rbac()],
    }
    return role, binding


# What `access check` asks RBAC about a person


@dataclass(frozen=True)
class Probe:
    """One thing a person may or may not do in a namespace, as a SubjectAccessReview asks it."""

    capability: str
    verb: str
    group: str
    resource: str

    def review(self, user: str, groups: Sequence[str], namespace: str) -> Obj:
        attributes = {
            "namespace": namespace,
            "verb": self.verb,
            "group": self.group,
            "resource": self.resource,
        }
        return subject_access_review(user, groups, attributes, namespace)


# Asked in each namespace of the tree (LocalSubjectAccessReview). Chosen so that each level
# shows: view reads, edit changes workloads, admin and manage change grants, and only admin (or
# edit) reads Secrets.
PROBES = (
    Probe("read pods", "list", "", "pods"),
    Probe("read secrets", "get", "", "secrets"),
    Probe("change deployments", "create", "apps", "deployments"),
    Probe("create sub-namespaces", "create", GROUP, "subnamespaces"),
    Probe("change grants", "create", RBAC_GROUP, "rolebindings"),
)


def sudo_review(user: str, groups: Sequence[str], root: str) -> Obj:
    """Whether ``user`` may impersonate the root's sudo group (at the cluster scope)."""
    attributes = {
        "verb": "impersonate",
        "group": "",
        "resource": "groups",
        "name": sudo_group(root),
    }
    return subject_access_review(user, groups, attributes)


def subject_access_review(
    user: str, groups: Sequence[str], attributes: Obj, namespace: str | None = None
) -> Obj:
    """Whether ``user``, in ``groups``, may do what ``attributes`` say. Asked about one
    namespace, it is a LocalSubjectAccessReview, which the namespace's admins (the built-in
    ``admin``, ``accurate:manage``) may create; the cluster-wide SubjectAccessReview is for
    cluster administrators."""
    review: Obj = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": list(groups), "resourceAttributes": attributes},
    }
    if namespace is None:
        return review
    return {**review, "kind": "LocalSubjectAccessReview", "metadata": {"namespace": namespace}}
