"""Per-subtree cascading deletion end to end (issue 14 item 3): kubectl deletes a SubNamespace
whose namespace has sub-namespaces; the webhook refuses and names the annotation, and once a
tenant sets it the controller process deletes the subtree, leaves first. Once the deletion is
admitted the annotation stays, whether the controller already saw the deletion or not (issue
30), so the subtree always goes to the end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import trustme

from accurate_testbed.kubectl import kubectl
from libaccurate.constants import ANNOTATION_ALLOW_CASCADING_DELETION
from tests.e2e.controller import Controllers, Scene
from tests.e2e.test_controller_tree_labels import start
from tests.e2e.webhooks import Webhooks, assert_denied_by


def test_an_annotated_subnamespace_takes_its_subtree_with_it(
    controllers: Controllers, scene: Scene, webhook_ca: trustme.CA, tmp_path: Path
) -> None:
    start(controllers, scene, webhook_ca, tmp_path, {})
    root = scene.root()
    team, web, api = scene.chain(root, "team", "web", "api")

    refused = kubectl(scene.cluster.kubeconfig, "delete", "subnamespace", team, "-n", root)
    assert refused.returncode == 1
    assert f'annotate the SubNamespace with {ANNOTATION_ALLOW_CASCADING_DELETION}="true"' in (
        refused.stderr
    )

    scene.kubectl(
        "annotate", "subnamespace", team, "-n", root, f"{ANNOTATION_ALLOW_CASCADING_DELETION}=true"
    )
    scene.kubectl("delete", "subnamespace", team, "-n", root, "--wait=false")
    scene.wait(
        lambda: (
            all(scene.ns(name) is None for name in (team, web, api))
            and scene.sub(root, team) is None
        ),
        "the whole subtree gone",
    )
    assert scene.ns(root) is not None


def test_the_annotation_stays_once_the_controller_started_the_cascade(
    controllers: Controllers, scene: Scene, webhook_ca: trustme.CA, tmp_path: Path
) -> None:
    """The deletion was admitted with the annotation; a tenant who tries to remove it while
    the subtree is going is refused, and the subtree goes to the end."""
    start(controllers, scene, webhook_ca, tmp_path, {})
    root = scene.root()
    team, web = scene.chain(root, "team", "web")
    # A finalizer keeps the leaf terminating, so the removal is tried while the cascade runs.
    hold = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "hold", "namespace": web, "finalizers": ["example.com/hold"]},
    }
    scene.apply(hold)
    try:
        delete_with_the_annotation(scene, root, team)
        scene.wait(
            lambda: f"deleting the subtree of {team}" in ready_message(scene, root, team),
            "the cascade",
        )
        refuse_removing_the_annotation(scene, root, team)
        assert f"1 left ({web})" in ready_message(scene, root, team)
    finally:
        # Released in any case, or the namespace would never go (on a real cluster too).
        release = '{"metadata":{"finalizers":null}}'
        kubectl(scene.cluster.kubeconfig, "patch", "configmap", "hold", "-n", web, "-p", release)

    wait_subtree_gone(scene, root, team, web)


def test_the_annotation_stays_before_the_controller_saw_the_deletion(
    controllers: Controllers,
    scene: Scene,
    webhook_ca: trustme.CA,
    tmp_path: Path,
    start_webhooks: Callable[..., Webhooks],
) -> None:
    """No controller runs when the SubNamespace is deleted (only the webhooks answer), so
    nothing has recorded the cascade yet: the annotation is the only record, and it cannot be
    taken away. The controller started afterwards deletes the whole subtree."""
    start(controllers, scene, webhook_ca, tmp_path, {})
    root = scene.root()
    team, web = scene.chain(root, "team", "web")
    controllers.stop_all()
    start_webhooks()

    delete_with_the_annotation(scene, root, team)
    refuse_removing_the_annotation(scene, root, team)
    assert scene.ns(team) is not None and scene.ns(web) is not None

    controllers.start({})
    wait_subtree_gone(scene, root, team, web)


def ready_message(scene: Scene, root: str, team: str) -> str:
    return str((scene.condition(root, team, "Ready") or {}).get("message", ""))


def delete_with_the_annotation(scene: Scene, root: str, team: str) -> None:
    annotation = f"{ANNOTATION_ALLOW_CASCADING_DELETION}=true"
    scene.kubectl("annotate", "subnamespace", team, "-n", root, annotation)
    scene.kubectl("delete", "subnamespace", team, "-n", root, "--wait=false")


def refuse_removing_the_annotation(scene: Scene, root: str, team: str) -> None:
    removal = f"{ANNOTATION_ALLOW_CASCADING_DELETION}-"
    refused = kubectl(
        scene.cluster.kubeconfig, "annotate", "subnamespace", team, "-n", root, removal
    )
    assert_denied_by(
        "vsubnamespace.accurate.cybozu.com",
        refused,
        f"{root}/{team} is being deleted with its subtree",
    )
    found = scene.sub(root, team) or {}
    annotations = found.get("metadata", {}).get("annotations") or {}
    assert annotations.get(ANNOTATION_ALLOW_CASCADING_DELETION) == "true"


def wait_subtree_gone(scene: Scene, root: str, team: str, web: str) -> None:
    scene.wait(
        lambda: scene.ns(team) is None and scene.ns(web) is None and scene.sub(root, team) is None,
        "the whole subtree gone",
    )
    assert scene.ns(root) is not None
