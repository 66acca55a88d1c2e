"""How soon the controller answers a SubNamespace, shown by order rather than by time (issue 31).

A script that moves or deletes a SubNamespace checks at once that it is gone: the controller
must let it go before the rest of the work that change brings, and never write a status onto
a SubNamespace being deleted (the API server refuses it with 409 Conflict, and the finalizer's
removal waited behind it). Passes are made long on purpose with ``--apiserver-qps-throttle 1``:
one request a second for each resource kind, so copying Secrets takes seconds, while a
SubNamespace's finalizer, another kind, waits for none of them. The figures (how many
milliseconds) are in bench/ (scenarios 14 and 15).
"""

from __future__ import annotations

from typing import Any

from accurate_testbed.objects import secret
from libaccurate.constants import LABEL_PARENT
from libaccurate.network.kube import resource_path
from tests.e2e.cli import run_plugin, succeeded
from tests.e2e.controller import SECRETS, Controllers, Scene

SUFFIX = "tree.accurate.cybozu.com"
# Namespaces the first pass writes tree labels to, one a second: a pass of this many seconds.
TREE = 10
# Secrets to copy for the move: about this many seconds of a pass at one request a second.
COPIES = 8
SLOW = ("--apiserver-qps-throttle", "1")


def conflicts(running: Any) -> float:
    """The 409 Conflict answers the controller has had from the API server."""
    _, text = running.get(f"{running.metrics}/metrics")
    prefix = 'accurate_api_errors_total{code="409"} '
    return sum(float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix))


def two_roots_and_a_child(scene: Scene) -> tuple[str, str, str]:
    """Roots ``old`` (holding a Ready sub-namespace) and ``new`` (holding COPIES update-mode
    Secrets); their names and the sub-namespace's."""
    old, new = scene.root("old"), scene.root("new")
    for index in range(COPIES):
        path = resource_path("", "v1", "secrets", new)
        scene.kube.create(path, secret(new, f"s{index}", "update", {"value": "x"}))
    child = scene.subnamespace(old, "child")
    scene.settle(old, child)
    return old, new, child


def test_after_sub_move_the_old_subnamespace_is_gone_before_the_move_is_carried_out(
    controllers: Controllers, scene: Scene
) -> None:
    """What a script sees after ``kubectl accurate sub move``: the SubNamespace in the old
    parent is gone while the controller is still copying the new parent's objects in."""
    running = controllers.start(SECRETS, *SLOW)
    old, new, child = two_roots_and_a_child(scene)
    succeeded(run_plugin("sub", "move", child, new, kubeconfig=scene.cluster.kubeconfig))
    scene.wait(lambda: scene.sub(old, child) is None, f"SubNamespace {old}/{child} to go")
    assert scene.copies(child, new) < COPIES
    scene.wait(lambda: scene.copies(child, new) == COPIES, "every copy from the new parent")
    scene.settle(new, child)
    assert scene.labels(child)[LABEL_PARENT] == new
    assert conflicts(running) == 0, running.output()


def test_a_subnamespace_deleted_during_a_pass_gets_no_status_and_goes_first(
    controllers: Controllers, scene: Scene
) -> None:
    """The Go plugin's move, step by step: the namespace changes parent (the old SubNamespace
    is now in conflict, and a pass starts copying), then the old SubNamespace is deleted in the
    middle of that pass. Its finalizer comes off at once; the conflict status the pass planned
    for it is not sent onto the SubNamespace being deleted."""
    running = controllers.start(SECRETS, *SLOW)
    old, new, child = two_roots_and_a_child(scene)
    scene.kubectl("label", "namespace", child, f"{LABEL_PARENT}={new}", "--overwrite")
    scene.wait(lambda: scene.copies(child, new) >= 1, "the pass for the new parent to start")
    scene.kubectl("delete", "subnamespace", child, "-n", old, "--wait=false")
    scene.wait(lambda: scene.sub(old, child) is None, f"SubNamespace {old}/{child} to go")
    assert scene.copies(child, new) < COPIES
    scene.wait(lambda: scene.copies(child, new) == COPIES, "every copy from the new parent")
    assert conflicts(running) == 0, running.output()
    assert scene.ns(child) is not None


def test_a_subnamespace_created_during_a_long_pass_gets_its_namespace_before_the_pass_ends(
    controllers: Controllers, scene: Scene
) -> None:
    """Tree labels turned on: the first pass writes every namespace of the tree, one a second.
    A tenant's SubNamespace created meanwhile gets its namespace while that pass is still
    labelling the others, then is Ready."""
    root = scene.root()
    children = [scene.namespace(f"c{index}", {LABEL_PARENT: root}) for index in range(TREE)]
    depth = f"{root}.{SUFFIX}/depth"
    controllers.start({**SECRETS, "treeLabels": {"suffix": SUFFIX}}, *SLOW)
    scene.wait(lambda: depth in scene.labels(root), "the first pass to start labelling")
    tenant = scene.subnamespace(root, "tenant")
    scene.wait(lambda: scene.ns(tenant) is not None, f"namespace {tenant}")
    assert len([child for child in children if depth in scene.labels(child)]) < TREE
    scene.wait(lambda: all(depth in scene.labels(child) for child in children), "every tree label")
    scene.settle(root, tenant)
    assert scene.labels(tenant)[depth] == "1"
