"""Namespace metadata inheritance end to end (ACCEPTANCE F): labels and annotations set with
kubectl on roots, templates and SubNamespaces, carried down by the controller process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accurate_testbed.processes import Process
from libaccurate.constants import (
    CREATED_BY_VALUE,
    LABEL_CREATED_BY,
    LABEL_PARENT,
    LABEL_TEMPLATE,
    LABEL_TYPE,
    TYPE_TEMPLATE,
)
from tests.e2e.controller import Controllers, Scene
from tests.e2e.test_controller_tree_labels import plugin

KEYS = ["team", "foo.bar/baz", "*.glob/*"]
CONFIG: dict[str, Any] = {
    "labelKeys": KEYS,
    "annotationKeys": KEYS,
    "subNamespaceLabelKeys": ["app", "team"],
    "subNamespaceAnnotationKeys": ["note"],
}


def test_matching_keys_flow_down_every_level_and_follow_changes(
    shared_controller: Callable[..., Process], scene: Scene
) -> None:
    shared_controller(CONFIG)
    root = scene.root(labels={"team": "a", "foo.bar/baz": "b", "x.glob/y": "c", "other": "d"})
    scene.kubectl("annotate", "namespace", root, "team=a", "note=not-inherited")
    child = scene.subnamespace(root, "child")
    scene.settle(root, child)
    grandchild = scene.subnamespace(child, "grandchild")

    def inherited(name: str, team: str) -> bool:
        labels, annotations = scene.labels(name), scene.annotations(name)
        return (
            labels.get("team") == team
            and labels.get("foo.bar/baz") == "b"
            and labels.get("x.glob/y") == "c"
            and annotations.get("team") == "a"
        )

    scene.wait(lambda: inherited(grandchild, "a"), "labels two levels down")
    for name in (child, grandchild):
        assert "other" not in scene.labels(name)
        assert LABEL_TYPE not in scene.labels(name)
        assert "note" not in scene.annotations(name)
    assert scene.labels(grandchild)[LABEL_PARENT] == child

    scene.kubectl("label", "namespace", root, "team=z", "--overwrite")
    scene.wait(lambda: inherited(child, "z") and inherited(grandchild, "z"), "a change on the root")

    scene.kubectl("label", "namespace", root, "foo.bar/baz-")
    scene.wait(
        lambda: all("foo.bar/baz" not in scene.labels(name) for name in (child, grandchild)),
        "a removal on the root",
    )


def test_subnamespace_spec_labels_land_on_the_namespace(
    shared_controller: Callable[..., Process], scene: Scene
) -> None:
    shared_controller(CONFIG)
    root = scene.root(labels={"team": "root-team"})
    sub = scene.subnamespace(
        root, "sub", labels={"app": "web", "team": "own", "ignored": "x"}, annotations={"note": "n"}
    )

    def landed(app: str) -> bool:
        labels = scene.labels(sub)
        return labels.get("app") == app and scene.annotations(sub).get("note") == "n"

    scene.wait(lambda: landed("web"), "spec labels on the namespace")
    assert scene.labels(sub)["team"] == "own"
    assert "ignored" not in scene.labels(sub)

    scene.kubectl(
        "patch",
        "subnamespace",
        sub,
        "-n",
        root,
        "--type=merge",
        "-p",
        '{"spec":{"labels":{"app":"api"}}}',
    )
    scene.wait(lambda: landed("api") and scene.labels(sub).get("team") == "own", "the new spec")


def test_a_moved_namespace_takes_the_new_parents_values(
    shared_controller: Callable[..., Process], scene: Scene
) -> None:
    shared_controller(CONFIG)
    first = scene.root("first", labels={"team": "first"})
    second = scene.root("second", labels={"team": "second"})
    grafted = scene.namespace("grafted", {LABEL_PARENT: first})
    scene.wait(lambda: scene.labels(grafted).get("team") == "first", "the first parent's values")
    # Grafted by hand, no SubNamespace: the controller marks it as every sub-namespace it
    # keeps, as the Go controller does (issue 27 point 6, docs/concepts.md).
    assert scene.labels(grafted)[LABEL_CREATED_BY] == CREATED_BY_VALUE

    scene.kubectl("label", "namespace", grafted, f"{LABEL_PARENT}={second}", "--overwrite")
    scene.wait(lambda: scene.labels(grafted).get("team") == "second", "the second parent's values")


def test_template_chains_and_labels_set_by_hand(
    shared_controller: Callable[..., Process], scene: Scene
) -> None:
    shared_controller(CONFIG)
    base = scene.namespace("base", {LABEL_TYPE: TYPE_TEMPLATE, "foo.bar/baz": "base"})
    middle = scene.namespace("middle", {LABEL_TYPE: TYPE_TEMPLATE, LABEL_TEMPLATE: base})
    scene.kubectl("label", "namespace", middle, "x.glob/y=middle")
    instance = scene.namespace("instance", {LABEL_TEMPLATE: middle, "team": "by-hand"})

    def both_levels() -> bool:
        labels = scene.labels(instance)
        return labels.get("foo.bar/baz") == "base" and labels.get("x.glob/y") == "middle"

    scene.wait(both_levels, "keys from both templates")
    assert scene.labels(instance)["team"] == "by-hand"


def test_a_former_sub_namespace_keeps_created_by_once_it_is_an_instance(
    shared_controller: Callable[..., Process], scene: Scene
) -> None:
    """Cut to a root, then given a template: the controller's applies for the instance keep
    the created-by label it applied while the namespace was a sub-namespace (DESIGN.md 4.2:
    a namespace that stops being a sub-namespace keeps its labels)."""
    shared_controller(CONFIG)
    root = scene.root()
    template = scene.namespace("tmpl", {LABEL_TYPE: TYPE_TEMPLATE, "team": "t"})
    sub = scene.subnamespace(root, "sub")
    scene.settle(root, sub)
    assert scene.labels(sub)[LABEL_CREATED_BY] == CREATED_BY_VALUE

    plugin(scene, "sub", "cut", sub)
    plugin(scene, "template", "set", sub, template)

    scene.wait(lambda: scene.labels(sub).get("team") == "t", "the template's label")
    assert scene.labels(sub)[LABEL_CREATED_BY] == CREATED_BY_VALUE
    assert LABEL_PARENT not in scene.labels(sub)


def test_a_settled_cluster_is_not_written_to(controllers: Controllers, scene: Scene) -> None:
    running = controllers.start(CONFIG, "--resync-period", "0.3s")
    root = scene.root(labels={"team": "a"})
    child = scene.subnamespace(root, "child", labels={"app": "web"})
    scene.settle(root, child)
    grandchild = scene.subnamespace(child, "grandchild")
    scene.settle(child, grandchild)
    assert scene.labels(grandchild)["team"] == "a"

    def versions() -> dict[str, str]:
        found = {
            name: (scene.ns(name) or {})["metadata"]["resourceVersion"]
            for name in (root, child, grandchild)
        }
        for parent, name in ((root, child), (child, grandchild)):
            found[f"{parent}/{name}"] = (scene.sub(parent, name) or {})["metadata"][
                "resourceVersion"
            ]
        return found

    before = versions()
    passes = running.metric("accurate_reconcile_passes_total")
    scene.wait(
        lambda: running.metric("accurate_reconcile_passes_total") >= passes + 3, "three more passes"
    )
    assert versions() == before
