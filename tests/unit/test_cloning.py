"""Cloning and comparison of propagated objects (DESIGN.md 4.3)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from libaccurate.cloning import clone, contains, content_hash, copied_from, propagate_mode
from libaccurate.config import Config
from libaccurate.constants import (
    ANNOTATION_FROM,
    ANNOTATION_PROPAGATE,
    ANNOTATION_SOURCE_HASH,
    LABEL_CREATED_BY,
)

SOURCE: dict[str, Any] = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "Role",
    "metadata": {
        "name": "admin",
        "namespace": "root",
        "uid": "u1",
        "resourceVersion": "42",
        "generation": 3,
        "creationTimestamp": "2024-01-01T00:00:00Z",
        "deletionTimestamp": "2024-01-02T00:00:00Z",
        "deletionGracePeriodSeconds": 0,
        "managedFields": [{"manager": "kubectl"}],
        "ownerReferences": [{"uid": "o"}],
        "finalizers": ["x"],
        "generateName": "adm-",
        "selfLink": "/apis/...",
        "labels": {"team": "a", "internal.example.com/x": "1"},
        "annotations": {
            ANNOTATION_PROPAGATE: "update",
            "note": "n",
            "kubectl.kubernetes.io/last-applied-configuration": "{}",
        },
    },
    "rules": [{"verbs": ["get"], "resources": ["pods"], "apiGroups": [""]}],
    "status": {"phase": "x"},
}
EXCLUDING = Config(
    propagate_label_key_excludes=("internal.example.com/*",),
    propagate_annotation_key_excludes=("*.kubernetes.io/*",),
)


def test_clone_strips_server_metadata_and_status_and_keeps_the_rest():
    copy_ = clone(SOURCE, "child", Config())
    assert set(copy_["metadata"]) == {"name", "namespace", "labels", "annotations"}
    assert copy_["metadata"]["name"] == "admin"
    assert copy_["metadata"]["namespace"] == "child"
    assert "status" not in copy_
    assert copy_["rules"] == SOURCE["rules"]
    assert copy_["kind"] == "Role"


def test_clone_marks_the_copy_and_keeps_propagate():
    annotations = clone(SOURCE, "child", Config())["metadata"]["annotations"]
    labels = clone(SOURCE, "child", Config())["metadata"]["labels"]
    assert labels[LABEL_CREATED_BY] == "accurate"
    assert annotations[ANNOTATION_FROM] == "root"
    assert annotations[ANNOTATION_PROPAGATE] == "update"


def test_clone_drops_excluded_labels_and_annotations_only():
    copy_ = clone(SOURCE, "child", EXCLUDING)
    assert "internal.example.com/x" not in copy_["metadata"]["labels"]
    assert copy_["metadata"]["labels"]["team"] == "a"
    annotations = copy_["metadata"]["annotations"]
    assert "kubectl.kubernetes.io/last-applied-configuration" not in annotations
    assert annotations["note"] == "n"


def test_clone_leaves_out_hncs_own_keys_as_hnc_did():
    """Issue 27 point 6: HNC copies no label or annotation whose prefix ends with its group
    (its exceptions narrow the source alone); other keys that merely mention it stay."""
    hnc = {
        "propagate.hnc.x-k8s.io/treeSelect": "a, !b",
        "propagate.hnc.x-k8s.io/none": "false",
        "hnc.x-k8s.io/managed-by": "hnc",
        "team-a.tree.hnc.x-k8s.io/depth": "0",
    }
    kept = {"hnc.x-k8s.io": "no prefix", "example.com/hnc.x-k8s.io": "only the name"}
    source = copy.deepcopy(SOURCE)
    source["metadata"]["labels"].update({**hnc, **kept})
    source["metadata"]["annotations"].update({**hnc, **kept})
    made = clone(source, "child", Config())
    labels, annotations = made["metadata"]["labels"], made["metadata"]["annotations"]
    assert not set(hnc) & (set(labels) | set(annotations))
    assert set(kept) <= set(labels) and set(kept) <= set(annotations)
    assert annotations["note"] == "n"
    # Nothing to flap on: the copy written, read back and cloned again is the same clone.
    assert contains(made, made)
    assert clone(made, "grandchild", Config())["metadata"]["annotations"][ANNOTATION_FROM] == (
        "child"
    )
    plain = copy.deepcopy(SOURCE)
    plain["metadata"]["labels"].update(kept)
    plain["metadata"]["annotations"].update(kept)
    assert content_hash(made) == content_hash(clone(plain, "child", Config()))


def test_clone_does_not_share_state_with_the_source():
    source = copy.deepcopy(SOURCE)
    copy_ = clone(source, "child", Config())
    copy_["rules"][0]["verbs"].append("list")
    assert source["rules"][0]["verbs"] == ["get"]


def test_service_account_copy_has_no_secrets_but_other_kinds_keep_the_field():
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "sa", "namespace": "root"},
        "secrets": [{"name": "sa-token-x"}],
        "automountServiceAccountToken": False,
    }
    assert "secrets" not in clone(account, "child", Config())
    assert clone(account, "child", Config())["automountServiceAccountToken"] is False
    other = {**account, "apiVersion": "example.com/v1"}
    assert "secrets" in clone(other, "child", Config())


def test_hash_annotation_is_the_hash_of_the_clone_without_it():
    copy_ = clone(SOURCE, "child", Config())
    assert copy_["metadata"]["annotations"][ANNOTATION_SOURCE_HASH] == content_hash(copy_)


def test_a_copy_of_a_copy_does_not_inherit_the_hash_of_its_source():
    first = clone(SOURCE, "child", Config())
    changed = copy.deepcopy(first)
    changed["metadata"]["annotations"][ANNOTATION_SOURCE_HASH] = "stale"
    assert clone(changed, "grandchild", Config()) == clone(first, "grandchild", Config())


def test_hash_ignores_key_order_and_namespace_but_not_content():
    copy_ = clone(SOURCE, "child", Config())
    reordered = dict(reversed(list(copy_.items())))
    assert content_hash(reordered) == content_hash(copy_)
    elsewhere = clone(SOURCE, "other", Config())
    assert content_hash(elsewhere) == content_hash(copy_)
    fewer = copy.deepcopy(SOURCE)
    fewer["rules"] = []
    assert content_hash(clone(fewer, "child", Config())) != content_hash(copy_)


def test_accessors_read_absent_and_null_metadata_as_none():
    assert propagate_mode({}) is None
    assert copied_from({"metadata": {"annotations": None}}) is None
    assert copied_from({"metadata": {"annotations": {ANNOTATION_FROM: "p"}}}) == "p"


class TestContains:
    def test_extra_map_keys_in_the_actual_object_are_allowed(self):
        expected = {"subjects": [{"kind": "User", "name": "a"}]}
        actual = {"subjects": [{"kind": "User", "name": "a", "apiGroup": "rbac"}], "x": 1}
        assert contains(expected, actual)

    def test_a_changed_or_missing_value_is_a_difference(self):
        assert not contains({"a": {"b": 1}}, {"a": {"b": 2}})
        assert not contains({"a": 1}, {})
        assert not contains({"a": {"b": 1}}, {"a": 5})

    def test_lists_must_have_the_same_length(self):
        rules = [{"verbs": ["get"]}]
        assert contains(rules, [{"verbs": ["get"]}])
        assert not contains(rules, [{"verbs": ["get"]}, {"verbs": ["list"]}])
        assert not contains(rules, [{"verbs": ["list"]}])
        assert not contains(rules, {"verbs": ["get"]})

    def test_empty_values_the_server_drops_count_as_present(self):
        assert contains({"data": {}, "rules": [], "s": "", "n": None, "f": False, "z": 0}, {})
        assert not contains({"data": {"k": "v"}}, {})

    def test_booleans_never_equal_numbers(self):
        assert not contains(True, 1)
        assert not contains(0, False)
        assert contains(1, 1.0)
        assert contains(True, True)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(json_values)
def test_every_value_contains_itself(value):
    assert contains(value, value)


@given(st.dictionaries(st.text(max_size=3), json_values, max_size=4), json_values)
def test_adding_a_map_key_keeps_containment(value, extra):
    bigger = {**value, "\x00extra": extra}
    assert contains(value, bigger)
