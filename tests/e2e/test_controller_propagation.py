"""Resource propagation end to end (ACCEPTANCE G): sources made and changed with kubectl, copies
made, replaced and deleted by the controller process."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from accurate_testbed.objects import secret, secret_data
from accurate_testbed.processes import Process
from libaccurate.constants import (
    ANNOTATION_FROM,
    ANNOTATION_GENERATED,
    ANNOTATION_PROPAGATE,
    ANNOTATION_PROPAGATE_GENERATED,
    CREATED_BY_VALUE,
    LABEL_CREATED_BY,
    LABEL_PARENT,
    LABEL_TEMPLATE,
    LABEL_TYPE,
    TYPE_ROOT,
    TYPE_TEMPLATE,
)
from libaccurate.network.kube import resource_path
from tests.e2e.cli import run_plugin, succeeded
from tests.e2e.controller import Controllers, Scene

RBAC = "rbac.authorization.k8s.io"
CONFIG: dict[str, Any] = {
    "watches": [
        {"group": RBAC, "version": "v1", "kind": "Role"},
        {"group": RBAC, "version": "v1", "kind": "RoleBinding"},
        {"version": "v1", "kind": "Secret"},
        {"version": "v1", "kind": "ServiceAccount"},
    ],
    "propagateLabelKeyExcludes": ["internal.example.com/*"],
    "propagateAnnotationKeyExcludes": ["*.internal.example.com/*"],
}
PLURALS = {
    "Role": (RBAC, "roles"),
    "RoleBinding": (RBAC, "rolebindings"),
    "Secret": ("", "secrets"),
}
PLURALS["ServiceAccount"] = ("", "serviceaccounts")


def rule(*verbs: str) -> dict[str, Any]:
    return {"apiGroups": [""], "resources": ["pods"], "verbs": list(verbs)}


def role(
    namespace: str, name: str, mode: str | None, rules: list[dict[str, Any]]
) -> dict[str, Any]:
    annotations = {ANNOTATION_PROPAGATE: mode} if mode else {}
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "rules": rules,
    }


def get(scene: Scene, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    group, plural = PLURALS[kind]
    return scene.get(resource_path(group, "v1", plural, namespace, name))


def tree(scene: Scene) -> tuple[str, str, str]:
    """root <- child <- grandchild, all Ready."""
    root = scene.root()
    child, grandchild = scene.chain(root, "child", "grandchild")
    return root, child, grandchild


def test_create_mode_copies_reach_every_level_and_are_left_alone(
    shared_controller: Callable[..., Process], scene: Scene
) -> None:
    shared_controller(CONFIG)
    root, child, grandchild = tree(scene)
    scene.kubectl("apply", "-f", "-", stdin=role(root, "viewer", "create", [rule("get")]))
    scene.kubectl("apply", "-f", "-", stdin=role(root, "private", None, [rule("get")]))

    scene.wait(lambda: get(scene, "Role", grandchild, "viewer"), "a copy two levels down")
    for namespace, origin in ((child, root), (grandchild, child)):
        copy = get(scene, "Role", namespace, "viewer") or {}
        assert copy["metadata"]["annotations"][ANNOTATION_FROM] == origin
        assert copy["metadata"]["labels"][LABEL_CREATED_BY] == CREATED_BY_VALUE
        assert copy["rules"] == [rule("get")]
    assert get(scene, "Role", child, "private") is None

    scene.kubectl("delete", "role", "viewer", "-n", child)
    scene.wait(lambda: get(scene, "Role", child, "viewer"), "the deleted copy to come back")
    edited = role(child, "viewer", "create", [rule("get", "list")])
    edited["metadata"]["annotations"][ANNOTATION_FROM] = root
    scene.kubectl("apply", "-f", "-", stdin=edited)
    scene.kubectl("delete", "role", "viewer", "-n", root)
    scene.wait(lambda: get(scene, "Role", root, "viewer") is None, "the source to go")
    scene.settle(child, grandchild)
    assert (get(scene, "Role", child, "viewer") or {})["rules"] == [rule("get", "list")]
    assert get(scene, "Role", grandchild, "viewer") is not None


def test_update_mode_copies_follow_their_source_and_go_with_it(
    shared_controller: Callable[..., Process], scene: Scene
) -> None:
    shared_controller(CONFIG)
    root, child, grandchild = tree(scene)
    scene.kubectl("apply", "-f", "-", stdin=secret(root, "token", "update", {"a": "1", "b": "2"}))
    scene.kubectl(
        "apply", "-f", "-", stdin=role(root, "editor", "update", [rule("get"), rule("list")])
    )
    everywhere = (child, grandchild)
    scene.wait(
        lambda: all(
            secret_data(get(scene, "Secret", ns, "token")) == {"a": "1", "b": "2"}
            for ns in everywhere
        ),
        "the secret everywhere",
    )

    scene.kubectl("apply", "-f", "-", stdin=secret(root, "token", "update", {"a": "9", "c": "3"}))
    scene.wait(
        lambda: all(
            secret_data(get(scene, "Secret", ns, "token")) == {"a": "9", "c": "3"}
            for ns in everywhere
        ),
        "added, changed and removed keys everywhere",
    )
    scene.kubectl("apply", "-f", "-", stdin=role(root, "editor", "update", [rule("get")]))
    scene.wait(
        lambda: all(
            (get(scene, "Role", ns, "editor") or {}).get("rules") == [rule("get")]
            for ns in everywhere
        ),
        "the removed rule gone from every copy",
    )

    scene.kubectl(
        "patch", "secret", "token", "-n", child, "--type=merge", "-p", '{"stringData":{"a":"mine"}}'
    )
    scene.wait(
        lambda: secret_data(get(scene, "Secret", child, "token")) == {"a": "9", "c": "3"},
        "the edit reverted",
    )

    scene.kubectl("delete", "secret", "token", "-n", root)
    scene.wait(
        lambda: all(get(scene, "Secret", ns, "token") is None for ns in everywhere),
        "the copies to go",
    )


def events_about(scene: Scene, namespace: str, name: str) -> list[tuple[str, str, str]]:
    """``kubectl get events`` in ``namespace`` about objects called ``name``: type, reason
    and message of each."""
    found = json.loads(scene.kubectl("get", "events", "-n", namespace, "-o", "json"))["items"]
    return sorted(
        (e["type"], e["reason"], e["message"]) for e in found if e["involvedObject"]["name"] == name
    )


def test_copying_is_told_once_per_source_and_once_per_new_namespace(
    shared_controller: Callable[..., Process], scene: Scene
) -> None:
    running = shared_controller(CONFIG)
    root, child, grandchild = tree(scene)
    scene.kubectl("apply", "-f", "-", stdin=secret(root, "token", "update", {"a": "1"}))
    copied = f"copied to 2 namespaces: {', '.join(sorted([child, grandchild]))}"
    told = [("Normal", "Propagated", copied)]
    scene.wait(lambda: events_about(scene, root, "token") == told, "one event on the source")
    assert events_about(scene, child, "token") == []
    assert events_about(scene, grandchild, "token") == []

    late = scene.subnamespace(child, "late")
    scene.settle(child, late)
    received = [
        ("Normal", "NamespaceCreated", f"created namespace {late}; copied into it: Secret token")
    ]
    scene.wait(
        lambda: events_about(scene, child, late) == received, "one event on the SubNamespace"
    )

    passes = running.metric("accurate_reconcile_passes_total")
    scene.kubectl("apply", "-f", "-", stdin=secret(root, "token", "update", {"a": "2"}))
    scene.wait(lambda: secret_data(get(scene, "Secret", late, "token")) == {"a": "2"}, "the update")
    # Events go out before the pass that made them ends: two more passes and none came.
    scene.wait(
        lambda: running.metric("accurate_reconcile_passes_total") >= passes + 2, "two more passes"
    )
    assert events_about(scene, root, "token") == told
    assert events_about(scene, late, "token") == []


def test_excluded_labels_and_annotations_stay_behind(
    shared_controller: Callable[..., Process], scene: Scene
) -> None:
    shared_controller(CONFIG)
    root = scene.root()
    child = scene.subnamespace(root, "child")
    scene.settle(root, child)
    source = secret(root, "labelled", "update", {"k": "v"})
    source["metadata"]["labels"] = {"internal.example.com/id": "1", "app": "web"}
    source["metadata"]["annotations"].update({"x.internal.example.com/y": "1", "note": "n"})
    scene.kubectl("apply", "-f", "-", stdin=source)
    copy = scene.wait(lambda: get(scene, "Secret", child, "labelled"), "the copy")
    assert copy["metadata"]["labels"] == {"app": "web", LABEL_CREATED_BY: CREATED_BY_VALUE}
    annotations = copy["metadata"]["annotations"]
    assert annotations["note"] == "n"
    assert "x.internal.example.com/y" not in annotations


def test_templates_give_objects_to_instances_until_unset(
    shared_controller: Callable[..., Process], scene: Scene
) -> None:
    shared_controller(CONFIG)
    base = scene.namespace("base", {LABEL_TYPE: TYPE_TEMPLATE})
    middle = scene.namespace("middle", {LABEL_TYPE: TYPE_TEMPLATE, LABEL_TEMPLATE: base})
    instance = scene.namespace("instance", {LABEL_TEMPLATE: middle})
    scene.kubectl("apply", "-f", "-", stdin=secret(base, "kept", "create", {"k": "v"}))
    scene.kubectl("apply", "-f", "-", stdin=secret(base, "followed", "update", {"k": "v"}))
    scene.wait(
        lambda: (
            get(scene, "Secret", instance, "kept") and get(scene, "Secret", instance, "followed")
        ),
        "both objects in the instance of the instance",
    )
    assert (get(scene, "Secret", instance, "followed") or {})["metadata"]["annotations"][
        ANNOTATION_FROM
    ] == middle

    scene.kubectl("label", "namespace", instance, f"{LABEL_TEMPLATE}-")
    scene.wait(
        lambda: get(scene, "Secret", instance, "followed") is None, "the update-mode copy to go"
    )
    assert get(scene, "Secret", instance, "kept") is not None


def test_moved_and_cut_namespaces_swap_their_update_mode_copies(
    shared_controller: Callable[..., Process], scene: Scene
) -> None:
    shared_controller(CONFIG)
    first, second = scene.root("first"), scene.root("second")
    scene.kubectl("apply", "-f", "-", stdin=secret(first, "from-first", "update", {"k": "1"}))
    scene.kubectl("apply", "-f", "-", stdin=secret(second, "from-second", "update", {"k": "2"}))
    moved = scene.namespace("moved", {LABEL_PARENT: first})
    below = scene.namespace("below", {LABEL_PARENT: moved})
    scene.wait(lambda: get(scene, "Secret", below, "from-first"), "the first root's secret below")

    scene.kubectl("label", "namespace", moved, f"{LABEL_PARENT}={second}", "--overwrite")
    # The copies of one pass are deleted in parallel, in no set order: wait for both.
    scene.wait(
        lambda: (
            get(scene, "Secret", below, "from-second")
            and get(scene, "Secret", below, "from-first") is None
            and get(scene, "Secret", moved, "from-first") is None
        ),
        "the subtree to swap secrets",
    )

    scene.kubectl("label", "namespace", moved, f"{LABEL_PARENT}-", f"{LABEL_TYPE}={TYPE_ROOT}")
    scene.wait(
        lambda: (
            get(scene, "Secret", moved, "from-second") is None
            and get(scene, "Secret", below, "from-second") is None
        ),
        "the cut subtree to lose its copies",
    )


def test_user_objects_are_replaced_in_update_mode_only(
    controllers: Controllers, scene: Scene
) -> None:
    running = controllers.start(CONFIG, "--resync-period", "0.5s")
    root = scene.root()
    child = scene.subnamespace(root, "child")
    scene.settle(root, child)
    scene.kubectl("apply", "-f", "-", stdin=secret(child, "shadow", None, {"k": "mine"}))
    scene.kubectl("apply", "-f", "-", stdin=secret(child, "kept", None, {"k": "mine"}))
    scene.kubectl("apply", "-f", "-", stdin=secret(child, "original", "update", {"k": "mine"}))
    scene.kubectl("apply", "-f", "-", stdin=secret(root, "shadow", "update", {"k": "root"}))
    scene.kubectl("apply", "-f", "-", stdin=secret(root, "kept", "create", {"k": "root"}))
    scene.wait(
        lambda: secret_data(get(scene, "Secret", child, "shadow")) == {"k": "root"},
        "the user object replaced",
    )

    def events(reason: str) -> list[dict[str, Any]]:
        items = scene.kube.list_objects(resource_path("", "v1", "events", child))["items"]
        return [e for e in items if e.get("reason") == reason]

    warning = scene.wait(lambda: events("OriginalReplaced"), "a Warning event")[0]
    assert warning["type"] == "Warning"
    assert warning["involvedObject"]["name"] == "shadow"
    scene.wait(lambda: events("PropagationSkipped"), "a Normal event for the skipped copy")
    assert secret_data(get(scene, "Secret", child, "kept")) == {"k": "mine"}
    passes = running.metric("accurate_reconcile_passes_total")
    scene.wait(
        lambda: running.metric("accurate_reconcile_passes_total") >= passes + 2, "two more passes"
    )
    assert len(events("PropagationSkipped")) == 1
    scene.settle(root, child)
    assert secret_data(get(scene, "Secret", child, "original")) == {"k": "mine"}


def test_service_accounts_and_role_bindings(
    shared_controller: Callable[..., Process], scene: Scene
) -> None:
    shared_controller(CONFIG)
    root = scene.root()
    child = scene.subnamespace(root, "child")
    scene.settle(root, child)
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": "robot",
            "namespace": root,
            "annotations": {ANNOTATION_PROPAGATE: "update"},
        },
        "secrets": [{"name": "robot-token"}],
    }
    scene.kubectl("apply", "-f", "-", stdin=account)

    def binding(role_name: str) -> dict[str, Any]:
        return {
            "apiVersion": f"{RBAC}/v1",
            "kind": "RoleBinding",
            "metadata": {
                "name": "bind",
                "namespace": root,
                "annotations": {ANNOTATION_PROPAGATE: "update"},
            },
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": role_name},
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": root}],
        }

    scene.kubectl("apply", "-f", "-", stdin=binding("first"))
    copy = scene.wait(lambda: get(scene, "ServiceAccount", child, "robot"), "the account copy")
    assert "secrets" not in copy
    first = scene.wait(lambda: get(scene, "RoleBinding", child, "bind"), "the binding copy")

    scene.kubectl("delete", "rolebinding", "bind", "-n", root, "--wait")
    scene.kubectl("apply", "-f", "-", stdin=binding("second"))
    again = scene.wait(
        lambda: (
            (found := get(scene, "RoleBinding", child, "bind"))
            and found["roleRef"]["name"] == "second"
            and found
        ),
        "the binding made again with the new role",
    )
    assert again["metadata"]["uid"] != first["metadata"]["uid"]


def owner_with_generated(
    scene: Scene, namespace: str, kind: str, name: str, mode: str | None
) -> dict[str, Any]:
    """A ConfigMap or Secret called ``name`` (annotated propagate-generated=``mode`` unless
    None) controlling a Secret ``made-by-<name>``, both made with kubectl; the owner."""
    annotations = {ANNOTATION_PROPAGATE_GENERATED: mode} if mode else {}
    owner = {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
    }
    scene.kubectl("apply", "-f", "-", stdin=owner)
    plural = "configmaps" if kind == "ConfigMap" else "secrets"
    found = scene.get(resource_path("", "v1", plural, namespace, name)) or {}
    generated = secret(namespace, f"made-by-{name}", None, {"k": "v"})
    generated["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": kind,
            "name": name,
            "uid": found["metadata"]["uid"],
            "controller": True,
        }
    ]
    scene.kubectl("apply", "-f", "-", stdin=generated)
    return found


def test_propagate_generated_behind_its_feature_gate(
    controllers: Controllers, scene: Scene
) -> None:
    controllers.start(CONFIG, "--feature-gates", "DisablePropagateGenerated=false")
    root = scene.root()
    child = scene.subnamespace(root, "child")
    scene.settle(root, child)
    owner_with_generated(scene, root, "ConfigMap", "asks", "update")
    owner_with_generated(scene, root, "ConfigMap", "silent", None)

    scene.wait(lambda: get(scene, "Secret", child, "made-by-asks"), "the generated object copied")
    marked = (get(scene, "Secret", root, "made-by-asks") or {})["metadata"]["annotations"]
    assert marked[ANNOTATION_PROPAGATE] == "update"
    scene.wait(
        lambda: (
            (
                (get(scene, "Secret", root, "made-by-silent") or {})["metadata"].get("annotations")
                or {}
            ).get(ANNOTATION_GENERATED)
            == "false"
        ),
        "the other object marked as checked",
    )
    assert get(scene, "Secret", child, "made-by-silent") is None


def test_owners_asking_for_propagate_generated_are_told_it_is_off(
    controllers: Controllers, scene: Scene
) -> None:
    """The gate's default keeps propagate-generated off, where the Go Accurate up to v1.2.1
    had it on (issue 31): each annotated owner gets a Warning Event naming the flag and the
    chart value, the log says so once, and nothing is copied."""
    root = scene.root()
    child = scene.subnamespace(root, "child")
    owner_with_generated(scene, root, "ConfigMap", "asks", "update")
    owner_with_generated(scene, root, "Secret", "watched-owner", "create")
    owner_with_generated(scene, root, "ConfigMap", "silent", None)
    running = controllers.start(CONFIG)
    scene.settle(root, child)

    def warned(name: str) -> list[tuple[str, str, str]]:
        return [e for e in events_about(scene, root, name) if e[1] == "PropagateGeneratedOff"]

    scene.wait(lambda: warned("asks") and warned("watched-owner"), "a warning on each owner")
    for name in ("asks", "watched-owner"):
        ((kind, _, message),) = warned(name)
        assert kind == "Warning"
        assert "--feature-gates=DisablePropagateGenerated=false" in message
        assert "controller.extraArgs" in message
    assert warned("silent") == []
    assert get(scene, "Secret", child, "made-by-asks") is None

    # An owner annotated later is told at the next resync; the first ones are not told again.
    owner_with_generated(scene, root, "ConfigMap", "later", "update")
    scene.wait(lambda: warned("later"), "a warning on the owner annotated later")
    notices = [line for line in running.output().splitlines() if "propagate-generated" in line]
    assert len(notices) == 1, notices
    assert "DisablePropagateGenerated=false" in notices[0]
    counts = json.loads(scene.kubectl("get", "events", "-n", root, "-o", "json"))["items"]
    assert [e["count"] for e in counts if e["involvedObject"]["name"] == "asks"] == [1]


def test_ns_describe_shows_the_latest_events_of_the_namespace_and_its_subnamespace(
    controllers: Controllers, scene: Scene
) -> None:
    controllers.start(CONFIG)
    root, child, _ = tree(scene)
    scene.kubectl("apply", "-f", "-", stdin=secret(root, "token", "update", {"a": "1"}))
    scene.wait(lambda: events_about(scene, root, "token"), "the event on the source")
    late = scene.subnamespace(child, "late")
    scene.settle(child, late)
    scene.wait(lambda: events_about(scene, child, late), "the event on the SubNamespace")

    described = succeeded(run_plugin("ns", "describe", root, kubeconfig=scene.cluster.kubeconfig))
    (line,) = [line for line in described.splitlines() if "Propagated" in line]
    assert "Normal" in line and "Secret/token" in line and "copied to 2 namespaces" in line

    described = succeeded(run_plugin("ns", "describe", late, kubeconfig=scene.cluster.kubeconfig))
    (line,) = [line for line in described.splitlines() if "NamespaceCreated" in line]
    assert f"SubNamespace/{late}" in line
    assert f"created namespace {late}; copied into it: Secret token" in line
    data = json.loads(
        succeeded(
            run_plugin("ns", "describe", late, "-o", "json", kubeconfig=scene.cluster.kubeconfig)
        )
    )
    assert [(e["type"], e["reason"]) for e in data["events"]] == [("Normal", "NamespaceCreated")]
