"""v1 readers of SubNamespaces our controller reconciles (issue 31, point 2): with the CRD serving
v1 beside v2 and converting through the controller's conversion webhook, as a cluster upgraded
from the Go Accurate v0.x may, ``kubectl get subnamespaces.v1.accurate.cybozu.com`` reads the
status string the Go controller would have written: ``ok`` for a healthy SubNamespace,
``conflict`` for one whose namespace belongs elsewhere.

The test installs the CRD itself, so on a real cluster that already has one it is skipped
rather than replace it (see test_cli_versions.Crds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trustme

from accurate_testbed.certificates import ca_bundle
from accurate_testbed.cluster import RUN_LABEL, Cluster
from accurate_testbed.manifests import subnamespace_crd_manifest
from accurate_testbed.processes import free_port
from libaccurate.constants import GROUP, SUBNAMESPACE_PLURAL
from tests.e2e.cli import World
from tests.e2e.controller import Controllers, Scene
from tests.e2e.test_cli_versions import Crds
from tests.e2e.test_controller_lifecycle import stalled
from tests.e2e.test_controller_tree_labels import start


@pytest.fixture
def crds(cluster: Cluster, scene: Scene) -> Crds:
    return Crds(World(cluster), scene)


def crd_converting_at(url: str, ca: trustme.CA, run: str) -> dict[str, Any]:
    """Our CRD, serving v1 too, converting through the webhook at ``url``."""
    crd = subnamespace_crd_manifest()
    crd["metadata"].setdefault("labels", {})[RUN_LABEL] = run
    for version in crd["spec"]["versions"]:
        if version["name"] == "v1":
            version["served"] = True
    client = {"url": f"{url}/convert", "caBundle": ca_bundle(ca)}
    crd["spec"]["conversion"]["webhook"]["clientConfig"] = client
    return crd


def v1_status(scene: Scene, parent: str, name: str) -> str:
    """The status string a v1 reader sees, through kubectl."""
    resource = f"{SUBNAMESPACE_PLURAL}.v1.{GROUP}"
    return scene.kubectl("get", resource, name, "-n", parent, "-o", "jsonpath={.status}")


def test_v1_readers_see_ok_and_conflict(
    controllers: Controllers, scene: Scene, crds: Crds, webhook_ca: trustme.CA, tmp_path: Path
) -> None:
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    crds.install("v1", "v2", crd=crd_converting_at(url, webhook_ca, scene.cluster.run))
    start(controllers, scene, webhook_ca, tmp_path, {}, port=port)
    root = scene.root()
    healthy = scene.subnamespace(root, "healthy")
    taken = scene.namespace("taken")
    scene.subnamespace(root, "taken")
    scene.settle(root, healthy)
    scene.wait(lambda: stalled(scene, root, taken), "Stalled/Conflict")

    assert v1_status(scene, root, healthy) == "ok"
    assert v1_status(scene, root, taken) == "conflict"
