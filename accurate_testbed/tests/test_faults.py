"""Contract: the in-memory server's fault injection and request log (skipped on real clusters)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client as k8s_client

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.cluster import Cluster
from accurate_testbed.tests.helpers import error_of

pytestmark = pytest.mark.fault_injection


def test_injected_failures_answer_status_then_stop(cluster: Cluster, apiserver: ApiServer) -> None:
    core: Any = k8s_client.CoreV1Api(cluster.api_client)
    ns = cluster.namespace()
    apiserver.fail(503, path=r"/configmaps$", method="POST", times=2, message="try later")
    for _ in range(2):
        with pytest.raises(k8s_client.ApiException) as caught:
            core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
        status = error_of(caught.value)
        assert (caught.value.status, status["reason"], status["message"]) == (
            503,
            "ServiceUnavailable",
            "try later",
        )
    assert core.list_namespaced_config_map(ns).items == []  # failed requests changed nothing
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})


def test_injected_failure_matches_only_its_method(cluster: Cluster, apiserver: ApiServer) -> None:
    core: Any = k8s_client.CoreV1Api(cluster.api_client)
    ns = cluster.namespace()
    apiserver.fail(429, path="/configmaps", method="PATCH")
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    with pytest.raises(k8s_client.ApiException) as caught:
        core.patch_namespaced_config_map("a", ns, {"data": {"k": "v"}})
    assert caught.value.status == 429


def test_latency_is_added_to_matching_requests(cluster: Cluster, apiserver: ApiServer) -> None:
    core: Any = k8s_client.CoreV1Api(cluster.api_client)
    apiserver.delay(0.3, path="^/api/v1/namespaces$", method="GET")
    started = time.monotonic()
    core.list_namespace()
    assert time.monotonic() - started >= 0.3


def test_request_log_counts_writes(cluster: Cluster, apiserver: ApiServer) -> None:
    core: Any = k8s_client.CoreV1Api(cluster.api_client)
    ns = cluster.namespace()
    apiserver.clear_requests()
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    core.read_namespaced_config_map("a", ns)
    core.list_namespaced_config_map(ns, label_selector="a=b")
    verbs = [(request.verb, request.method) for request in apiserver.requests]
    assert verbs == [("create", "POST"), ("get", "GET"), ("list", "GET")]
    assert apiserver.requests[2].query == "labelSelector=a%3Db"
    assert apiserver.requests[0].user == "admin"


def test_impersonated_user_is_recorded(cluster: Cluster, apiserver: ApiServer) -> None:
    cluster.api_client.set_default_header("Impersonate-User", "alice")
    try:
        k8s_client.VersionApi(cluster.api_client).get_code()  # every user may read /version
    finally:
        cluster.api_client.default_headers.pop("Impersonate-User")
    assert (apiserver.requests[-1].path, apiserver.requests[-1].user) == ("/version", "alice")
