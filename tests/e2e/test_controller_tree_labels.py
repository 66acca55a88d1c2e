"""Tree labels end to end (issue 14 item 1): the controller process with ``treeLabels`` keeps
``<ancestor>.<suffix>/depth`` on every namespace of a tree through create, move, graft and cut
done with the real ``kubectl accurate``, and its webhook refuses a hand edit made with kubectl."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import trustme

from accurate_testbed.certificates import write_serving_pair
from accurate_testbed.kubectl import kubectl
from accurate_testbed.objects import namespace_manifest
from accurate_testbed.processes import free_port
from tests.e2e.cli import run_plugin
from tests.e2e.controller import Controllers, Scene
from tests.e2e.webhooks import register_webhooks

SUFFIX = "tree.accurate.cybozu.com"
TREE_LABELS = {"treeLabels": {"suffix": SUFFIX}}


def depth(ancestor: str) -> str:
    return f"{ancestor}.{SUFFIX}/depth"


def tree_labels(scene: Scene, name: str) -> dict[str, str]:
    return {k: v for k, v in scene.labels(name).items() if k.endswith(f".{SUFFIX}/depth")}


def lineage(*names: str) -> dict[str, str]:
    """The tree labels of ``names[0]`` whose ancestors are the rest, nearest first."""
    return {depth(name): str(distance) for distance, name in enumerate(names)}


def start(
    controllers: Controllers,
    scene: Scene,
    ca: trustme.CA,
    folder: Path,
    config: Mapping[str, Any] = TREE_LABELS,
    manifests: str = "default",
    port: int | None = None,
    flags: Sequence[str] = (),
) -> None:
    """A controller (with tree labels on, unless ``config`` says otherwise, and ``flags``) that
    also serves the webhooks (on ``port`` if given), registered from the kustomize directory
    ``manifests``."""
    cert_dir = folder / "serving-certs"
    write_serving_pair(ca, cert_dir)
    port = port or free_port()
    serving = ("--webhook-addr", f"127.0.0.1:{port}", "--cert-dir", str(cert_dir))
    controllers.start(config, *serving, *flags)
    register_webhooks(scene.cluster, f"https://127.0.0.1:{port}", ca, manifests)


def plugin(scene: Scene, *args: str) -> str:
    """``kubectl accurate ARGS`` that must succeed; its output."""
    result = run_plugin(*args, kubeconfig=scene.cluster.kubeconfig)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_tree_labels_follow_create_move_graft_and_cut(
    controllers: Controllers, scene: Scene, webhook_ca: trustme.CA, tmp_path: Path
) -> None:
    start(controllers, scene, webhook_ca, tmp_path)
    root, other = scene.root(), scene.root("other")
    team = scene.subnamespace(root, "team")
    scene.settle(root, team)
    web = scene.subnamespace(team, "web")
    scene.wait(lambda: tree_labels(scene, web) == lineage(web, team, root), "labels on creation")
    assert tree_labels(scene, root) == lineage(root)
    described = json.loads(plugin(scene, "ns", "describe", web, "-o", "json"))
    assert described["treeLabels"] == lineage(web, team, root)
    text = plugin(scene, "ns", "describe", web)
    assert f"{depth(root)}=2, {depth(team)}=1, {depth(web)}=0" in text

    plugin(scene, "sub", "move", team, other)
    scene.wait(
        lambda: (
            tree_labels(scene, web) == lineage(web, team, other)
            and tree_labels(scene, team) == lineage(team, other)
        ),
        "labels after a move",
    )
    assert tree_labels(scene, root) == lineage(root)

    loose = scene.namespace("loose")
    assert tree_labels(scene, loose) == {}
    plugin(scene, "sub", "graft", loose, web)
    scene.wait(
        lambda: tree_labels(scene, loose) == lineage(loose, web, team, other), "labels on a graft"
    )

    plugin(scene, "sub", "cut", web)
    scene.wait(
        lambda: (
            tree_labels(scene, loose) == lineage(loose, web)
            and tree_labels(scene, web) == lineage(web)
        ),
        "labels after a cut",
    )


def test_a_hand_edit_of_a_tree_label_is_refused_by_the_webhook(
    controllers: Controllers, scene: Scene, webhook_ca: trustme.CA, tmp_path: Path
) -> None:
    start(controllers, scene, webhook_ca, tmp_path)
    root = scene.root()
    team = scene.subnamespace(root, "team")
    scene.wait(lambda: tree_labels(scene, team) == lineage(team, root), "labels on creation")

    edit = kubectl(
        scene.cluster.kubeconfig, "label", "namespace", team, f"{depth(root)}=5", "--overwrite"
    )
    assert edit.returncode == 1
    assert f"label {depth(root)} of namespace {team} is a tree label" in edit.stderr
    removal = kubectl(scene.cluster.kubeconfig, "label", "namespace", team, f"{depth(root)}-")
    assert removal.returncode == 1
    assert "it must be '1'" in removal.stderr
    planted = kubectl(scene.cluster.kubeconfig, "label", "namespace", team, f"{depth('x')}=0")
    assert planted.returncode == 1
    assert "it must not be set" in planted.stderr
    assert tree_labels(scene, team) == lineage(team, root)


@pytest.mark.parametrize("manifests", ["tree-labels", "without-match-conditions"])
def test_a_tree_label_set_by_hand_outside_every_tree_is_refused(
    controllers: Controllers, scene: Scene, webhook_ca: trustme.CA, tmp_path: Path, manifests: str
) -> None:
    """The namespace webhook sees a namespace without any accurate.cybozu.com/ label when it
    gains a tree label: through the matchConditions of controller/config/tree-labels, or
    because clusters older than 1.28 send it every namespace. The controller's own writes of
    tree labels still pass."""
    start(controllers, scene, webhook_ca, tmp_path, manifests=manifests)
    root, plain = scene.root(), scene.namespace("plain")
    config = scene.cluster.kubeconfig

    labelled = kubectl(config, "label", "namespace", plain, f"{depth(root)}=1")
    assert labelled.returncode == 1
    assert f"label {depth(root)} of namespace {plain} is a tree label" in labelled.stderr
    assert "it must not be set" in labelled.stderr
    own = kubectl(config, "label", "namespace", plain, f"{depth(plain)}=0")
    assert own.returncode == 1
    born = namespace_manifest(scene.name("born"), scene.cluster.own({depth(root): "1"}))
    created = kubectl(config, "create", "-f", "-", stdin=born)
    assert created.returncode == 1
    assert "is a tree label" in created.stderr
    assert scene.ns(born["metadata"]["name"]) is None
    assert tree_labels(scene, plain) == {}

    plugin(scene, "sub", "graft", plain, root)
    scene.wait(lambda: tree_labels(scene, plain) == lineage(plain, root), "labels on a graft")


@pytest.mark.parametrize(
    "then", [{}, {"treeLabels": {"suffix": "tree.hnc.x-k8s.io"}}], ids=["off", "new-suffix"]
)
def test_turning_tree_labels_off_or_a_new_suffix_takes_the_controllers_labels_away(
    controllers: Controllers,
    scene: Scene,
    webhook_ca: trustme.CA,
    tmp_path: Path,
    then: Mapping[str, Any],
) -> None:
    """Restarted with another config, the controller removes the tree labels it wrote from
    every namespace, the root included; a tree label someone else set stays."""
    start(controllers, scene, webhook_ca, tmp_path)
    root = scene.root()
    team = scene.subnamespace(root, "team")
    scene.wait(lambda: tree_labels(scene, team) == lineage(team, root), "labels on creation")
    controllers.stop_all()
    by_hand = {depth("elsewhere"): "3"}
    scene.kubectl("label", "namespace", root, f"{depth('elsewhere')}=3")

    controllers.start(then)

    scene.wait(
        lambda: tree_labels(scene, root) == by_hand and tree_labels(scene, team) == {},
        "the controller's tree labels to go",
    )
    if then:
        new = f"{root}.tree.hnc.x-k8s.io/depth"
        assert scene.labels(team)[new] == "1"
        assert scene.labels(root)[new] == "0"
