"""Seeing hierarchical quotas (issue 28, point 5): ``kubectl accurate quota`` and the HRQ lines of
``ns describe``, run with the real kubectl as a tenant (``admin`` in their root, copied down,
and the aggregated HRQ view role) and as an administrator.

The controller runs with hierarchical quotas on (tests/e2e/test_hierarchical_quotas.py's
``team``), so the numbers shown are the statuses it writes.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from accurate_testbed.cluster import RUN_LABEL, Cluster
from accurate_testbed.waiting import wait_for
from libaccurate import quota
from libaccurate.constants import LABEL_PARENT, LABEL_TYPE
from libaccurate.network.kube import resource_path
from tests.e2e.cli import World, failed, field, install_subnamespace_roles, run_plugin, succeeded
from tests.e2e.test_hierarchical_quotas import CRDS, Team, created, hrq_crd, team
from tests.e2e.webhooks import connect

__all__ = ["hrq_crd", "team"]


def plugin(team: Team, *args: str, tenant: bool) -> subprocess.CompletedProcess[str]:
    who = ("--as", team.user) if tenant else ()
    return run_plugin(*args, *who, kubeconfig=team.scene.cluster.kubeconfig)


def rows(output: str) -> dict[str, list[str]]:
    """The table's rows by their first cell (tree guides and all), cells split on 3 spaces."""
    lines = [line for line in output.splitlines() if "   " in line]
    assert lines[0].split() == ["NAMESPACE", "QUOTA", "USED/HARD", "TIGHTEST"], output
    found = {}
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.split("   ") if cell.strip()]
        found[cells[0]] = cells[1:]
    return found


def two_levels(team: Team) -> tuple[str, str, str]:
    """root (HRQ compute: pods 3, requests.cpu 1) -> a (HRQ small: pods 5, looser) and b;
    a pod of 200m in a and one of 300m in b."""
    root = team.root
    team.hrq(root, "compute", pods="3", requests_cpu="1")
    a, b = team.sub(root, "a"), team.sub(root, "b")
    team.hrq(a, "small", pods="5")
    team.counted((root, "compute"), root, a, b)
    team.counted((a, "small"), a)
    created(team.pod(a, "one", cpu="200m"))
    created(team.pod(b, "two", cpu="300m"))
    team.wait_used(root, "compute", pods="2", requests_cpu="500m")
    team.wait_used(a, "small", pods="1")
    return root, a, b


def test_the_tree_shows_used_hard_and_the_tightest_limit_to_tenant_and_administrator(
    team: Team,
) -> None:
    root, a, b = two_levels(team)
    tenant = plugin(team, "quota", root, tenant=True)
    assert tenant.returncode == 0, tenant.stderr
    assert "you may not list namespaces" in tenant.stderr
    admin = succeeded(plugin(team, "quota", root, tenant=False))
    assert tenant.stdout == admin
    (b_row,) = [row for name, row in rows(admin).items() if name.endswith(b)]
    assert rows(admin)[root] == [
        f"{root}/compute",
        "pods: 2/3, requests.cpu: 500m/1",
        f"pods: 1 left ({root}/compute), requests.cpu: 500m left ({root}/compute)",
    ]
    assert rows(admin)[f"├── {a}"] == [
        f"{a}/small",
        "pods: 1/5",
        f"pods: 1 left ({root}/compute), requests.cpu: 500m left ({root}/compute)",
    ]
    assert b_row == [
        "-",
        f"pods: 1 left ({root}/compute), requests.cpu: 500m left ({root}/compute)",
    ]
    assert f"{a}/small: a tighter quota applies: {root}/compute allows pods=3" in admin

    data = json.loads(succeeded(plugin(team, "quota", root, "-o", "json", tenant=False)))
    (top,) = data
    assert top["above"] == []
    assert top["quotas"] == [
        {
            "namespace": root,
            "name": "compute",
            "hard": {"pods": "3", "requests.cpu": "1"},
            "used": {"pods": "2", "requests.cpu": "500m"},
        }
    ]
    child = next(c for c in top["children"] if c["name"] == a)
    assert child["tightest"]["pods"] == {
        "quota": f"{root}/compute",
        "hard": "3",
        "used": "2",
        "left": "1",
    }
    as_tenant = json.loads(plugin(team, "quota", root, "-o", "json", tenant=True).stdout)
    assert as_tenant == data


def test_ns_describe_lists_the_hrqs_that_apply_with_the_trees_numbers(team: Team) -> None:
    root, a, _ = two_levels(team)
    for tenant in (True, False):
        result = plugin(team, "ns", "describe", a, tenant=tenant)
        assert result.returncode == 0, result.stderr
        text = result.stdout
        assert field(text, "Hierarchical quotas") == "used/hard of each one's whole subtree"
        lines = text.split("Hierarchical quotas:", 1)[1].splitlines()
        assert lines[1].split() == ["QUOTA", "USED/HARD"]
        assert lines[2].split(None, 1) == [f"{a}/small", "pods: 1/5"]
        assert lines[3].split(None, 1) == [f"{root}/compute", "pods: 2/3, requests.cpu: 500m/1"]
        assert lines[4].strip() == (
            f"Tightest: pods: 1 left ({root}/compute), requests.cpu: 500m left ({root}/compute)"
        )
    data = json.loads(succeeded(plugin(team, "ns", "describe", a, "-o", "json", tenant=False)))
    quotas = data["hierarchicalQuotas"]
    assert [(q["namespace"], q["used"]) for q in quotas["quotas"]] == [
        (a, {"pods": "1"}),
        (root, {"pods": "2", "requests.cpu": "500m"}),
    ]
    assert quotas["tightest"]["requests.cpu"]["left"] == "500m"


def test_an_hrq_above_the_tenants_tree_is_named_without_its_numbers(team: Team) -> None:
    scene, root = team.scene, team.root
    org = scene.root("org")
    scene.kubectl("label", "namespace", root, f"{LABEL_PARENT}={org}", f"{LABEL_TYPE}-")
    team.hrq(org, "budget", pods="10")
    team.hrq(root, "compute", pods="4")
    for hrq in ((org, "budget"), (root, "compute")):
        team.counted(hrq, root)
    created(team.pod(root, "one"))
    team.wait_used(org, "budget", pods="1")
    team.wait_used(root, "compute", pods="1")

    tenant = plugin(team, "quota", "-n", root, tenant=True)
    assert tenant.returncode == 0, tenant.stderr
    assert f"above {root}: {org}/budget  (you may not read it)" in tenant.stdout
    assert rows(tenant.stdout)[root] == [
        f"{root}/compute",
        "pods: 1/4",
        f"pods: 3 left ({root}/compute), and {org}/budget, which you may not read",
    ]
    admin = succeeded(plugin(team, "quota", root, tenant=False))
    assert f"above {root}: {org}/budget  pods: 1/10" in admin
    described = plugin(team, "ns", "describe", root, "-o", "json", tenant=True)
    quotas = json.loads(described.stdout)["hierarchicalQuotas"]
    assert quotas["notReadable"] == [f"{org}/budget"]
    assert {"namespace": org, "name": "budget", "readable": False} in quotas["quotas"]


def test_an_administrator_sees_every_tree_an_hrq_limits_and_no_other(team: Team) -> None:
    root = team.root
    team.hrq(root, "compute", pods="3")
    team.counted((root, "compute"), root)
    other = team.scene.root("unlimited")
    shown = rows(succeeded(plugin(team, "quota", tenant=False)))
    assert root in shown
    assert other not in shown


@pytest.fixture
def no_hrq_crd(cluster: Cluster) -> None:
    """A cluster without the HRQ CRD. On a real cluster, the CRD an earlier test of a run
    installed is removed at its clean-up, and kube-apiserver takes a while to delete a CRD's
    objects before the CRD itself: wait for that. One its administrator installed stays, so
    there this test cannot be run."""
    kube = connect(cluster)

    def absent() -> bool:
        found = kube.find(f"{CRDS}/{quota.CRD_NAME}")
        if found is not None and RUN_LABEL not in (found["metadata"].get("labels") or {}):
            pytest.skip("hierarchical quotas are installed on this cluster by its administrator")
        return found is None

    wait_for(absent, 120.0, "the HRQ CRD an earlier test installed to be deleted")


def test_without_the_crd_quota_says_so_and_describe_shows_nothing_more(
    cluster: Cluster, subnamespace_crd: None, no_hrq_crd: None
) -> None:
    """On a cluster that never installed HRQs: an administrator's LIST gets 404; a tenant's
    is refused (403) and the API group's discovery document says it is not there."""
    world = World(cluster)
    install_subnamespace_roles(cluster, world.kube)
    root = world.root("plain")
    user = cluster.unique("bob")
    rbac = "rbac.authorization.k8s.io"
    binding = {
        "apiVersion": f"{rbac}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "tenant-admin"},
        "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "admin"},
        "subjects": [{"apiGroup": rbac, "kind": "User", "name": user}],
    }
    world.kube.create(resource_path(rbac, "v1", "rolebindings", root), binding)
    for who in ((), ("--as", user)):
        error = failed(world.run("quota", root, *who))
        assert error.endswith(
            "error: hierarchical quotas are not installed on this cluster (no CRD "
            "hierarchicalresourcequotas.quota.accurate.cybozu.com); an administrator installs "
            "them with controller/config/quota or the chart's quota.enabled\n"
        ), error
        described = world.run("ns", "describe", root, *who)
        assert described.returncode == 0, described.stderr
        assert "quota" not in described.stdout.lower()
        data = world.run("ns", "describe", root, "-o", "json", *who)
        assert "hierarchicalQuotas" not in json.loads(data.stdout)
