"""The controller's /metrics for hierarchical quotas (issue 28, point 6): hard and used per HRQ
and resource, labelled as kube-state-metrics labels ``kube_resourcequota``, scraped from the
controller process while a tenant uses the quota."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from libaccurate import quota
from libaccurate.network.kube import resource_path
from tests.e2e.test_hierarchical_quotas import Team, created, hrq_crd, team

__all__ = ["hrq_crd", "team"]
NAME = "accurate_hierarchicalresourcequota"


def scraped(team: Team, namespace: str) -> dict[tuple[str, str, str], float]:
    """(HRQ name, resource, type) -> value of the samples about HRQs in ``namespace``."""
    status, text = team.controller.get(f"{team.controller.metrics}/metrics")
    assert status == 200, text
    return {
        (s.labels["hierarchicalresourcequota"], s.labels["resource"], s.labels["type"]): s.value
        for family in text_string_to_metric_families(text)
        if family.name == NAME
        for s in family.samples
        if s.labels["namespace"] == namespace
    }


def test_hard_and_used_of_each_hrq_are_scraped_and_go_with_the_hrq(team: Team) -> None:
    root, scene = team.root, team.scene
    team.hrq(root, "compute", pods="3", requests_cpu="1.5")
    child = team.sub(root, "child")
    team.counted((root, "compute"), root, child)
    created(team.pod(child, "one", cpu="250m"))
    team.wait_used(root, "compute", pods="1", requests_cpu="250m")

    wanted = {
        ("compute", "pods", "hard"): 3.0,
        ("compute", "requests.cpu", "hard"): 1.5,
        ("compute", "pods", "used"): 1.0,
        ("compute", "requests.cpu", "used"): 0.25,
    }
    scene.wait(lambda: scraped(team, root) == wanted, "the HRQ's samples on /metrics")
    path = resource_path(quota.GROUP, quota.VERSION, quota.PLURAL, root, "compute")
    scene.kube.delete(path)
    scene.wait(lambda: scraped(team, root) == {}, "the deleted HRQ's samples to go")
