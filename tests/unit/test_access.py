"""The access model's pure rules: the writes a grant or a revocation stands for, and which
RoleBindings make someone a sudoer."""

from __future__ import annotations

from typing import Any

import pytest

from libaccurate.access import (
    AccessError,
    Subject,
    grant,
    grant_binding,
    parse_subject,
    revoke,
    sudo_group_binding,
    sudo_role,
    sudoer_name,
    sudoer_objects,
    sudoers,
)

ALICE, BOB, DEVS = Subject("User", "alice"), Subject("User", "bob"), Subject("Group", "devs")


def test_names_are_users_unless_marked_as_groups() -> None:
    assert parse_subject("alice") == ALICE
    assert parse_subject("group:devs") == DEVS
    assert parse_subject("user:group:x") == Subject("User", "group:x")
    assert parse_subject("system:serviceaccount:ns:app") == Subject(
        "User", "system:serviceaccount:ns:app"
    )
    with pytest.raises(AccessError, match="names no group"):
        parse_subject("group:")


def test_a_first_grant_creates_the_binding_and_a_later_one_adds_to_it() -> None:
    (first,) = grant("team", "view", [ALICE], {})
    assert first.verb == "create"
    assert first.obj["roleRef"]["name"] == "view"
    assert first.describe() == "create RoleBinding team/accurate-access-view (alice)"
    existing = {"accurate-access-view": {**first.obj, "subjects": first.obj["subjects"]}}
    (added,) = grant("team", "view", [DEVS], existing)
    assert added.verb == "replace"
    assert [s["name"] for s in added.obj["subjects"]] == ["devs", "alice"]
    assert grant("team", "view", [ALICE], existing) == []


def test_a_sudo_grant_brings_its_clusterrole_and_group_binding_along() -> None:
    edits = grant("team", "sudo", [ALICE], {})
    assert [(e.verb, e.obj["kind"], e.obj["metadata"]["name"]) for e in edits] == [
        ("create", "ClusterRole", "accurate:sudo:team"),
        ("create", "RoleBinding", "accurate-access-sudo-group"),
        ("create", "RoleBinding", "accurate-access-sudo"),
    ]
    with pytest.raises(AccessError, match="users, not groups"):
        grant("team", "sudo", [DEVS], {})


def test_revoking_the_last_sudoer_removes_what_sudo_brought() -> None:
    existing: dict[str, Any] = {
        "accurate-access-sudo": grant_binding("team", "sudo", [ALICE, BOB]),
        "accurate-access-sudo-group": sudo_group_binding("team"),
        "accurate:sudo:team": sudo_role("team"),
    }
    (one,) = revoke("team", "sudo", [ALICE], existing)
    assert (one.verb, [s["name"] for s in one.obj["subjects"]]) == ("replace", ["bob"])
    edits = revoke("team", "sudo", [ALICE, BOB], existing)
    assert [(e.verb, e.obj["metadata"]["name"]) for e in edits] == [
        ("delete", "accurate-access-sudo"),
        ("delete", "accurate-access-sudo-group"),
        ("delete", "accurate:sudo:team"),
    ]
    assert revoke("team", "sudo", [Subject("User", "carol")], existing) == []


def test_only_a_roots_own_sudo_binding_to_its_own_role_makes_sudoers() -> None:
    own = grant_binding("team", "sudo", [ALICE, DEVS])
    copy = {**own, "metadata": {**own["metadata"], "namespace": "team-dev"}}
    borrowed = grant_binding("other", "sudo", [BOB])
    borrowed["roleRef"] = {**borrowed["roleRef"], "name": "accurate:sudo:team"}
    renamed = {**grant_binding("team", "sudo", [BOB])}
    renamed["metadata"] = {**renamed["metadata"], "name": "my-sudo"}
    bindings = [own, copy, borrowed, renamed, grant_binding("lab", "sudo", [ALICE])]
    assert sudoers(bindings, ["team", "other", "lab"]) == {"alice": ("lab", "team")}


def test_each_sudoer_may_impersonate_themselves_and_their_roots_groups() -> None:
    role, binding = sudoer_objects("alice", ("lab", "team"))
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"],
         "resourceNames": ["alice"]},
        {"apiGroups": [""], "resources": ["groups"], "verbs": ["impersonate"],
         "resourceNames": ["accurate:sudo:lab", "accurate:sudo:team"]},
    ]  # fmt: skip
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                    "name": "alice"}]  # fmt: skip
    assert binding["roleRef"]["name"] == role["metadata"]["name"] == "accurate:sudoer:alice"


def test_a_user_name_unfit_for_an_object_name_gets_a_digest() -> None:
    assert sudoer_name("alice@example.com") == "accurate:sudoer:alice@example.com"
    odd = sudoer_name("https://issuer.example/#alice")
    assert odd.startswith("accurate:sudoer:sha256-") and "/" not in odd
    assert sudoer_name("..").startswith("accurate:sudoer:sha256-")
