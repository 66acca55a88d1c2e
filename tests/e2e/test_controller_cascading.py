"""Per-subtree cascading deletion end to end (issue 14 item 3): kubectl deletes a SubNamespace
whose namespace has sub-namespaces; the webhook refuses and names the annotation, and once a
tenant sets it the controller process deletes the subtree, leaves first."""

from __future__ import annotations

from pathlib import Path

import trustme

from accurate_testbed.kubectl import kubectl
from libaccurate.constants import ANNOTATION_ALLOW_CASCADING_DELETION
from tests.e2e.controller import Controllers, Scene
from tests.e2e.test_controller_tree_labels import start


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


def test_a_cascade_goes_on_when_the_annotation_is_removed_halfway(
    controllers: Controllers, scene: Scene, webhook_ca: trustme.CA, tmp_path: Path
) -> None:
    """The deletion was admitted with the annotation; a tenant who removes it while the
    subtree is going does not leave half a tree behind, and the status says why."""
    start(controllers, scene, webhook_ca, tmp_path, {})
    root = scene.root()
    team, web = scene.chain(root, "team", "web")
    # A finalizer keeps the leaf terminating, so the annotation goes while the cascade runs.
    hold = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "hold", "namespace": web, "finalizers": ["example.com/hold"]},
    }
    scene.apply(hold)
    try:
        _remove_the_annotation_halfway(scene, root, team, web)
    finally:
        # Released in any case, or the namespace would never go (on a real cluster too).
        release = '{"metadata":{"finalizers":null}}'
        kubectl(scene.cluster.kubeconfig, "patch", "configmap", "hold", "-n", web, "-p", release)

    scene.wait(
        lambda: scene.ns(team) is None and scene.ns(web) is None and scene.sub(root, team) is None,
        "the whole subtree gone",
    )
    assert scene.ns(root) is not None


def _remove_the_annotation_halfway(scene: Scene, root: str, team: str, web: str) -> None:
    """Delete SubNamespace ``root/team`` with the annotation, take it away once the cascade
    runs (``web`` held terminating), and check the status says the cascade goes on."""
    annotation = ANNOTATION_ALLOW_CASCADING_DELETION
    scene.kubectl("annotate", "subnamespace", team, "-n", root, f"{annotation}=true")
    scene.kubectl("delete", "subnamespace", team, "-n", root, "--wait=false")

    def ready_message() -> str:
        return str((scene.condition(root, team, "Ready") or {}).get("message", ""))

    scene.wait(lambda: f"deleting the subtree of {team}" in ready_message(), "the cascade")
    scene.kubectl("annotate", "subnamespace", team, "-n", root, f"{annotation}-")
    scene.wait(
        lambda: f"{annotation} was removed after the deletion was admitted" in ready_message(),
        "the status to say why the cascade goes on",
    )
    assert f"1 left ({web})" in ready_message()
