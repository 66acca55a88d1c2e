"""The controller's configuration file (DESIGN.md 6.1): its shape, loading and validation.

Loading checks everything that can be checked from the file alone; the watches are checked
against the API server's resource lists by ``resolve_watches``, which takes those lists as an
argument so that this module stays pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from libaccurate.constants import RESERVED_PREFIX
from libaccurate.glob_overlap import common_key
from libaccurate.globs import GlobError, validate_glob
from libaccurate.naming import compile_policy_root
from libaccurate.validation import validate_dns1123_subdomain


@dataclass(frozen=True, order=True)
class GroupVersionKind:
    """A kind named the way the config file names it; ``group`` is "" for the core group."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass(frozen=True)
class NamingPolicy:
    """A rule for sub-namespace names: under roots matching ``root``, names must match ``match``."""

    root: str
    match: str


@dataclass(frozen=True)
class TreeLabelSettings:
    """``treeLabels``: every namespace of a tree gets ``<ancestor>.<suffix>/depth`` labels."""

    suffix: str


@dataclass(frozen=True)
class Config:
    """A validated configuration; the empty config is valid and propagates nothing."""

    label_keys: tuple[str, ...] = ()
    annotation_keys: tuple[str, ...] = ()
    sub_namespace_label_keys: tuple[str, ...] = ()
    sub_namespace_annotation_keys: tuple[str, ...] = ()
    watches: tuple[GroupVersionKind, ...] = ()
    propagate_label_key_excludes: tuple[str, ...] = ()
    propagate_annotation_key_excludes: tuple[str, ...] = ()
    naming_policies: tuple[NamingPolicy, ...] = ()
    # Ours, not the Go Accurate's: None keeps tree labels off (issue 14, docs/hnc-features.md).
    tree_labels: TreeLabelSettings | None = None

    @property
    def tree_label_suffix(self) -> str | None:
        """What tree label keys end with, or None when tree labels are off."""
        return self.tree_labels.suffix if self.tree_labels else None


@dataclass(frozen=True)
class WatchedResource:
    """A watched kind as the API server serves it: what the controller lists, watches and writes."""

    gvk: GroupVersionKind
    plural: str
    namespaced: bool
    verbs: tuple[str, ...]


class ConfigError(ValueError):
    """A config file the controller must not start with; says where, what and why."""

    def __init__(self, source: str, key: str, value: object, reason: str) -> None:
        self.source = source
        self.key = key
        self.value = value
        self.reason = reason
        super().__init__(source, key, value, reason)

    def __str__(self) -> str:
        if not self.key:
            return f"{self.source}: {self.reason}"
        shown = json.dumps(self.value, default=str)
        return f"{self.source}: {self.key}: {self.reason} (value: {shown})"


_INHERITED_KEY_FIELDS = {
    "labelKeys": "label_keys",
    "annotationKeys": "annotation_keys",
    "subNamespaceLabelKeys": "sub_namespace_label_keys",
    "subNamespaceAnnotationKeys": "sub_namespace_annotation_keys",
}
_EXCLUDE_FIELDS = {
    "propagateLabelKeyExcludes": "propagate_label_key_excludes",
    "propagateAnnotationKeyExcludes": "propagate_annotation_key_excludes",
}
_TOP_LEVEL_FIELDS = (
    *_INHERITED_KEY_FIELDS,
    "watches",
    *_EXCLUDE_FIELDS,
    "namingPolicies",
    "treeLabels",
)
_WATCH_FIELDS = ("group", "version", "kind")
_POLICY_FIELDS = ("root", "match")
_TREE_LABEL_FIELDS = ("suffix",)


def parse_config(text: str, source: str) -> Config:
    """Load and check a config file's text; ``source`` names the file in errors.

    Checks everything that needs no API server, like the Go Accurate's ``Validate``; the watches
    are checked against the server by ``resolve_watches``.
    """
    document = _load_document(text, source)
    if document is None:
        return Config()
    if not isinstance(document, dict):
        raise ConfigError(source, "", document, "the config must be a mapping of settings")
    _reject_unknown_fields(document, _TOP_LEVEL_FIELDS, "", source)
    lists: dict[str, tuple[str, ...]] = {}
    for field_name, attribute in {**_INHERITED_KEY_FIELDS, **_EXCLUDE_FIELDS}.items():
        lists[attribute] = _patterns(document, field_name, source)
    for field_name, attribute in _INHERITED_KEY_FIELDS.items():
        _reject_reserved_keys(lists[attribute], field_name, source)
    return Config(
        **lists,
        watches=tuple(
            _watch(item, f"watches[{i}]", source)
            for i, item in enumerate(_list(document, "watches", source))
        ),
        naming_policies=tuple(
            _naming_policy(item, f"namingPolicies[{i}]", source)
            for i, item in enumerate(_list(document, "namingPolicies", source))
        ),
        tree_labels=_tree_labels(document.get("treeLabels"), source),
    )


def resolve_watches(
    config: Config, resource_lists: Iterable[Mapping[str, Any]], source: str
) -> tuple[WatchedResource, ...]:
    """Match each watch with the API server's discovery data (``APIResourceList`` dicts).

    A watch must name a namespaced kind the server serves; subresources are not kinds.
    """
    served: dict[tuple[str, str], Mapping[str, Any]] = {}
    for resource_list in resource_lists:
        group_version = resource_list.get("groupVersion", "")
        for resource in resource_list.get("resources") or ():
            if "/" not in resource.get("name", "/"):
                served.setdefault((group_version, resource.get("kind", "")), resource)
    resolved = []
    for i, gvk in enumerate(config.watches):
        key, value = f"watches[{i}]", _gvk_dict(gvk)
        resource = served.get((gvk.api_version, gvk.kind))
        if resource is None:
            reason = f"the API server serves no kind {gvk.kind} in {gvk.api_version}"
            raise ConfigError(source, key, value, reason)
        if not resource.get("namespaced", False):
            reason = f"{gvk.kind} is cluster-scoped; only namespaced kinds can be propagated"
            raise ConfigError(source, key, value, reason)
        verbs = tuple(resource.get("verbs") or ())
        resolved.append(WatchedResource(gvk, resource["name"], True, verbs))
    return tuple(resolved)


# Inherited key lists and the SubNamespace key lists whose values win over them.
_OVERRIDES = (
    ("labelKeys", "subNamespaceLabelKeys"),
    ("annotationKeys", "subNamespaceAnnotationKeys"),
)


def tenant_overrides(config: Config) -> tuple[str, ...]:
    """A warning for each kind of metadata where a key can match both an inherited pattern and
    a SubNamespace pattern: there the tenant's SubNamespace value wins (DESIGN.md 4.2), so a
    tenant can override what their tree would impose, a Pod Security level for instance.
    Patterns overlap when some key matches both (``glob_overlap``); each pair is named with
    such a key."""
    warnings = []
    for inherited, tenant in _OVERRIDES:
        pairs = [
            f"{inherited} {a!r} and {tenant} {b!r} (both match {key!r})"
            for a in getattr(config, _INHERITED_KEY_FIELDS[inherited])
            for b in getattr(config, _INHERITED_KEY_FIELDS[tenant])
            if (key := common_key(a, b)) is not None
        ]
        if pairs:
            warnings.append(
                f"{inherited} and {tenant} overlap: {'; '.join(pairs)}. For a key matching "
                f"both, the value in a tenant's SubNamespace wins over the inherited one, so "
                f"tenants can override it; to keep such a key inherited, leave it out of "
                f"{tenant}"
            )
    return tuple(warnings)


def config_to_dict(config: Config) -> dict[str, Any]:
    """The config in the file's JSON form, leaving out empty settings as the Go Accurate does."""
    document: dict[str, Any] = {}
    for field_name, attribute in {**_INHERITED_KEY_FIELDS, **_EXCLUDE_FIELDS}.items():
        if getattr(config, attribute):
            document[field_name] = list(getattr(config, attribute))
    if config.watches:
        document["watches"] = [_gvk_dict(gvk) for gvk in config.watches]
    if config.naming_policies:
        document["namingPolicies"] = [
            {"root": policy.root, "match": policy.match} for policy in config.naming_policies
        ]
    if config.tree_label_suffix is not None:
        document["treeLabels"] = {"suffix": config.tree_label_suffix}
    return {name: document[name] for name in _TOP_LEVEL_FIELDS if name in document}


def _gvk_dict(gvk: GroupVersionKind) -> dict[str, str]:
    return {"group": gvk.group, "version": gvk.version, "kind": gvk.kind}


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML loading that refuses a key given twice, which would otherwise silently win."""


def _construct_unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode):
            key = loader.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping
)


def _load_document(text: str, source: str) -> object:
    """Parse YAML; for text that looks like JSON (a subset of YAML), report JSON's error."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as yaml_error:
        if not text.lstrip().startswith(("{", "[")):
            raise ConfigError(source, "", None, _yaml_problem(yaml_error)) from None
    try:
        return json.loads(text, object_pairs_hook=_unique_json_object)
    except ValueError as json_error:
        raise ConfigError(source, "", None, f"not valid JSON: {json_error}") from None


def _yaml_problem(error: yaml.YAMLError) -> str:
    """PyYAML's message, with the position in the file rather than in "<unicode string>"."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    return f"not valid YAML: {where}{problem}"


def _unique_json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            raise ValueError(f"duplicate key {key!r}")
        document[key] = value
    return document


def _reject_unknown_fields(
    document: Mapping[Any, Any], known: Sequence[str], where: str, source: str
) -> None:
    unknown = [key for key in document if key not in known]
    if unknown:
        key = f"{where}.{unknown[0]}" if where else str(unknown[0])
        names = ", ".join(str(name) for name in unknown)
        reason = f"unknown field(s) {names}; the known fields are {', '.join(known)}"
        raise ConfigError(source, key, document[unknown[0]], reason)


def _list(document: Mapping[str, Any], field_name: str, source: str) -> list[Any]:
    value = document.get(field_name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(source, field_name, value, "must be a list")
    return value


def _string(value: object, key: str, source: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(source, key, value, "must be a string")
    return value


def _patterns(document: Mapping[str, Any], field_name: str, source: str) -> tuple[str, ...]:
    patterns = []
    for i, item in enumerate(_list(document, field_name, source)):
        key = f"{field_name}[{i}]"
        pattern = _string(item, key, source)
        try:
            validate_glob(pattern)
        except GlobError:
            reason = "malformed glob pattern (see Go's path.Match for the syntax)"
            raise ConfigError(source, key, pattern, reason) from None
        patterns.append(pattern)
    return tuple(patterns)


def _reject_reserved_keys(patterns: Sequence[str], field_name: str, source: str) -> None:
    for i, pattern in enumerate(patterns):
        if pattern.startswith(RESERVED_PREFIX):
            reason = f"keys under {RESERVED_PREFIX} are reserved for Accurate's own use"
            raise ConfigError(source, f"{field_name}[{i}]", pattern, reason)


def _mapping(value: object, known: Sequence[str], key: str, source: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(source, key, value, f"must be a mapping with {', '.join(known)}")
    _reject_unknown_fields(value, known, key, source)
    return value


def _optional(entry: Mapping[str, Any], field_name: str, key: str, source: str) -> str:
    """A string field that may be left out or null, meaning ""."""
    value = entry.get(field_name)
    return "" if value is None else _string(value, f"{key}.{field_name}", source)


def _required(entry: Mapping[str, Any], field_name: str, key: str, source: str) -> str:
    value = _optional(entry, field_name, key, source)
    if not value:
        raise ConfigError(source, f"{key}.{field_name}", value, "is required")
    return value


def _watch(item: object, key: str, source: str) -> GroupVersionKind:
    entry = _mapping(item, _WATCH_FIELDS, key, source)
    return GroupVersionKind(
        group=_optional(entry, "group", key, source),
        version=_required(entry, "version", key, source),
        kind=_required(entry, "kind", key, source),
    )


def _naming_policy(item: object, key: str, source: str) -> NamingPolicy:
    entry = _mapping(item, _POLICY_FIELDS, key, source)
    root = _required(entry, "root", key, source)
    try:
        compile_policy_root(root)
    except re.error as error:
        raise ConfigError(source, f"{key}.root", root, f"does not compile: {error}") from None
    return NamingPolicy(root=root, match=_required(entry, "match", key, source))


def _tree_labels(value: object, source: str) -> TreeLabelSettings | None:
    """The tree label settings, or None when they are off; the suffix is a DNS subdomain.

    A suffix that leaves no room for even a one-letter namespace name in a label key's
    253-character prefix could never label anything, so it is refused here.
    """
    if value is None:
        return None
    entry = _mapping(value, _TREE_LABEL_FIELDS, "treeLabels", source)
    suffix = _required(entry, "suffix", "treeLabels", source)
    errors = validate_dns1123_subdomain(f"a.{suffix}", "treeLabels.suffix")
    if errors:
        reason = "must be a DNS subdomain short enough to follow a namespace name in a label key"
        details = "; ".join(error.detail for error in errors)
        raise ConfigError(source, "treeLabels.suffix", suffix, f"{reason} ({details})")
    return TreeLabelSettings(suffix)
