"""RBAC authorization as kube-apiserver does it, from the Roles and bindings in the store.

A request is allowed when a rule reachable from a binding to the user, one of their groups or
their ServiceAccount covers it; RBAC never denies explicitly, it only has no opinion. Members of
``system:masters`` pass before RBAC is asked, as with the real privileged-group authorizer. The
bindings are indexed by subject, the index follows each change of the store as it is made (like
the real authorizer's informers, but never behind), and what a user holds in a namespace is
memoized until the next RBAC change: judging a request costs a few dictionary look-ups.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from accurate_testbed.apiserver import errors
from accurate_testbed.apiserver.errors import ApiError
from accurate_testbed.apiserver.resources import RBAC
from accurate_testbed.apiserver.routing import ResourcePath, verb_of
from accurate_testbed.apiserver.store import Change, Store

UserInfo = Mapping[str, Any]  # authentication/v1 UserInfo: username, uid, groups, extra

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
_KINDS = ("roles", "rolebindings", "clusterroles", "clusterrolebindings")
# kube-apiserver escapes these in Forbidden messages so they never read as HTML.
_SANITIZED = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def go_quote(text: str) -> str:
    """Go's %q for the names that occur here."""
    return json.dumps(text, ensure_ascii=False)


def go_strings(items: Iterable[str]) -> str:
    """Go's %q for a []string: ``["a" "b"]``."""
    return "[" + " ".join(go_quote(item) for item in items) + "]"


@dataclass(frozen=True, eq=False)
class Attributes:
    """What a request asks to do, as kube-apiserver's RequestInfo and authorizer see it."""

    user: UserInfo
    verb: str
    resource_request: bool = True
    group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    namespace: str = ""
    path: str = ""

    @property
    def username(self) -> str:
        return str(self.user.get("username", ""))


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


def request_attributes(
    user: UserInfo, method: str, path: str, where: ResourcePath | None, query: Mapping[str, str]
) -> Attributes:
    """The attributes of one HTTP request; a path that names no resource is judged by URL."""
    if where is None:
        return Attributes(user, method.lower(), resource_request=False, path=path)
    verb = verb_of(method, where, query.get("watch") in ("true", "1"))
    name = where.name or ""
    if verb in ("list", "watch"):
        name = _name_in_field_selector(query.get("fieldSelector", ""))
    namespace = where.namespace or ""
    if where.group == "" and where.plural == "namespaces":
        namespace = where.name or ""  # a namespace is "in" itself, so RoleBindings there apply
    return Attributes(
        user,
        verb,
        group=where.group,
        resource=where.plural,
        subresource=where.subresource or "",
        name=name,
        namespace=namespace,
        path=path,
    )


def _name_in_field_selector(selector: str) -> str:
    """A list or watch of one object by ``metadata.name`` is authorized for that name."""
    for term in selector.split(","):
        key, _, value = term.replace("==", "=").partition("=")
        if (
            key.strip() == "metadata.name"
            and value
            and value not in (".", "..")
            and not (set(value) & {"/", "%"})
        ):
            return value
    return ""


def forbidden(attributes: Attributes, reason: str) -> ApiError:
    """The 403 kube-apiserver sends when no authorizer allowed the request."""
    user = go_quote(attributes.username)
    if not attributes.resource_request:
        what = f"User {user} cannot {attributes.verb} path {go_quote(attributes.path)}"
    else:
        resource = attributes.resource
        if attributes.subresource:
            resource += "/" + attributes.subresource
        scope = (
            f"in the namespace {go_quote(attributes.namespace)}"
            if attributes.namespace
            else "at the cluster scope"
        )
        what = (
            f"User {user} cannot {attributes.verb} resource {go_quote(resource)} in API group "
            f"{go_quote(attributes.group)} {scope}"
        )
    what = what.translate(_SANITIZED)
    if reason:
        what = f"{what}: {reason}"
    if not attributes.resource_request:
        return ApiError(403, "Forbidden", f"forbidden: {what}", {})
    return errors.forbidden(attributes.group, attributes.resource, attributes.name, what)


@dataclass(frozen=True)
class Rule:
    """A PolicyRule, with sets for matching and the original lists for messages."""

    source: Mapping[str, Any]
    verbs: frozenset[str]
    groups: frozenset[str]
    resources: frozenset[str]
    names: frozenset[str]
    urls: tuple[str, ...]

    @classmethod
    def parse(cls, rule: Mapping[str, Any]) -> Rule:
        return cls(
            rule,
            frozenset(rule.get("verbs") or ()),
            frozenset(rule.get("apiGroups") or ()),
            frozenset(rule.get("resources") or ()),
            frozenset(rule.get("resourceNames") or ()),
            tuple(rule.get("nonResourceURLs") or ()),
        )

    def allows(self, attributes: Attributes) -> bool:
        if "*" not in self.verbs and attributes.verb not in self.verbs:
            return False
        if not attributes.resource_request:
            return any(url_covers(url, attributes.path) for url in self.urls)
        return (
            ("*" in self.groups or attributes.group in self.groups)
            and self._resource_matches(attributes.resource, attributes.subresource)
            and (not self.names or attributes.name in self.names)
        )

    def _resource_matches(self, resource: str, subresource: str) -> bool:
        if "*" in self.resources:
            return True
        if not subresource:
            return resource in self.resources
        return f"{resource}/{subresource}" in self.resources or f"*/{subresource}" in self.resources


def url_covers(pattern: str, path: str) -> bool:
    """A nonResourceURL: exact, or a prefix ending in ``*``."""
    return pattern == path or (pattern.endswith("*") and path.startswith(pattern.rstrip("*")))


@dataclass(frozen=True, eq=False)
class Binding:
    """A RoleBinding or ClusterRoleBinding (namespace ``""``)."""

    kind: str
    name: str
    namespace: str
    role_kind: str
    role_name: str
    subjects: tuple[Mapping[str, Any], ...]

    @classmethod
    def parse(cls, obj: Mapping[str, Any]) -> Binding:
        meta, ref = obj["metadata"], obj.get("roleRef") or {}
        return cls(
            obj["kind"],
            meta["name"],
            meta.get("namespace", ""),
            ref.get("kind", ""),
            ref.get("name", ""),
            tuple(obj.get("subjects") or ()),
        )

    def subject_key(self, subject: Mapping[str, Any]) -> tuple[str, str] | None:
        """The user or group a subject stands for; a ServiceAccount is its user name."""
        kind, name = subject.get("kind"), subject.get("name", "")
        if kind == "User":
            return ("user", name)
        if kind == "Group":
            return ("group", name)
        if kind == "ServiceAccount":
            namespace = subject.get("namespace") or self.namespace
            return ("user", f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}") if namespace else None
        return None

    def subject_keys(self) -> set[tuple[str, str]]:
        return {key for key in map(self.subject_key, self.subjects) if key is not None}

    def describe(self, subject: Mapping[str, Any]) -> str:
        """As in the real "RBAC: allowed by ..." reasons."""
        name = f"{self.name}/{self.namespace}" if self.namespace else self.name
        shown = subject.get("name", "")
        if subject.get("kind") == "ServiceAccount":
            shown = f"{shown}/{subject.get('namespace') or self.namespace}"
        return (
            f"{self.kind} {go_quote(name)} of {self.role_kind} {go_quote(self.role_name)} to "
            f"{subject.get('kind')} {go_quote(shown)}"
        )


Grant = tuple[Binding, Mapping[str, Any], tuple[Rule, ...]]
Grants = tuple[tuple[Grant, ...], tuple[str, ...]]


def user_keys(user: UserInfo) -> frozenset[tuple[str, str]]:
    return frozenset(
        [("user", str(user.get("username", "")))]
        + [("group", group) for group in user.get("groups") or ()]
    )


class _Index:
    """The RBAC objects, with bindings looked up by subject, kept current change by change.

    Writers (the store, under its lock) replace lists and the memo instead of changing them in
    place, so readers need no lock: one racing a change may judge by the state just before it,
    as an informer-fed authorizer would, but what it memoizes is dropped with the old memo.
    """

    def __init__(self) -> None:
        self.cluster_roles: dict[str, tuple[Rule, ...]] = {}
        self.roles: dict[tuple[str, str], tuple[Rule, ...]] = {}
        # namespace ("" for ClusterRoleBindings) -> subject key -> bindings naming that subject
        self.bindings: dict[str, dict[tuple[str, str], list[Binding]]] = {}
        self._by_name: dict[tuple[str, tuple[str, str]], Binding] = {}
        self._memo: dict[tuple[Any, ...], Grants] = {}

    def apply(self, plural: str, obj: Mapping[str, Any], deleted: bool) -> None:
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if plural == "clusterroles":
            self._set(self.cluster_roles, meta["name"], None if deleted else _rules(obj))
        elif plural == "roles":
            self._set(self.roles, key, None if deleted else _rules(obj))
        else:
            old = self._by_name.pop((plural, key), None)
            if old is not None:
                self._unindex(old)
            if not deleted:
                binding = self._by_name[(plural, key)] = Binding.parse(obj)
                self._index(binding)
        self._memo = {}

    @staticmethod
    def _set(table: dict[Any, tuple[Rule, ...]], key: Any, rules: tuple[Rule, ...] | None) -> None:
        if rules is None:
            table.pop(key, None)
        else:
            table[key] = rules

    def _index(self, binding: Binding) -> None:
        by_subject = self.bindings.setdefault(binding.namespace, {})
        for key in binding.subject_keys():
            by_subject[key] = [*by_subject.get(key, ()), binding]

    def _unindex(self, binding: Binding) -> None:
        by_subject = self.bindings.get(binding.namespace, {})
        for key in binding.subject_keys():
            by_subject[key] = [b for b in by_subject.get(key, ()) if b is not binding]

    def role_rules(self, kind: str, name: str, namespace: str) -> tuple[Rule, ...] | None:
        if kind == "ClusterRole":
            return self.cluster_roles.get(name)
        return self.roles.get((namespace, name)) if kind == "Role" else None

    def grants(self, user: UserInfo, namespace: str) -> Grants:
        """The rules that apply to the user in the namespace, with where each comes from, and the
        errors met resolving them (bindings to missing roles); memoized until the next change."""
        memo = self._memo
        keys = user_keys(user)
        cached = memo.get((keys, namespace))
        if cached is not None:
            return cached
        found: list[Grant] = []
        problems: list[str] = []
        for scope in ("", namespace) if namespace else ("",):
            for binding in self._bindings_for(keys, scope):
                subject = next(s for s in binding.subjects if binding.subject_key(s) in keys)
                rules = self.role_rules(binding.role_kind, binding.role_name, binding.namespace)
                if rules is None:
                    problems.append(_role_problem(binding.role_kind, binding.role_name))
                else:
                    found.append((binding, subject, rules))
        result = memo[(keys, namespace)] = (tuple(found), tuple(problems))
        return result

    def _bindings_for(self, keys: Iterable[tuple[str, str]], namespace: str) -> list[Binding]:
        by_subject = self.bindings.get(namespace, {})
        unique = {id(b): b for key in keys for b in by_subject.get(key, ())}
        return sorted(unique.values(), key=lambda binding: binding.name)


def _role_problem(kind: str, name: str) -> str:
    """The lister's NotFound text, which the real authorizer puts in its reasons."""
    if kind in ("Role", "ClusterRole"):
        return f'{kind.lower()}.{RBAC} "{name}" not found'
    return f"unsupported role reference kind: {go_quote(kind)}"


def aggregate(problems: Iterable[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message, or ``[a, b]`` without duplicates."""
    unique = list(dict.fromkeys(problems))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


class Authorizer:
    """Judges requests against one store, whose RBAC changes it follows as they happen."""

    def __init__(self, store: Store) -> None:
        self.index = _Index()
        with store.changed:
            for plural in _KINDS:
                for obj in store.select(RBAC, plural)[0]:
                    self.index.apply(plural, obj, deleted=False)
            store.subscribe(self._follow)

    def _follow(self, change: Change | None) -> None:
        if change is None:
            self.index = _Index()
        elif change.group == RBAC and change.plural in _KINDS:
            self.index.apply(change.plural, change.obj, change.type == "DELETED")

    def authorize(self, attributes: Attributes) -> Decision:
        if MASTERS in (attributes.user.get("groups") or ()):
            return Decision(True)
        grants, problems = self.index.grants(attributes.user, attributes.namespace)
        for binding, subject, rules in grants:
            if any(rule.allows(attributes) for rule in rules):
                return Decision(True, f"RBAC: allowed by {binding.describe(subject)}")
        return Decision(False, f"RBAC: {aggregate(problems)}" if problems else "")

    def require(self, attributes: Attributes) -> None:
        decision = self.authorize(attributes)
        if not decision.allowed:
            raise forbidden(attributes, decision.reason)

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Rule], tuple[str, ...]]:
        """Every rule the user holds in the namespace (cluster-wide ones included)."""
        grants, problems = self.index.grants(user, namespace)
        return [rule for _, _, rules in grants for rule in rules], problems


def _rules(obj: Mapping[str, Any]) -> tuple[Rule, ...]:
    return tuple(Rule.parse(rule) for rule in obj.get("rules") or ())
