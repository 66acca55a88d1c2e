"""The quota evaluators and the admission check as plain functions, for the rules a contract test
cannot reach on a real cluster (pod overhead needs a RuntimeClass, a pod past its deletion grace
period or a quota not yet counted cannot be made on demand). Read from
``pkg/quota/v1/evaluator/core/{pods,services,persistent_volume_claims}.go``,
``pkg/api/v1/resource/helpers.go`` and ``apiserver/pkg/admission/plugin/resourcequota``."""

from __future__ import annotations

from typing import Any

import pytest

from accurate_testbed.apiserver.api import Attempt, Caller
from accurate_testbed.apiserver.errors import ApiError
from accurate_testbed.apiserver.quota import check_request
from accurate_testbed.apiserver.quota_evaluators import (
    PersistentVolumeClaims,
    Pods,
    Services,
    evaluator_for,
    matches,
)
from accurate_testbed.apiserver.resources import BUILTINS
from libaccurate import quantity

PODS = Pods()


def shown(usage: quantity.ResourceList) -> dict[str, str]:
    return quantity.render_list(usage)


def container(name: str, requests: dict | None = None, limits: dict | None = None) -> dict:
    return {"name": name, "resources": {"requests": requests or {}, "limits": limits or {}}}


def test_overhead_adds_to_requests_and_to_the_limits_a_pod_has() -> None:
    """PodRequests adds spec.overhead; PodLimits adds it only to limits that are set."""
    pod = {
        "spec": {
            "containers": [container("a", {"cpu": "1", "memory": "1Gi"}, {"cpu": "2"})],
            "overhead": {"cpu": "250m", "memory": "120Mi"},
        }
    }

    usage = shown(PODS.usage(pod))

    assert (usage["requests.cpu"], usage["requests.memory"]) == ("1250m", "1144Mi")
    assert usage["limits.cpu"] == "2250m"
    assert "limits.memory" not in usage


def test_sidecars_add_up_and_plain_init_containers_peak() -> None:
    """A restartable init container runs beside the containers; each plain one runs alone,
    beside the sidecars started before it."""
    pod = {
        "spec": {
            "initContainers": [
                {**container("sidecar", {"cpu": "100m"}), "restartPolicy": "Always"},
                container("migrate", {"cpu": "2"}),
            ],
            "containers": [container("app", {"cpu": "1"})],
        }
    }

    assert shown(PODS.usage(pod))["requests.cpu"] == "2100m"


def test_a_pod_past_its_deletion_grace_period_uses_no_compute() -> None:
    pod = {
        "metadata": {"deletionTimestamp": "2020-01-01T00:00:00Z", "deletionGracePeriodSeconds": 30},
        "spec": {"containers": [container("a", {"cpu": "1"})]},
    }

    assert shown(PODS.usage(pod)) == {"count/pods": "1"}


@pytest.mark.parametrize(
    ("requirement", "priority", "expected"),
    [
        ({"operator": "In", "values": ["high"]}, "high", True),
        ({"operator": "In", "values": ["high"]}, "", False),
        ({"operator": "NotIn", "values": ["high"]}, "", True),
        ({"operator": "NotIn", "values": ["high"]}, "low", True),
        ({"operator": "NotIn", "values": ["high"]}, "high", False),
        ({"operator": "Exists"}, "low", True),
        ({"operator": "DoesNotExist"}, "low", False),
        ({"operator": "DoesNotExist"}, "", True),
    ],
)
def test_priority_class_scope_selectors(requirement: dict, priority: str, expected: bool) -> None:
    """podMatchesSelector: the pod's class as the label ``PriorityClass``, absent when unset."""
    pod = {"spec": {"priorityClassName": priority, "containers": []}}

    assert PODS.matches_scope({"scopeName": "PriorityClass", **requirement}, pod) is expected


def test_cross_namespace_pod_affinity_scope() -> None:
    term = {"topologyKey": "zone", "namespaceSelector": {}}
    pod = {
        "spec": {
            "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        }
    }

    assert PODS.matches_scope({"scopeName": "CrossNamespacePodAffinity"}, pod)
    assert not PODS.matches_scope({"scopeName": "CrossNamespacePodAffinity"}, {"spec": {}})


def test_a_quota_with_scopes_counts_no_other_kind() -> None:
    """MatchesNoScopeFunc for every evaluator but pods'."""
    quota = {"spec": {"scopes": ["NotTerminating"]}, "status": {"hard": {"services": "1"}}}

    assert not matches(Services(), quota, {"spec": {}})


def test_load_balancers_without_node_ports_count_only_the_ports_that_name_one() -> None:
    service = {
        "spec": {
            "type": "LoadBalancer",
            "allocateLoadBalancerNodePorts": False,
            "ports": [{"port": 80, "nodePort": 30080}, {"port": 81}],
        }
    }

    assert shown(Services().usage(service))["services.nodeports"] == "1"


def test_a_claim_is_charged_its_allocated_size_when_larger_in_whole_bytes() -> None:
    claim = {
        "spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "1.5"}}},
        "status": {"allocatedResources": {"storage": "1.5Gi"}},
    }
    usage = shown(PersistentVolumeClaims().usage(claim))

    assert usage["requests.storage"] == "1536Mi"
    assert usage["gold.storageclass.storage.k8s.io/persistentvolumeclaims"] == "1"
    small = {"spec": {"resources": {"requests": {"storage": "1500m"}}}}
    assert shown(PersistentVolumeClaims().usage(small))["requests.storage"] == "2"


def test_events_are_never_counted() -> None:
    assert evaluator_for("", "events") is None
    assert evaluator_for("events.k8s.io", "events") is None


def attempt(obj: dict[str, Any], operation: str = "CREATE") -> Attempt:
    resource = next(r for r in BUILTINS if r.plural == "pods")
    return Attempt(operation, resource, obj, None, Caller())


def test_a_quota_not_yet_counted_refuses_what_it_tracks() -> None:
    """hasUsageStats: ``status unknown for quota: <name>, resources: <names sorted>``."""
    quota = {
        "metadata": {"name": "q"},
        "status": {"hard": {"pods": "2", "count/pods": "2", "secrets": "1"}},
    }
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [container("a")]}}

    with pytest.raises(ApiError) as refused:
        check_request([quota], attempt(pod), PODS)

    assert refused.value.status["message"] == (
        'pods "p" is forbidden: status unknown for quota: q, resources: count/pods,pods'
    )


def test_a_request_is_charged_to_every_quota_that_tracks_it() -> None:
    quotas = [
        {"metadata": {"name": name}, "status": {"hard": hard, "used": dict.fromkeys(hard, "0")}}
        for name, hard in (
            ("a", {"pods": "2"}),
            ("b", {"requests.cpu": "1"}),
            ("c", {"secrets": "1"}),
        )
    ]
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [container("x", {"cpu": "300m"})]}}

    charged = check_request(quotas, attempt(pod), PODS)

    assert [q["status"]["used"] for q in charged] == [
        {"pods": "1"},
        {"requests.cpu": "300m"},
        {"secrets": "0"},
    ]
