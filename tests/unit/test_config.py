"""The config file is loaded and checked as DESIGN.md 6.1 says (ACCEPTANCE A1-A6)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from libaccurate.config import (
    Config,
    ConfigError,
    GroupVersionKind,
    NamingPolicy,
    WatchedResource,
    config_to_dict,
    parse_config,
    resolve_watches,
    tenant_overrides,
)

SOURCE = "/etc/accurate/config.yaml"

FULL_YAML = """\
labelKeys:
- team
- "*.glob/*"
annotationKeys: [foo.bar/baz]
subNamespaceLabelKeys: [app]
subNamespaceAnnotationKeys: [note]
watches:
- group: rbac.authorization.k8s.io
  version: v1
  kind: Role
- version: v1
  kind: Secret
propagateLabelKeyExcludes: ["*.internal/*"]
propagateAnnotationKeyExcludes: [kubectl.kubernetes.io/last-applied-configuration]
namingPolicies:
- root: ^app-(?P<team>.*)
  match: ^app-${team}-.*
"""

FULL_CONFIG = Config(
    label_keys=("team", "*.glob/*"),
    annotation_keys=("foo.bar/baz",),
    sub_namespace_label_keys=("app",),
    sub_namespace_annotation_keys=("note",),
    watches=(
        GroupVersionKind("rbac.authorization.k8s.io", "v1", "Role"),
        GroupVersionKind("", "v1", "Secret"),
    ),
    propagate_label_key_excludes=("*.internal/*",),
    propagate_annotation_key_excludes=("kubectl.kubernetes.io/last-applied-configuration",),
    naming_policies=(NamingPolicy("^app-(?P<team>.*)", "^app-${team}-.*"),),
)

PATTERN_FIELDS = [
    "labelKeys",
    "annotationKeys",
    "subNamespaceLabelKeys",
    "subNamespaceAnnotationKeys",
    "propagateLabelKeyExcludes",
    "propagateAnnotationKeyExcludes",
]
INHERITANCE_FIELDS = PATTERN_FIELDS[:4]


def _error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, SOURCE)
    assert str(caught.value).startswith(SOURCE + ": ")
    return caught.value


@pytest.mark.parametrize("text", ["", "   \n", "# only a comment\n", "null", "{}"])
def test_an_empty_file_is_a_valid_config_that_does_nothing(text: str) -> None:  # A1
    assert parse_config(text, SOURCE) == Config()


def test_yaml_and_json_load_to_the_same_config() -> None:  # A6
    assert parse_config(FULL_YAML, SOURCE) == FULL_CONFIG
    as_json = json.dumps(config_to_dict(FULL_CONFIG), indent=2)
    assert parse_config(as_json, SOURCE) == FULL_CONFIG


def test_config_to_dict_uses_the_file_names_and_leaves_out_empty_settings() -> None:
    assert config_to_dict(Config()) == {}
    assert config_to_dict(Config(label_keys=("team",))) == {"labelKeys": ["team"]}
    assert config_to_dict(FULL_CONFIG)["watches"][1] == {
        "group": "",
        "version": "v1",
        "kind": "Secret",
    }


@pytest.mark.parametrize("field", INHERITANCE_FIELDS)
def test_ordinary_keys_are_accepted_in_the_inheritance_lists(field: str) -> None:  # A2
    config = parse_config(f"{field}: ['1', team, example.com/x, '*']", SOURCE)
    assert config_to_dict(config) == {field: ["1", "team", "example.com/x", "*"]}


@pytest.mark.parametrize("field", INHERITANCE_FIELDS)
def test_reserved_keys_are_rejected_naming_the_list_and_key(field: str) -> None:  # A2
    error = _error(f"{field}: [team, accurate.cybozu.com/type]")
    assert error.source == SOURCE
    assert error.key == f"{field}[1]"
    assert error.value == "accurate.cybozu.com/type"
    assert "reserved" in str(error) and "accurate.cybozu.com/type" in str(error)
    assert f"{field}[1]" in str(error)


def test_reserved_keys_may_be_excluded_from_propagation() -> None:
    config = parse_config("propagateLabelKeyExcludes: [accurate.cybozu.com/*]", SOURCE)
    assert config.propagate_label_key_excludes == ("accurate.cybozu.com/*",)


@pytest.mark.parametrize("field", PATTERN_FIELDS)
@pytest.mark.parametrize("pattern", ["[", "a[", "\\"])
def test_malformed_globs_are_rejected_in_every_pattern_list(field: str, pattern: str) -> None:  # A3
    error = _error(json.dumps({field: ["ok", pattern]}))
    assert (error.key, error.value) == (f"{field}[1]", pattern)
    assert "glob" in error.reason


def test_a_naming_policy_root_that_does_not_compile_is_rejected() -> None:  # A5
    error = _error("namingPolicies: [{root: '(', match: abc}]")
    assert (error.key, error.value) == ("namingPolicies[0].root", "(")
    assert "does not compile" in str(error)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("foo: 1", "foo"),  # A6
        ("labelKeys: [a]\nfoo: 1\nbar: 2", "foo"),
        ("watches: [{version: v1, kind: Secret, grup: x}]", "watches[0].grup"),
        ("namingPolicies: [{root: a, match: b, extra: c}]", "namingPolicies[0].extra"),
    ],
)
def test_unknown_fields_are_rejected_by_name(text: str, key: str) -> None:
    error = _error(text)
    assert error.key == key
    assert "unknown field" in error.reason


def test_all_unknown_fields_are_named() -> None:
    assert "foo, bar" in _error("foo: 1\nbar: 2").reason


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("labelKeys: team", "labelKeys"),
        ("labelKeys: [1]", "labelKeys[0]"),
        ("labelKeys: [yes]", "labelKeys[0]"),
        ("watches: {kind: Role}", "watches"),
        ("watches: [Role]", "watches[0]"),
        ("watches: [{version: 1, kind: Role}]", "watches[0].version"),
        ("watches: [{kind: Role}]", "watches[0].version"),
        ("watches: [{version: v1}]", "watches[0].kind"),
        ("watches: [{version: v1, kind: ''}]", "watches[0].kind"),
        ("watches: [{group: [], version: v1, kind: Role}]", "watches[0].group"),
        ("namingPolicies: [{root: a}]", "namingPolicies[0].match"),
        ("namingPolicies: [{match: a}]", "namingPolicies[0].root"),
    ],
)
def test_wrong_shapes_are_rejected_at_their_key(text: str, key: str) -> None:
    assert _error(text).key == key


def test_the_group_of_a_watch_may_be_empty_or_null() -> None:
    config = parse_config("watches: [{group: null, version: v1, kind: Secret}]", SOURCE)
    assert config.watches == (GroupVersionKind("", "v1", "Secret"),)


def test_a_file_that_is_not_a_mapping_is_rejected() -> None:
    assert "mapping" in str(_error("- labelKeys"))


def test_a_yaml_syntax_error_says_where() -> None:
    error = _error("labelKeys: [a\nwatches: []\n")
    assert error.key == ""
    assert "not valid YAML: line" in str(error)


def test_a_json_syntax_error_gets_json_wording() -> None:
    error = _error('{\n  "labelKeys": ["a"\n}\n')
    assert "not valid JSON" in str(error)
    assert "line 3 column 1" in str(error)


def test_json_indented_with_tabs_loads_although_yaml_forbids_tabs() -> None:
    assert parse_config('{\n\t"labelKeys": ["team"]\n}', SOURCE) == Config(label_keys=("team",))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("? [a]\n: 1\n", "unhashable key"),
        ("labelKeys: ['\x01']", "unacceptable character"),
    ],
)
def test_other_yaml_errors_are_reported(text: str, reason: str) -> None:
    message = str(_error(text))
    assert "not valid YAML" in message and reason in message
    assert "<unicode string>" not in message


@pytest.mark.parametrize(
    "text",
    [
        "labelKeys: [a]\nlabelKeys: [b]\n",
        '{"labelKeys": ["a"], "labelKeys": ["b"]}',
        '{\n\t"labelKeys": ["a"],\n\t"labelKeys": ["b"]\n}',
    ],
)
def test_a_key_given_twice_is_rejected(text: str) -> None:
    assert "duplicate key 'labelKeys'" in str(_error(text))


def _resources(group_version: str, *resources: tuple[str, str, bool]) -> dict[str, Any]:
    return {
        "groupVersion": group_version,
        "resources": [
            {"name": name, "kind": kind, "namespaced": namespaced, "verbs": ["get", "list"]}
            for name, kind, namespaced in resources
        ],
    }


DISCOVERY = [
    _resources("v1", ("secrets", "Secret", True), ("namespaces", "Namespace", False)),
    _resources(
        "rbac.authorization.k8s.io/v1",
        ("roles/status", "Role", True),
        ("roles", "Role", True),
        ("clusterroles", "ClusterRole", False),
    ),
    {"groupVersion": "example.com/v1"},
]


def _watching(*gvks: GroupVersionKind) -> Config:
    return Config(watches=gvks)


def test_watches_on_namespaced_kinds_resolve_to_their_resources() -> None:  # A4
    role = GroupVersionKind("rbac.authorization.k8s.io", "v1", "Role")
    secret = GroupVersionKind("", "v1", "Secret")
    assert resolve_watches(_watching(role, secret), DISCOVERY, SOURCE) == (
        WatchedResource(role, "roles", True, ("get", "list")),
        WatchedResource(secret, "secrets", True, ("get", "list")),
    )
    assert resolve_watches(Config(), DISCOVERY, SOURCE) == ()


@pytest.mark.parametrize(
    ("gvk", "reason"),
    [
        (GroupVersionKind("rbac.authorization.k8s.io", "v1", "ClusterRole"), "cluster-scoped"),
        (GroupVersionKind("", "v1", "Namespace"), "cluster-scoped"),
        (GroupVersionKind("", "v1", "Role"), "serves no kind Role in v1"),
        (GroupVersionKind("rbac.authorization.k8s.io", "v2", "Role"), "serves no kind"),
        (GroupVersionKind("example.com", "v1", "Widget"), "serves no kind"),
    ],
)
def test_watches_on_cluster_scoped_or_unknown_kinds_are_rejected(
    gvk: GroupVersionKind, reason: str
) -> None:  # A4
    secret = GroupVersionKind("", "v1", "Secret")
    with pytest.raises(ConfigError) as caught:
        resolve_watches(_watching(secret, gvk), DISCOVERY, SOURCE)
    error = caught.value
    assert error.key == "watches[1]"
    assert error.value == {"group": gvk.group, "version": gvk.version, "kind": gvk.kind}
    assert reason in str(error)
    assert str(error).startswith(f"{SOURCE}: watches[1]: ")


def test_a_subresource_is_not_a_kind() -> None:
    status_only = [_resources("v1", ("pods/status", "Pod", True))]
    with pytest.raises(ConfigError):
        resolve_watches(_watching(GroupVersionKind("", "v1", "Pod")), status_only, SOURCE)


def test_patterns_a_key_can_match_in_both_an_inherited_and_a_subnamespace_list_are_named() -> None:
    """Issue 27 point 1: there the tenant's value wins, and the controller says so."""
    config = parse_config(
        "labelKeys: [team, 'pod-security.kubernetes.io/*']\n"
        "subNamespaceLabelKeys: [app, '*/enforce']\n"
        "annotationKeys: [owner]\nsubNamespaceAnnotationKeys: [note]\n",
        SOURCE,
    )
    assert tenant_overrides(config) == (
        "labelKeys and subNamespaceLabelKeys overlap: labelKeys 'pod-security.kubernetes.io/*' "
        "and subNamespaceLabelKeys '*/enforce' (both match "
        "'pod-security.kubernetes.io/enforce'). For a key matching both, the value in a "
        "tenant's SubNamespace wins over the inherited one, so tenants can override it; to keep "
        "such a key inherited, leave it out of subNamespaceLabelKeys",
    )


def test_annotation_overlaps_are_named_too_and_disjoint_lists_are_quiet() -> None:
    config = parse_config(
        "annotationKeys: ['*']\nsubNamespaceAnnotationKeys: [note, a/b]\n", SOURCE
    )
    (warning,) = tenant_overrides(config)
    assert warning.startswith(
        "annotationKeys and subNamespaceAnnotationKeys overlap: annotationKeys '*' and "
        "subNamespaceAnnotationKeys 'note' (both match 'note'). "
    )
    assert "a/b" not in warning  # "*" never crosses "/"
    assert tenant_overrides(parse_config(FULL_YAML, SOURCE)) == ()
