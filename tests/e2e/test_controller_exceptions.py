"""Per-object propagation exceptions end to end (issue 14 item 2): a Secret annotated with
kubectl, narrowed by a tree-label selector, re-targeted, mistyped and stopped, with the
controller process copying and deleting accordingly."""

from __future__ import annotations

import json

from libaccurate.constants import (
    ANNOTATION_PROPAGATE,
    ANNOTATION_PROPAGATE_NONE,
    ANNOTATION_PROPAGATE_SELECT,
    ANNOTATION_PROPAGATE_TREE_SELECT,
)
from libaccurate.network.kube import resource_path
from libaccurate.selection import REASON_BAD_EXCEPTION as REASON
from tests.e2e.controller import Controllers, Scene
from tests.e2e.test_controller_propagation import events_about
from tests.e2e.test_controller_tree_labels import SUFFIX, TREE_LABELS, plugin

HNC_TREE_SELECT = "propagate.hnc.x-k8s.io/treeSelect"
CONFIG = {"watches": [{"version": "v1", "kind": "Secret"}], **TREE_LABELS}


def test_exceptions_narrow_copies_and_a_typo_deletes_nothing(
    controllers: Controllers, scene: Scene
) -> None:
    controllers.start(CONFIG)
    root = scene.root()
    prod = scene.subnamespace(root, "prod")
    scene.settle(root, prod)
    web = scene.subnamespace(prod, "web")
    batch = scene.subnamespace(root, "batch")
    scene.settle(prod, web)
    scene.settle(root, batch)

    def copies() -> set[str]:
        return {
            ns
            for ns in (prod, web, batch)
            if scene.get(resource_path("", "v1", "secrets", ns, "shared")) is not None
        }

    def annotate(*pairs: str) -> None:
        scene.kubectl("annotate", "secret", "shared", "-n", root, "--overwrite", *pairs)

    scene.kubectl("create", "secret", "generic", "shared", "-n", root, "--from-literal=k=v")
    annotate(
        f"{ANNOTATION_PROPAGATE}=update",
        f"{ANNOTATION_PROPAGATE_SELECT}=!{prod}.{SUFFIX}/depth",
    )
    scene.wait(lambda: copies() == {batch}, "a copy outside the excluded subtree only")

    # HNC's exception, as an import from HNC leaves it beside ours, narrows the source alone:
    # like HNC, the controller copies none of HNC's keys (issue 27 point 6).
    annotate(
        f"{ANNOTATION_PROPAGATE_SELECT}-",
        f"{ANNOTATION_PROPAGATE_TREE_SELECT}={web}",
        f"{HNC_TREE_SELECT}={web}",
    )
    scene.wait(lambda: copies() == {web}, "the copy moving to the selected subtree")
    copied = scene.get(resource_path("", "v1", "secrets", web, "shared")) or {}
    annotations = copied["metadata"]["annotations"]
    assert annotations[ANNOTATION_PROPAGATE_TREE_SELECT] == web
    assert HNC_TREE_SELECT not in annotations

    annotate(f"{ANNOTATION_PROPAGATE_SELECT}=env in (prod")

    def warned() -> str:
        found = [m for _, reason, m in events_about(scene, root, "shared") if reason == REASON]
        return found[0] if found else ""

    message = scene.wait(warned, "a Warning about the typo")
    assert f"annotation {ANNOTATION_PROPAGATE_SELECT} cannot be parsed" in message
    assert copies() == {web}
    described = json.loads(plugin(scene, "ns", "describe", root, "-o", "json"))
    shared = next(r for r in described["resources"] if r["name"] == "shared")
    assert shared["exceptions"].startswith("blocked: annotation")
    assert any(
        p.startswith(f"Secret shared: annotation {ANNOTATION_PROPAGATE_SELECT} cannot be parsed")
        for p in described["problems"]
    )
    text = plugin(scene, "ns", "describe", root)
    assert "EXCEPTIONS" in text and "Problem:" in text

    annotate(f"{ANNOTATION_PROPAGATE_SELECT}-", f"{ANNOTATION_PROPAGATE_NONE}=true")
    scene.wait(lambda: copies() == set(), "every copy gone with propagate-none")


def test_describe_names_a_conflicting_subnamespace_with_its_reason(
    controllers: Controllers, scene: Scene
) -> None:
    controllers.start(CONFIG)
    root = scene.root()
    taken = scene.namespace("taken")
    scene.subnamespace(root, "taken")
    scene.wait(
        lambda: (scene.condition(root, taken, "Ready") or {}).get("reason") == "Conflict",
        "the conflict reported",
    )
    described = json.loads(plugin(scene, "ns", "describe", root, "-o", "json"))
    assert f"SubNamespace {root}/{taken}: Conflict: namespace {taken} exists and is not a " in (
        "\n".join(described["problems"])
    )
