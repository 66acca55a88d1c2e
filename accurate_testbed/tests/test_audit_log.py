"""Contract: the in-memory server's audit log stamps a request when it arrives (skipped on real
clusters: their audit log is the operator's). As kube-apiserver's WithRequestReceivedTimestamp
filter, the outermost of its handler chain, the stamp is taken before any of the request's work,
so the time between two requests' stamps reads off the log as it does off a real server's."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from accurate_testbed.apiserver.audit import seconds_of
from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.cluster import real_kubeconfig
from accurate_testbed.kubectl import kubectl

pytestmark = pytest.mark.skipif(
    real_kubeconfig() is not None, reason="tests the in-memory server's own audit log"
)
WORK = 0.5


def test_a_request_is_stamped_as_it_arrives_before_its_work(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    server = ApiServer(audit_log=log).start()
    try:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        server.delay(WORK, path="^/api/v1/namespaces$", method="POST")
        sent = time.time()
        assert kubectl(kubeconfig, "create", "namespace", "slow").returncode == 0
    finally:
        server.stop()  # writes the log out
    (created,) = [
        event
        for event in map(json.loads, log.read_text().splitlines())
        if event["verb"] == "create"
    ]
    received = seconds_of(created["requestReceivedTimestamp"])
    completed = seconds_of(created["stageTimestamp"])
    assert sent <= received
    assert completed - received >= WORK
