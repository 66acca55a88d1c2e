"""``kubectl accurate list --markers`` (issue 14 item 4): how each namespace got into its tree,
read from the labels and the SubNamespaces, with a legend; plain ``list`` is unchanged."""

from __future__ import annotations

import json

from libaccurate.constants import LABEL_PARENT, LABEL_TEMPLATE, LABEL_TYPE
from tests.e2e.controller import Scene
from tests.e2e.test_controller_tree_labels import plugin


def test_markers_tell_roots_subnamespaces_grafts_and_instances_apart(
    subnamespace_crd: None, scene: Scene
) -> None:
    template = scene.namespace("tmpl", {LABEL_TYPE: "template"})
    root = scene.root(labels={LABEL_TEMPLATE: template})
    made = scene.subnamespace(root, "made")
    scene.kubectl("create", "namespace", made)
    scene.kubectl("label", "namespace", made, f"{LABEL_PARENT}={root}")
    grafted = scene.namespace("grafted", {LABEL_PARENT: root})

    drawn = plugin(scene, "list", root, "--markers")
    assert drawn.splitlines()[:3] == [
        f"{root} [r,i]",
        f"├── {grafted} [g]",
        f"└── {made} [s]",
    ]
    assert "[s] sub-namespace made by a SubNamespace" in drawn
    assert "[g] grafted: a parent label without a SubNamespace" in drawn
    data = json.loads(plugin(scene, "list", root, "--markers", "-o", "json"))
    assert data[0]["markers"] == ["r", "i"]
    assert [child["markers"] for child in data[0]["children"]] == [["g"], ["s"]]
    assert plugin(scene, "list", root) == f"{root}\n├── {grafted}\n└── {made}\n"
