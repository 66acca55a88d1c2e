"""The markers ``kubectl accurate list`` draws by default (issue 14 item 4): how each namespace
got into its tree, read from the labels and the SubNamespaces, with a legend of the markers
drawn. ``--no-markers`` gives the plain tree of one request; ``-o json|yaml`` carries markers
only when asked with ``--markers``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accurate_testbed.apiserver.server import ApiServer
from libaccurate.constants import LABEL_PARENT, LABEL_TEMPLATE, LABEL_TYPE
from tests.e2e.cli import run_plugin, succeeded
from tests.e2e.controller import Scene
from tests.e2e.test_controller_startup import _robot
from tests.e2e.test_controller_tree_labels import plugin

LEGEND = (
    "[r] root  [s] sub-namespace made by a SubNamespace  "
    "[g] grafted: a parent label without a SubNamespace  [i] instance of a template"
)


def marked_tree(scene: Scene) -> tuple[str, str, str]:
    """A root using a template, with a sub-namespace its SubNamespace made and a grafted one."""
    template = scene.namespace("tmpl", {LABEL_TYPE: "template"})
    root = scene.root(labels={LABEL_TEMPLATE: template})
    made = scene.subnamespace(root, "made")
    scene.kubectl("create", "namespace", made)
    scene.kubectl("label", "namespace", made, f"{LABEL_PARENT}={root}")
    grafted = scene.namespace("grafted", {LABEL_PARENT: root})
    return root, made, grafted


def test_list_marks_roots_subnamespaces_grafts_and_instances_by_default(
    subnamespace_crd: None, scene: Scene
) -> None:
    root, made, grafted = marked_tree(scene)

    drawn = f"{root} [r,i]\n├── {grafted} [g]\n└── {made} [s]\n\n{LEGEND}\n"
    assert plugin(scene, "list", root) == drawn
    assert plugin(scene, "sub", "list", root) == drawn
    assert plugin(scene, "list", root, "--markers") == drawn
    assert plugin(scene, "list", root, "--no-markers") == f"{root}\n├── {grafted}\n└── {made}\n"
    assert (
        plugin(scene, "list", made) == f"{made} [s]\n\n[s] sub-namespace made by a SubNamespace\n"
    )


def test_machine_readable_output_carries_markers_only_when_asked(
    subnamespace_crd: None, scene: Scene
) -> None:
    root, made, grafted = marked_tree(scene)

    data = json.loads(plugin(scene, "list", root, "--markers", "-o", "json"))
    assert data[0]["markers"] == ["r", "i"]
    assert [child["markers"] for child in data[0]["children"]] == [["g"], ["s"]]
    plain = json.loads(plugin(scene, "list", root, "-o", "json"))
    assert plain == [
        {
            "name": root,
            "children": [{"name": grafted, "children": []}, {"name": made, "children": []}],
        }
    ]


@pytest.mark.fault_injection
def test_markers_cost_the_subnamespaces_list_and_no_markers_one_request(
    subnamespace_crd: None, scene: Scene, apiserver: ApiServer
) -> None:
    root, _, _ = marked_tree(scene)
    plugin(scene, "list", root)  # the SubNamespace version is found once and kept on disk

    apiserver.clear_requests()
    plugin(scene, "list", root)
    assert sorted((r.method, r.path, r.verb) for r in apiserver.requests) == [
        ("GET", "/api/v1/namespaces", "list"),
        ("GET", "/apis/accurate.cybozu.com/v2/subnamespaces", "list"),
    ]
    apiserver.clear_requests()
    plugin(scene, "list", root, "--no-markers")
    assert [(r.method, r.path, r.verb) for r in apiserver.requests] == [
        ("GET", "/api/v1/namespaces", "list")
    ]


@pytest.mark.fault_injection
def test_a_user_who_may_not_list_subnamespaces_gets_the_other_markers(
    subnamespace_crd: None, scene: Scene, apiserver: ApiServer, tmp_path: Path
) -> None:
    root, made, grafted = marked_tree(scene)
    rules = [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list"]}]
    kubeconfig = _robot(apiserver, scene, tmp_path, rules)

    assert succeeded(run_plugin("list", root, kubeconfig=kubeconfig)) == (
        f"{root} [r,i]\n├── {grafted} [s]\n└── {made} [s]\n\n[r] root  [s] sub-namespace "
        "(made or grafted: the SubNamespaces could not all be read)  [i] instance of a template\n"
    )
