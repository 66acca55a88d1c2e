"""The plugin for a tenant limited by RBAC (ACCEPTANCE H6, H8): someone who may read namespaces
and some kinds in their own tree, and nothing of the controller's."""

from __future__ import annotations

from pathlib import Path

import pytest

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.cluster import Cluster
from libaccurate.constants import LABEL_PARENT
from libaccurate.kube import resource_path
from tests.e2e.cli import World, failed, field, resource_rows, run_plugin, succeeded

RBAC = "rbac.authorization.k8s.io"


def cluster_role(world: World, prefix: str, rules: list[dict[str, list[str]]]) -> str:
    name = world.cluster.unique(prefix)
    path = resource_path(RBAC, "v1", "clusterroles")
    world.kube.create(path, {"metadata": {"name": name}, "rules": rules})
    world.cluster.on_cleanup(lambda: world.kube.delete(f"{path}/{name}"))
    return name


def grant(
    world: World, user: str, role: str, namespace: str | None = None, kind: str = "User"
) -> None:
    """Bind a ClusterRole to a user (or group) in ``namespace``, or cluster-wide without one."""
    name = world.cluster.unique("tenant")
    body = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": kind, "name": user, "apiGroup": RBAC}],
    }
    if namespace:
        world.kube.create(resource_path(RBAC, "v1", "rolebindings", namespace), body)
        return
    path = resource_path(RBAC, "v1", "clusterrolebindings")
    world.kube.create(path, body)
    world.cluster.on_cleanup(lambda: world.kube.delete(f"{path}/{name}"))


@pytest.fixture
def tenancy(cluster: Cluster) -> dict[str, str]:
    """A tree whose tenant may read namespaces, Roles and ConfigMaps in it, but no Secrets and
    nothing of the controller's; a Role and a ConfigMap propagated into the child."""
    world = World(cluster)
    user = cluster.unique("alice")
    root = world.root()
    child = world.namespace("child", {LABEL_PARENT: root})
    world.role(root, "admin", mode="update")
    world.role(child, "admin", mode="update", source=root)
    configmap = {
        "metadata": {"name": "settings", "annotations": {"accurate.cybozu.com/propagate": "create"}}
    }
    world.kube.create(resource_path("", "v1", "configmaps", child), configmap)
    reader = cluster_role(world, "ns-reader", [_rule("", "namespaces", "get", "list")])
    grant(world, user, reader)
    tenant = cluster_role(
        world,
        "tenant",
        [_rule(RBAC, "roles", "get", "list"), _rule("", "configmaps", "get", "list")],
    )
    for namespace in (root, child):
        grant(world, user, tenant, namespace)
    return {"user": user, "root": root, "child": child}


def _rule(group: str, resource: str, *verbs: str) -> dict[str, list[str]]:
    return {"apiGroups": [group], "resources": [resource], "verbs": list(verbs)}


def test_describe_for_a_tenant_who_cannot_read_the_controllers_config(
    cluster: Cluster, tenancy: dict[str, str]
) -> None:
    world = World(cluster)
    user, child = tenancy["user"], tenancy["child"]
    output = succeeded(world.run("ns", "describe", child, "--as", user))
    assert field(output, "Parent") == tenancy["root"]
    assert field(output, "Watched kinds") == (
        "guessed: the usual kinds the server serves (cannot read Deployment "
        'accurate/accurate-controller-manager: deployments.apps "accurate-controller-manager" '
        f'is forbidden: User "{user}" cannot get resource "deployments" in API group "apps" in '
        'the namespace "accurate")'
    )
    assert resource_rows(output) == [
        ["ConfigMap", "settings", "-", "create"],
        ["Role", "admin", tenancy["root"], "update"],
    ]
    assert (
        f'Skipped: secrets: secrets is forbidden: User "{user}" cannot list resource "secrets" '
        f'in API group "" in the namespace "{child}"'
    ) in output.splitlines()


def test_as_and_as_group_work_after_any_subcommand(
    cluster: Cluster, tenancy: dict[str, str]
) -> None:
    world = World(cluster)
    root, stranger = tenancy["root"], cluster.unique("stranger")
    assert failed(world.run("list", root, "--as", stranger)) == (
        f'error: namespaces is forbidden: User "{stranger}" cannot list resource "namespaces" in '
        'API group "" at the cluster scope\n'
    )
    group = cluster.unique("readers")
    reader = cluster_role(world, "ns-reader", [_rule("", "namespaces", "list")])
    grant(world, group, reader, kind="Group")
    as_group = ("--as", stranger, "--as-group", "other", "--as-group", group)
    assert succeeded(world.run("sub", "list", root, *as_group)) == (
        f"{root}\n└── {tenancy['child']}\n"
    )
    assert succeeded(world.run("sub", *as_group, "list", root)) == (
        f"{root}\n└── {tenancy['child']}\n"
    )


def test_a_tenant_with_their_own_kubeconfig(
    cluster: Cluster,
    apiserver: ApiServer,
    tenancy: dict[str, str],
    tmp_path: Path,
    subnamespace_crd: None,
) -> None:
    """A limited user's own credentials, not impersonation: they may create SubNamespaces in
    their root, and a refusal elsewhere is the API server's, word for word."""
    world = World(cluster)
    user, root = tenancy["user"], tenancy["root"]
    apiserver.add_user(user)
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "tenant", user=user)
    creator = cluster_role(
        world, "sub-creator", [_rule("accurate.cybozu.com", "subnamespaces", "create")]
    )
    grant(world, user, creator, root)
    name = cluster.unique("dev")
    result = run_plugin("sub", "create", name, root, kubeconfig=kubeconfig)
    assert succeeded(result).startswith(f"created SubNamespace {root}/{name}")
    other = world.root("other")
    refused = run_plugin("sub", "create", name, other, kubeconfig=kubeconfig)
    assert failed(refused) == (
        f'error: subnamespaces.accurate.cybozu.com is forbidden: User "{user}" cannot create '
        f'resource "subnamespaces" in API group "accurate.cybozu.com" in the namespace "{other}"\n'
    )
