"""controller.metrics: the /metrics body as Prometheus reads it, parsed with prometheus_client's
own text parser."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.metrics import Metrics, WebhookMetrics


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition, keyed by name and sorted labels."""
    return parsed(metrics.exposition()[0])


def parsed(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


BULK = (("lane", "bulk"),)
LANE = (("lane", "subnamespaces"),)


def test_a_fresh_registry_exposes_the_unlabelled_series_and_both_lanes_at_zero() -> None:
    body, content_type = Metrics().exposition()
    assert content_type.startswith("text/plain; version=")
    found = samples(Metrics())
    for lane in (BULK, LANE):
        assert found[("accurate_reconcile_passes_total", lane)] == 0
        assert found[("accurate_reconcile_duration_seconds_count", lane)] == 0
    assert found[("accurate_leader", ())] == 0
    assert b"# HELP accurate_actions_total" in body


def test_every_observation_shows_up_under_its_name_and_labels() -> None:
    metrics = Metrics()
    metrics.observe_pass("bulk", 0.2)
    metrics.observe_pass("bulk", 3.0)
    metrics.observe_pass("subnamespaces", 0.004)
    metrics.count_action("CreateCopy", "ok")
    metrics.count_action("CreateCopy", "ok")
    metrics.count_action("DeleteCopy", "error")
    metrics.count_api_error(409)
    metrics.set_cache_size("ConfigMap", 12)
    metrics.set_cache_size("ConfigMap", 10)
    metrics.set_leader(True)
    found = samples(metrics)
    assert found[("accurate_reconcile_passes_total", BULK)] == 2
    assert found[("accurate_reconcile_passes_total", LANE)] == 1
    assert found[("accurate_reconcile_duration_seconds_sum", BULK)] == 3.2
    assert found[("accurate_reconcile_duration_seconds_bucket", (*BULK, ("le", "0.25")))] == 1
    assert found[("accurate_reconcile_duration_seconds_bucket", (*LANE, ("le", "0.01")))] == 1
    action = ("action", "CreateCopy")
    assert found[("accurate_actions_total", (action, ("result", "ok")))] == 2
    assert found[("accurate_actions_total", (("action", "DeleteCopy"), ("result", "error")))] == 1
    assert found[("accurate_api_errors_total", (("code", "409"),))] == 1
    assert found[("accurate_cache_objects", (("kind", "ConfigMap"),))] == 10
    assert found[("accurate_leader", ())] == 1
    metrics.set_leader(False)
    assert samples(metrics)[("accurate_leader", ())] == 0


def test_two_controllers_in_one_process_do_not_share_counts() -> None:
    first, second = Metrics(), Metrics()
    first.observe_pass("bulk", 1.0)
    assert samples(first)[("accurate_reconcile_passes_total", BULK)] == 1
    assert samples(second)[("accurate_reconcile_passes_total", BULK)] == 0
    assert not any(name.startswith("python_") for name, _ in samples(first))


def test_webhook_series_append_to_the_controllers_as_one_valid_exposition() -> None:
    """The webhook process's series join the controller's body on /metrics: the two together
    must still parse, each series once."""
    webhooks = WebhookMetrics()
    webhooks.observe("/validate-v1-namespace", True, 0.004)
    webhooks.observe("/validate-v1-namespace", False, 0.02)
    webhooks.observe("/validate-v1-namespace", True, 0.003)
    found = parsed(Metrics().exposition()[0] + webhooks.exposition())
    path = ("path", "/validate-v1-namespace")
    assert found[("accurate_webhook_requests_total", (("allowed", "true"), path))] == 2
    assert found[("accurate_webhook_requests_total", (("allowed", "false"), path))] == 1
    assert found[("accurate_webhook_duration_seconds_count", (path,))] == 3
    assert found[("accurate_webhook_duration_seconds_sum", (path,))] == pytest.approx(0.027)
    assert found[("accurate_reconcile_passes_total", BULK)] == 0


def hrq(namespace: str, name: str, hard: dict[str, str], used: dict[str, str] | None) -> dict:
    obj: dict = {"metadata": {"namespace": namespace, "name": name}, "spec": {"hard": hard}}
    if used is not None:
        obj["status"] = {"hard": hard, "used": used}
    return obj


def test_hrqs_are_exposed_as_kube_state_metrics_exposes_resource_quotas() -> None:
    """kube_resourcequota{namespace, resourcequota, resource, type="hard"|"used"}: the same
    shape, one sample per HRQ, resource and type, quantities as plain numbers."""
    hrqs = [
        hrq("team-a", "compute", {"requests.cpu": "1.5", "requests.memory": "2Gi"}, None),
        hrq("team-b", "pods", {"pods": "10"}, {"pods": "3"}),
    ]
    metrics = Metrics()
    metrics.track_hrqs(lambda: hrqs)
    found = {
        k: v for k, v in samples(metrics).items() if k[0] == "accurate_hierarchicalresourcequota"
    }

    def key(namespace: str, name: str, resource: str, kind: str) -> tuple:
        labels = {"namespace": namespace, "hierarchicalresourcequota": name}
        labels.update(resource=resource, type=kind)
        return ("accurate_hierarchicalresourcequota", tuple(sorted(labels.items())))

    assert found == {
        key("team-a", "compute", "requests.cpu", "hard"): 1.5,
        key("team-a", "compute", "requests.memory", "hard"): 2 * 2**30,
        key("team-b", "pods", "pods", "hard"): 10,
        key("team-b", "pods", "pods", "used"): 3,
    }
    hrqs[0] = hrq("team-a", "compute", {"requests.cpu": "1500m"}, {"requests.cpu": "250m"})
    del hrqs[1]
    found = {
        k: v for k, v in samples(metrics).items() if k[0] == "accurate_hierarchicalresourcequota"
    }
    assert found == {
        key("team-a", "compute", "requests.cpu", "hard"): 1.5,
        key("team-a", "compute", "requests.cpu", "used"): 0.25,
    }


def test_an_hrq_whose_spec_cannot_be_read_has_no_samples() -> None:
    metrics = Metrics()
    metrics.track_hrqs(lambda: [hrq("team-a", "bad", {"pods": "lots"}, {"pods": "1"})])
    assert not any(k[0] == "accurate_hierarchicalresourcequota" for k in samples(metrics))
    assert b"# TYPE accurate_hierarchicalresourcequota gauge" in metrics.exposition()[0]
