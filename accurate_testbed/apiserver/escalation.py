"""RBAC's escalation prevention: nobody grants more than they hold.

kube-apiserver refuses to store a Role or ClusterRole whose rules the writer does not hold
(unless they may ``escalate`` it), and a RoleBinding or ClusterRoleBinding to a role whose rules
the writer does not hold (unless they may ``bind`` it); ``system:masters`` is exempt, and so is
a write that only touches what the garbage collector needs. Otherwise a namespace admin could
hand themselves cluster-admin. The messages are the real ones, listing the missing rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from accurate_testbed.apiserver import errors
from accurate_testbed.apiserver.rbac import (
    MASTERS,
    Attributes,
    Authorizer,
    Rule,
    UserInfo,
    aggregate,
    go_quote,
    go_strings,
    url_covers,
)
from accurate_testbed.apiserver.resources import RBAC, Resource

Obj = dict[str, Any]

FULL_AUTHORITY = (
    Rule.parse({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
    Rule.parse({"verbs": ["*"], "nonResourceURLs": ["*"]}),
)
_GC_FIELDS = ("ownerReferences", "finalizers", "deletionTimestamp", "deletionGracePeriodSeconds")
_VOLATILE = ("managedFields", "resourceVersion")


class EscalationGuard:
    """Called by the write pipeline for every object it is about to validate."""

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

    def check(
        self, operation: str, resource: Resource, obj: Obj, old: Obj | None, user: UserInfo
    ) -> None:
        if resource.group != RBAC or MASTERS in (user.get("groups") or ()):
            return
        if old is not None and _only_gc_fields_differ(obj, old):
            return
        meta = obj["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        if resource.kind in ("Role", "ClusterRole"):
            # kube-apiserver asks with the request's name, which a create (POST) does not have.
            asked = Attributes(
                user,
                "escalate",
                group=RBAC,
                resource=resource.plural,
                name=name if operation == "UPDATE" else "",
                namespace=namespace,
            )
            if not self.authorizer.authorize(asked).allowed:
                self._check_role(resource, obj, old, user)
        elif not self._may_bind(obj, user):
            self._check_binding(resource, obj, user)

    def _check_role(self, resource: Resource, obj: Obj, old: Obj | None, user: UserInfo) -> None:
        meta = obj["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        rules = [Rule.parse(rule) for rule in obj.get("rules") or ()]
        self._confirm_held(resource, name, namespace, rules, user)
        if "aggregationRule" in obj or (old is not None and "aggregationRule" in old):
            missing, _ = self._missing(FULL_AUTHORITY, namespace, user)
            if missing:
                raise errors.forbidden(
                    RBAC,
                    resource.plural,
                    name,
                    "must have cluster-admin privileges to use the aggregationRule",
                )

    def _may_bind(self, binding: Obj, user: UserInfo) -> bool:
        ref = binding.get("roleRef") or {}
        plural = {"ClusterRole": "clusterroles", "Role": "roles"}.get(ref.get("kind", ""))
        if plural is None:
            return False
        asked = Attributes(
            user,
            "bind",
            group=ref.get("apiGroup", ""),
            resource=plural,
            name=ref.get("name", ""),
            namespace=binding["metadata"].get("namespace", ""),
        )
        return self.authorizer.authorize(asked).allowed

    def _check_binding(self, resource: Resource, binding: Obj, user: UserInfo) -> None:
        meta, ref = binding["metadata"], binding.get("roleRef") or {}
        namespace = meta.get("namespace", "")
        kind, role_name = ref.get("kind", ""), ref.get("name", "")
        rules = self.authorizer.index.role_rules(kind, role_name, namespace)
        if rules is None:
            raise errors.not_found(
                RBAC, "clusterroles" if kind == "ClusterRole" else "roles", role_name
            )
        self._confirm_held(resource, meta["name"], namespace, rules, user)

    def _confirm_held(
        self,
        resource: Resource,
        name: str,
        namespace: str,
        rules: Sequence[Rule],
        user: UserInfo,
    ) -> None:
        missing, problems = self._missing(rules, namespace, user)
        if not missing:
            return
        listed = "\n".join(sorted({_compact_string(rule) for rule in _compact(missing)}))
        why = (
            f"user {go_quote(str(user.get('username', '')))} "
            f"(groups={go_strings(user.get('groups') or ())}) is attempting to grant RBAC "
            f"permissions not currently held:\n{listed}"
        )
        if problems:
            why += f"; resolution errors: [{aggregate(problems)}]"
        raise errors.forbidden(RBAC, resource.plural, name, why)

    def _missing(
        self, rules: Iterable[Rule], namespace: str, user: UserInfo
    ) -> tuple[list[Obj], tuple[str, ...]]:
        held, problems = self.authorizer.rules_for(user, namespace)
        missing = [
            part
            for rule in rules
            for part in _breakdown(rule.source)
            if not any(_covers(owner, Rule.parse(part)) for owner in held)
        ]
        return missing, problems


def _breakdown(rule: Mapping[str, Any]) -> list[Obj]:
    """A rule as single-verb, single-group, single-resource (and single-name) rules."""
    parts: list[Obj] = []
    names = rule.get("resourceNames") or []
    for group in rule.get("apiGroups") or []:
        for resource in rule.get("resources") or []:
            for verb in rule.get("verbs") or []:
                base = {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
                parts += [{**base, "resourceNames": [name]} for name in names] or [base]
    for url in rule.get("nonResourceURLs") or []:
        parts += [{"nonResourceURLs": [url], "verbs": [verb]} for verb in rule.get("verbs") or []]
    return parts


def _covers(owner: Rule, part: Rule) -> bool:
    """Whether a held rule grants everything a broken-down rule does."""
    return (
        ("*" in owner.verbs or part.verbs <= owner.verbs)
        and ("*" in owner.groups or part.groups <= owner.groups)
        and _resources_covered(owner.resources, part.resources)
        and all(any(url_covers(o, url) for o in owner.urls) for url in part.urls)
        and (not owner.names or (bool(part.names) and part.names <= owner.names))
    )


def _resources_covered(held: frozenset[str], wanted: frozenset[str]) -> bool:
    if "*" in held:
        return True
    return all(
        resource in held or ("/" in resource and "*/" + resource.split("/", 1)[1] in held)
        for resource in wanted
    )


def _compact(rules: Sequence[Obj]) -> list[Obj]:
    """Rules that differ only by verb, merged (what the real message lists)."""
    merged: dict[tuple[str, ...], Obj] = {}
    others: list[Obj] = []
    for rule in rules:
        if rule.get("nonResourceURLs"):
            others.append(rule)
            continue
        key = (rule["apiGroups"][0], rule["resources"][0], *(rule.get("resourceNames") or ()))
        if key in merged:
            merged[key]["verbs"] = merged[key]["verbs"] + rule["verbs"]
        else:
            merged[key] = dict(rule)
    return others + list(merged.values())


def _compact_string(rule: Mapping[str, Any]) -> str:
    """rbacv1helpers.CompactString: ``{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}``."""
    fields = (
        ("APIGroups", "apiGroups"),
        ("Resources", "resources"),
        ("NonResourceURLs", "nonResourceURLs"),
        ("ResourceNames", "resourceNames"),
        ("Verbs", "verbs"),
    )
    shown = [f"{label}:{go_strings(rule[key])}" for label, key in fields if rule.get(key)]
    return "{" + ", ".join(shown) + "}"


def _only_gc_fields_differ(new: Obj, old: Obj) -> bool:
    """Such writes (the garbage collector's, or finalizers') pass whatever the rules say, so a
    role its writer could not create can still be deleted."""

    def stripped(obj: Obj) -> Obj:
        meta = obj["metadata"]
        kept = {k: v for k, v in meta.items() if k not in _GC_FIELDS + _VOLATILE}
        return {**obj, "metadata": kept}

    return stripped(new) == stripped(old)
