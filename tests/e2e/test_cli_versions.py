"""The plugin against every SubNamespace CRD a released controller installs (issue 12): the Go
Accurate v0.x serves only v1, v1.x v2alpha1 and v2, today's controllers v2. Each variant is built
from our own CRD manifest. The plugin finds out through discovery which version to speak, and
``sub create``, ``list`` and ``ns describe`` work on each; a tenant's ``list`` and ``describe``
read SubNamespaces, so they run as a tenant (RoleBindings to ``admin``, as the controller would
have copied them). Without the CRD, the plugin says what is missing.

These tests install and remove the CRD itself, so on a real cluster that already has one they
are skipped rather than replace it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from accurate_testbed.cluster import RUN_LABEL, Cluster
from accurate_testbed.manifests import CRDS, subnamespace_crd_manifest
from accurate_testbed.waiting import wait_for
from kubectl_accurate.reads import TREE_NOTE
from kubectl_accurate.subnamespace_api import INSTALL_HINT
from libaccurate import subnamespaces
from libaccurate.constants import (
    CREATED_BY_VALUE,
    LABEL_CREATED_BY,
    LABEL_PARENT,
    SUBNAMESPACE_CRD_NAME,
)
from libaccurate.network.kube import resource_path
from tests.e2e.cli import World, failed, field, install_subnamespace_roles, succeeded
from tests.e2e.controller import Scene

RBAC = "rbac.authorization.k8s.io"
SERVED_BY_RELEASES = [("v1",), ("v2alpha1", "v2"), ("v2",)]
CRD_PATH = f"{CRDS}/{SUBNAMESPACE_CRD_NAME}"


def crd_serving(*served: str) -> dict[str, Any]:
    """Our CRD, serving only ``served`` and storing the best of them, with no conversion
    webhook (with one stored version, none is needed)."""
    crd = subnamespace_crd_manifest()
    storage = subnamespaces.preferred(served)
    versions = [v for v in crd["spec"]["versions"] if v["name"] in served]
    for version in versions:
        version.update(served=True, storage=version["name"] == storage)
    crd["spec"]["versions"] = versions
    crd["spec"]["conversion"] = {"strategy": "None"}
    return crd


class Crds:
    """Installs SubNamespace CRD variants for one test and removes the last one afterwards."""

    def __init__(self, world: World, scene: Scene) -> None:
        self.kube = world.kube
        self.exists = lambda path: scene.get(path) is not None
        found = scene.get(CRD_PATH)
        # One an earlier test of this run installed may go; the cluster's own may not.
        if found is not None and labels_of(found).get(RUN_LABEL) != world.cluster.run:
            pytest.skip("the cluster has its own SubNamespace CRD, which these tests would replace")
        world.cluster.on_cleanup(self.remove)

    def install(self, *served: str, crd: dict[str, Any] | None = None) -> None:
        """Install ``crd`` (by default ours serving only ``served``), which serves ``served``."""
        self.remove()
        self.kube.create(CRDS, crd or crd_serving(*served))
        listings = [subnamespaces.path(version=v) for v in served]
        wait_for(lambda: all(self.exists(p) for p in listings), 30, f"SubNamespaces {served}")

    def remove(self) -> None:
        if self.exists(CRD_PATH):
            self.kube.delete(CRD_PATH)
            wait_for(lambda: not self.exists(CRD_PATH), 120, "the CRD to go")


def labels_of(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("labels") or {})


@pytest.fixture
def world(cluster: Cluster) -> World:
    return World(cluster)


@pytest.fixture
def crds(world: World, scene: Scene) -> Iterator[Crds]:
    yield Crds(world, scene)


def _admin_in(world: World, user: str, namespace: str) -> None:
    body = {
        "metadata": {"name": "tenant-admin"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "admin"},
        "subjects": [{"apiGroup": RBAC, "kind": "User", "name": user}],
    }
    world.kube.create(resource_path(RBAC, "v1", "rolebindings", namespace), body)


def _made_by_the_controller(world: World, parent: str, name: str) -> None:
    """The namespace a controller would make for SubNamespace ``parent/name``, with the
    tenant's RoleBindings copied into it."""
    labels = world.cluster.own({LABEL_PARENT: parent, LABEL_CREATED_BY: CREATED_BY_VALUE})
    world.kube.create(
        resource_path("", "v1", "namespaces"), {"metadata": {"name": name, "labels": labels}}
    )
    for binding in world.kube.list_objects(resource_path(RBAC, "v1", "rolebindings", parent))[
        "items"
    ]:
        copy = {k: binding[k] for k in ("roleRef", "subjects")}
        copy["metadata"] = {"name": binding["metadata"]["name"]}
        world.kube.create(resource_path(RBAC, "v1", "rolebindings", name), copy)


@pytest.mark.parametrize("served", SERVED_BY_RELEASES, ids="+".join)
def test_the_plugin_speaks_the_version_the_cluster_serves(
    world: World, crds: Crds, served: tuple[str, ...]
) -> None:
    crds.install(*served)
    spoken = subnamespaces.preferred(served)
    assert spoken is not None
    user, root = world.cluster.unique("alice"), world.root("team")
    _admin_in(world, user, root)
    install_subnamespace_roles(world.cluster, world.kube)
    name = world.cluster.unique("dev")
    as_tenant = ("--as", user)
    unmarked = ("--no-markers", *as_tenant)
    create = ("sub", "create", name, root, "--labels", "env=dev", *as_tenant)
    wait_for(lambda: world.run(*create, "--dry-run").returncode == 0, 30, "the tenant's rights")
    assert succeeded(world.run(*create)) == (
        f"created SubNamespace {root}/{name}; the controller will create namespace {name}\n"
    )
    stored = world.kube.get(subnamespaces.path(root, name, spoken))
    assert stored["apiVersion"] == subnamespaces.api_version(spoken)
    assert stored["spec"]["labels"] == {"env": "dev"}
    _made_by_the_controller(world, root, name)
    drawn = f"{root}\n└── {name}\n"
    wait_for(lambda: world.run("list", root, *unmarked).stdout == drawn, 30, "the copied grant")
    listed = world.run("list", root, *unmarked)
    assert (listed.returncode, listed.stdout, listed.stderr) == (0, drawn, TREE_NOTE + "\n")
    described = world.run("ns", "describe", root, *as_tenant)
    assert described.returncode == 0, described.stderr
    assert field(described.stdout, "Children") == f"1 ({name})"
    assert field(succeeded(world.run("ns", "describe", name)), "Parent") == root


def test_a_version_the_cluster_stopped_serving_is_discovered_again(
    world: World, crds: Crds
) -> None:
    """The first command caches v2; the CRD is then replaced by one serving only v1."""
    crds.install("v2")
    root = world.root("team")
    first, second = world.cluster.unique("a"), world.cluster.unique("b")
    assert succeeded(world.run("sub", "create", first, root)).startswith("created")
    crds.install("v1")
    assert succeeded(world.run("sub", "create", second, root)).startswith("created")
    assert world.kube.get(subnamespaces.path(root, second, "v1"))["metadata"]["name"] == second


def test_without_the_crd_the_plugin_says_what_to_install(world: World, crds: Crds) -> None:
    root = world.root("team")
    assert failed(world.run("sub", "create", world.cluster.unique("dev"), root)) == (
        "error: this cluster has no SubNamespace API (the CRD "
        f"{SUBNAMESPACE_CRD_NAME} is not installed): {INSTALL_HINT}\n"
    )
