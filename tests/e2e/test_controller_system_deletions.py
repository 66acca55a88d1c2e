"""Deletions made by the cluster itself, with the controller's webhooks registered.

kube-controller-manager's namespace controller and garbage collector are ordinary API clients:
each object they delete or patch passes the admission webhooks, ours included, and a refusal
leaves a namespace Terminating for as long as it lasts. These flows must never meet one of our
refusals: a namespace holding SubNamespaces (with cascading deletion on, its whole tree), a
namespace holding a SubNamespace whose namespace belongs to another parent, sources the
garbage collector deletes (their copies follow) and copies it deletes (they come back).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trustme

from accurate_testbed.objects import secret
from accurate_testbed.waiting import CONTROLLER_TIMEOUT
from libaccurate import subnamespaces
from libaccurate.constants import ANNOTATION_FROM, LABEL_PARENT
from libaccurate.network.kube import resource_path
from tests.e2e.controller import Controllers, Scene
from tests.e2e.test_controller_tree_labels import start

CONFIG: dict[str, Any] = {"watches": [{"version": "v1", "kind": "Secret"}]}


def secret_in(scene: Scene, namespace: str, name: str) -> dict[str, Any] | None:
    return scene.get(resource_path("", "v1", "secrets", namespace, name))


def config_map(scene: Scene, namespace: str, name: str) -> dict[str, Any]:
    """Make ConfigMap ``name`` with kubectl; it as stored."""
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    made = scene.kubectl("create", "-n", namespace, "-f", "-", "-o", "json", stdin=manifest)
    return dict(json.loads(made))


def reference_to(owner: dict[str, Any]) -> dict[str, Any]:
    """An ownerReference to ``owner`` as a controller sets it (blocking its foreground
    deletion)."""
    meta = owner["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": meta["name"],
        "uid": meta["uid"],
        "blockOwnerDeletion": True,
    }


def test_a_root_deleted_with_cascading_deletion_on_takes_its_whole_tree(
    controllers: Controllers, scene: Scene, webhook_ca: trustme.CA, tmp_path: Path
) -> None:
    """The namespace controller deletes each SubNamespace of a terminating namespace through
    our webhook; with --webhook-allow-cascading-deletion it lets them go, whatever is below."""
    cascading = ["--webhook-allow-cascading-deletion"]
    start(controllers, scene, webhook_ca, tmp_path, {}, flags=cascading)
    root = scene.root()
    team, web = scene.chain(root, "team", "web")
    other = scene.subnamespace(root, "other")
    scene.settle(root, other)

    scene.kubectl("delete", "namespace", root, "--wait=false")

    scene.wait(
        lambda: all(scene.ns(name) is None for name in (root, team, web, other)),
        "the root and every namespace below it to go",
    )


def test_a_namespace_holding_a_subnamespace_of_another_parents_namespace_goes_alone(
    controllers: Controllers, scene: Scene, webhook_ca: trustme.CA, tmp_path: Path
) -> None:
    """A SubNamespace in conflict (its namespace has another parent) does not keep the
    namespace holding it: our webhook lets the namespace controller delete it, and the
    namespace of the same name stays with its own parent."""
    start(controllers, scene, webhook_ca, tmp_path, {})
    owner, leaving = scene.root("owner"), scene.root("leaving")
    shared = scene.subnamespace(owner, "shared")
    scene.settle(owner, shared)
    assert scene.subnamespace(leaving, "shared") == shared
    scene.wait(
        lambda: (scene.condition(leaving, shared, "Stalled") or {}).get("reason") == "Conflict",
        "the SubNamespace in the other root to be in conflict",
    )

    scene.delete_namespace(leaving)

    assert scene.labels(shared)[LABEL_PARENT] == owner
    assert scene.sub(owner, shared) is not None


def test_garbage_collection_of_a_source_and_of_a_copy(
    controllers: Controllers, scene: Scene, webhook_ca: trustme.CA, tmp_path: Path
) -> None:
    """The collector deletes a source whose owner went (the copies follow it) and a copy whose
    owner went (the controller makes it again, without the reference)."""
    start(controllers, scene, webhook_ca, tmp_path, CONFIG)
    root = scene.root()
    (child,) = scene.chain(root, "child")
    owner = config_map(scene, root, "owner")
    owned = secret(root, "owned", "update", {"a": "1"})
    owned["metadata"]["ownerReferences"] = [reference_to(owner)]
    scene.apply(owned, secret(root, "kept", "update", {"b": "2"}))
    scene.wait(
        lambda: secret_in(scene, child, "owned") and secret_in(scene, child, "kept"),
        "both copies",
    )

    scene.kubectl("delete", "configmap", "owner", "-n", root, "--cascade=foreground")
    scene.wait(lambda: secret_in(scene, root, "owned") is None, "the source to be collected")
    scene.wait(lambda: secret_in(scene, child, "owned") is None, "its copy to follow")

    holder = config_map(scene, child, "holder")
    first = secret_in(scene, child, "kept") or {}
    tie = json.dumps({"metadata": {"ownerReferences": [reference_to(holder)]}})
    scene.kubectl("patch", "secret", "kept", "-n", child, "--type=merge", "-p", tie)
    scene.kubectl("delete", "configmap", "holder", "-n", child)

    def made_again() -> dict[str, Any] | None:
        found = secret_in(scene, child, "kept")
        return found if found and found["metadata"]["uid"] != first["metadata"]["uid"] else None

    again = scene.wait(made_again, "the collected copy to be made again")
    assert "ownerReferences" not in again["metadata"]
    assert again["metadata"]["annotations"][ANNOTATION_FROM] == root


def test_the_collector_may_not_delete_a_subnamespace_whose_namespace_has_children(
    controllers: Controllers, scene: Scene, webhook_ca: trustme.CA, tmp_path: Path
) -> None:
    """A SubNamespace whose owner went is deleted by the collector under the rule any deletion
    meets: refused while its namespace has sub-namespaces, and tried again until it has none
    (the collector's retries grow to minutes, hence the longer wait)."""
    start(controllers, scene, webhook_ca, tmp_path, {})
    root = scene.root()
    owner = config_map(scene, root, "owner")
    team = scene.name("team")
    scene.apply(
        {
            "apiVersion": subnamespaces.api_version(),
            "kind": "SubNamespace",
            "metadata": {
                "name": team,
                "namespace": root,
                "ownerReferences": [reference_to(owner)],
            },
        }
    )
    scene.settle(root, team)
    (web,) = scene.chain(team, "web")

    scene.kubectl("delete", "configmap", "owner", "-n", root)
    assert not (scene.sub(root, team) or {})["metadata"].get("deletionTimestamp")
    assert scene.ns(team) is not None

    scene.kubectl("delete", "subnamespace", web, "-n", team, "--wait=false")
    scene.wait(
        lambda: scene.sub(root, team) is None and scene.ns(team) is None,
        "the collector to delete the SubNamespace once its namespace has no children",
        timeout=CONTROLLER_TIMEOUT,
    )
