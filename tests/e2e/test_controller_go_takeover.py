"""Replacing a Go Accurate older than v1.4 directly (issue 27 point 2, docs/install.md).

Up to v1.2 the Go controller wrote namespace metadata by plain create and update, which the
API server records as ``Update`` entries of the field manager ``accurate-controller`` (the
binary's name, from the User-Agent). Server-side apply never removes a key another entry still
owns, so without a takeover such keys would stay on the children forever once the root lost
them. The stand-in below writes exactly what that Go controller wrote, with the same field
manager, by the same verbs.
"""

from __future__ import annotations

from typing import Any

from libaccurate.constants import CREATED_BY_VALUE, FIELD_MANAGER, LABEL_CREATED_BY, LABEL_PARENT
from libaccurate.network.kube import resource_path
from tests.e2e.controller import Controllers, Scene

NAMESPACES = resource_path("", "v1", "namespaces")
# What controller-runtime's client records when no field owner is given: the User-Agent's
# product, the binary accurate-controller (cybozu-go/accurate v1.4's migration tests do the
# same to simulate a namespace written before server-side apply).
AS_GO = {"fieldManager": FIELD_MANAGER}
CONFIG: dict[str, Any] = {
    "labelKeys": ["team", "tier"],
    "annotationKeys": ["memo"],
    "subNamespaceLabelKeys": ["env"],
}


def go_v1_2_tree(scene: Scene) -> tuple[str, str, str]:
    """root <- child <- grandchild, the children made and kept by the Go controller v1.2."""
    root = scene.root(labels={"team": "a", "tier": "gold"})
    scene.kubectl("annotate", "namespace", root, "memo=m")
    names = [root]
    for prefix in ("child", "grandchild"):
        parent = names[-1]
        name = scene.subnamespace(parent, prefix, labels={"env": "dev"})
        # Its SubNamespace reconciler: r.Create of the namespace.
        labels = {LABEL_PARENT: parent, LABEL_CREATED_BY: CREATED_BY_VALUE}
        metadata = {"name": name, "labels": scene.cluster.own(labels)}
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
        scene.kube.create(NAMESPACES, body, **AS_GO)
        # Its namespace reconciler's propagateMeta: r.Update with the inherited keys.
        path = resource_path("", "v1", "namespaces", name=name)
        namespace = scene.kube.get(path)
        namespace["metadata"]["labels"].update({"team": "a", "tier": "gold", "env": "dev"})
        namespace["metadata"]["annotations"] = {"memo": "m"}
        scene.kube.replace(path, namespace, **AS_GO)
        names.append(name)
    return root, names[1], names[2]


def _go_owns(scene: Scene, name: str, key: str) -> bool:
    for entry in (scene.ns(name) or {})["metadata"].get("managedFields") or ():
        labels = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels") or {}
        if entry["manager"] == FIELD_MANAGER and entry["operation"] == "Update":
            return f"f:{key}" in labels
    return False


def test_keys_a_go_v1_2_controller_wrote_go_when_the_root_loses_them(
    controllers: Controllers, scene: Scene
) -> None:
    root, child, grandchild = go_v1_2_tree(scene)
    below = (child, grandchild)
    assert all(_go_owns(scene, name, "team") for name in below)
    # Removed while no controller ran: the first pass must carry it down already.
    scene.kubectl("label", "namespace", root, "tier-")

    controllers.start(CONFIG)
    scene.settle(root, child)
    scene.settle(child, grandchild)
    scene.wait(
        lambda: all("tier" not in scene.labels(name) for name in below),
        "tier, gone from the root before the controller started, to go from the children",
    )

    scene.kubectl("label", "namespace", root, "team-")
    scene.kubectl("annotate", "namespace", root, "memo-")
    scene.wait(
        lambda: all(
            "team" not in scene.labels(name) and "memo" not in scene.annotations(name)
            for name in below
        ),
        "team and memo, removed from the root, to go from the children",
    )
    scene.kubectl(
        "patch", "subnamespace", child, "-n", root, "--type=merge", "-p", '{"spec":{"labels":null}}'
    )
    scene.wait(lambda: "env" not in scene.labels(child), "env, gone from the spec, to go")
    for name in below:
        assert not _go_owns(scene, name, "team")
        labels = scene.labels(name)
        assert labels[LABEL_CREATED_BY] == CREATED_BY_VALUE
    assert scene.labels(grandchild)[LABEL_PARENT] == child
    assert scene.labels(grandchild)["env"] == "dev"
