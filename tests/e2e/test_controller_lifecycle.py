"""Sub-namespace lifecycle end to end (ACCEPTANCE E): SubNamespaces made and deleted with
kubectl, namespaces made and deleted by the controller process."""

from __future__ import annotations

from collections.abc import Callable

from accurate_testbed.processes import Process
from libaccurate.constants import (
    CREATED_BY_VALUE,
    FINALIZER,
    LABEL_CREATED_BY,
    LABEL_PARENT,
)
from tests.e2e.controller import Scene


def stalled(scene: Scene, parent: str, name: str) -> bool:
    condition = scene.condition(parent, name, "Stalled") or {}
    return condition.get("status") == "True" and condition.get("reason") == "Conflict"


def ready(scene: Scene, parent: str, name: str) -> bool:
    return (scene.condition(parent, name, "Ready") or {}).get("status") == "True"


def test_a_subnamespace_gets_its_namespace_and_takes_it_away(
    shared_controller: Callable[..., Process], scene: Scene
) -> None:
    shared_controller()
    root = scene.root()
    sub = scene.subnamespace(root, "sub")
    scene.kubectl(
        "wait", "--for=condition=Ready", f"subnamespace/{sub}", "-n", root, "--timeout=30s"
    )
    labels = scene.labels(sub)
    assert labels[LABEL_PARENT] == root
    assert labels[LABEL_CREATED_BY] == CREATED_BY_VALUE
    found = scene.sub(root, sub)
    assert found is not None
    assert FINALIZER in found["metadata"]["finalizers"]
    assert found["status"]["observedGeneration"] == found["metadata"]["generation"]
    assert scene.condition(root, sub, "Stalled") is None

    scene.kubectl("delete", "subnamespace", sub, "-n", root, "--wait=false")
    scene.wait(lambda: scene.sub(root, sub) is None, "the SubNamespace to go")
    scene.wait_gone(sub)


def test_a_namespace_of_that_name_is_never_touched_and_then_taken_over(
    shared_controller: Callable[..., Process], scene: Scene
) -> None:
    shared_controller()
    root = scene.root()
    taken = scene.namespace("taken", {"team": "other"})
    before = scene.ns(taken)
    assert before is not None

    scene.subnamespace(root, "taken")
    scene.wait(lambda: stalled(scene, root, taken), "Stalled/Conflict")
    assert (scene.condition(root, taken, "Ready") or {}).get("status") == "False"
    scene.kubectl("delete", "subnamespace", taken, "-n", root)
    assert scene.sub(root, taken) is None
    after = scene.ns(taken)
    assert after is not None
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

    scene.subnamespace(root, "taken")
    scene.wait(lambda: stalled(scene, root, taken), "Stalled/Conflict again")
    scene.delete_namespace(taken)
    scene.wait(lambda: scene.labels(taken).get(LABEL_PARENT) == root, "the namespace made anew")
    scene.wait(lambda: ready(scene, root, taken), "Ready")
    assert scene.condition(root, taken, "Stalled") is None
    assert "team" not in scene.labels(taken)


def test_a_second_subnamespace_of_the_same_name_waits_for_the_first(
    shared_controller: Callable[..., Process], scene: Scene
) -> None:
    shared_controller()
    first, second = scene.root("first"), scene.root("second")
    name = scene.subnamespace(first, "shared")
    scene.wait(lambda: ready(scene, first, name), "the first to be Ready")
    scene.subnamespace(second, "shared")
    scene.wait(lambda: stalled(scene, second, name), "the second to be Stalled")
    assert scene.labels(name)[LABEL_PARENT] == first

    scene.kubectl("delete", "subnamespace", name, "-n", first)
    scene.wait(lambda: scene.labels(name).get(LABEL_PARENT) == second, "the second to take over")
    scene.wait(lambda: ready(scene, second, name), "the second to be Ready")
    assert scene.condition(second, name, "Stalled") is None


def test_a_deleted_subnamespace_namespace_comes_back(
    shared_controller: Callable[..., Process], scene: Scene
) -> None:
    shared_controller()
    root = scene.root()
    sub = scene.subnamespace(root, "sub")
    scene.wait(lambda: ready(scene, root, sub), "Ready")
    uid = (scene.ns(sub) or {})["metadata"]["uid"]

    scene.delete_namespace(sub)

    def remade() -> bool:
        found = scene.ns(sub) or {"metadata": {}}
        return found["metadata"].get("uid") not in (None, uid) and not found["metadata"].get(
            "deletionTimestamp"
        )

    scene.wait(remade, "the namespace made again")
    assert scene.labels(sub)[LABEL_PARENT] == root
    scene.wait(lambda: ready(scene, root, sub), "Ready again")
