"""``python -m accurate_testbed.apiserver`` on its own, driven by the real kubectl (as the demo)."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from accurate_testbed.apiserver.audit import seconds_of
from accurate_testbed.cluster import real_kubeconfig
from accurate_testbed.kubectl import kubectl
from accurate_testbed.waiting import wait_for

pytestmark = pytest.mark.skipif(
    real_kubeconfig() is not None, reason="tests the in-memory server's own command"
)
REPO = Path(__file__).resolve().parents[2]


def _command(tmp_path: Path, *arguments: str) -> list[str]:
    """The command, writing its kubeconfig into ``tmp_path``."""
    kubeconfig = str(tmp_path / "kubeconfig")
    return [
        sys.executable,
        "-m",
        "accurate_testbed.apiserver",
        "--kubeconfig",
        kubeconfig,
        *arguments,
    ]


@contextmanager
def _serve(tmp_path: Path, *arguments: str) -> Iterator[tuple[subprocess.Popen[str], Path, str]]:
    """The command with ``arguments``, once it printed its URL; killed at the end if need be."""
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        _command(tmp_path, *arguments),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        yield process, kubeconfig, url
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path, str]]:
    with _serve(tmp_path) as serving:
        yield serving


def test_the_command_prints_its_url_and_writes_a_kubeconfig_kubectl_uses(
    served: tuple[subprocess.Popen[str], Path, str],
) -> None:
    _, kubeconfig, url = served
    assert url.startswith("https://127.0.0.1:")
    assert (
        kubectl(
            kubeconfig, "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}"
        ).stdout
        == url
    )

    created = kubectl(kubeconfig, "create", "namespace", "demo")
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "namespace/demo created"

    listed = kubectl(kubeconfig, "get", "namespaces", "-o", "name")
    assert "namespace/demo" in listed.stdout.split()
    assert "namespace/default" in listed.stdout.split()


def test_the_command_stops_cleanly_on_sigterm(
    served: tuple[subprocess.Popen[str], Path, str],
) -> None:
    process, _, _ = served
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0


def test_a_busy_port_is_an_error_that_names_it(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refusal = _refused(tmp_path, "--port", str(port))
    assert f"127.0.0.1:{port}" in refusal


# What kube-apiserver writes with --audit-log-path at level Metadata, read from
# k8s.io/apiserver: pkg/apis/audit/v1/types.go (Event: its fields, in the order Go's encoder
# writes them, omitempty ones left out when empty; ObjectReference; MicroTime timestamps),
# pkg/audit/request.go (LogRequestMetadata: verb, objectRef from RequestInfo, where a namespace
# is "in" itself; LogRequestObject: a create's name from the object sent, at Metadata level
# too), pkg/audit/context.go (LogResponseObject: a failure's Status fields at Metadata level)
# and plugin/pkg/audit/log/backend.go (one JSON object a line).
EVENT_FIELDS = [
    "kind",
    "apiVersion",
    "level",
    "auditID",
    "stage",
    "requestURI",
    "verb",
    "user",
    "sourceIPs",
    "userAgent",
    "objectRef",
    "responseStatus",
    "requestReceivedTimestamp",
    "stageTimestamp",
]
MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def test_the_audit_log_has_an_event_per_request_as_kube_apiserver_writes_it(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.log"
    with _serve(tmp_path, "--audit-log-path", str(log)) as (_, kubeconfig, _):
        before = time.time()
        assert kubectl(kubeconfig, "create", "namespace", "audited").returncode == 0
        assert kubectl(kubeconfig, "delete", "namespace", "audited", "--wait=false").returncode == 0
        assert "NotFound" in kubectl(kubeconfig, "get", "namespace", "missing").stderr
        after = time.time()
        # Written out while the server runs (within a second), as the benchmark reads it.
        events = wait_for(lambda: _namespace_events(log), 10, "the three events in the log")

    created, deleted, missing = events["create"], events["delete"], events["get"]
    for event in (created, deleted, missing):
        assert list(event) == EVENT_FIELDS
        assert (event["kind"], event["apiVersion"]) == ("Event", "audit.k8s.io/v1")
        assert (event["level"], event["stage"]) == ("Metadata", "ResponseComplete")
        assert event["user"] == {
            "username": "admin",
            "groups": ["system:masters", "system:authenticated"],
        }
        assert event["sourceIPs"] == ["127.0.0.1"]
        assert event["userAgent"].startswith("kubectl/")
        assert MICRO_TIME.fullmatch(event["requestReceivedTimestamp"])
        assert MICRO_TIME.fullmatch(event["stageTimestamp"])
    assert len({event["auditID"] for event in (created, deleted, missing)}) == 3
    assert created["requestURI"].split("?")[0] == "/api/v1/namespaces"
    assert created["objectRef"] == {"resource": "namespaces", "name": "audited", "apiVersion": "v1"}
    assert created["responseStatus"] == {"metadata": {}, "code": 201}
    assert deleted["requestURI"].split("?")[0] == "/api/v1/namespaces/audited"
    assert deleted["objectRef"] == {
        "resource": "namespaces",
        "namespace": "audited",
        "name": "audited",
        "apiVersion": "v1",
    }
    assert deleted["responseStatus"] == {"metadata": {}, "code": 200}
    assert missing["responseStatus"] == {
        "metadata": {},
        "status": "Failure",
        "message": 'namespaces "missing" not found',
        "reason": "NotFound",
        "details": {"name": "missing", "kind": "namespaces"},
        "code": 404,
    }
    stamps = [
        seconds_of(event[field])
        for event in (created, deleted, missing)
        for field in ("requestReceivedTimestamp", "stageTimestamp")
    ]
    assert before <= stamps[0] and stamps == sorted(stamps) and stamps[-1] <= after


def test_an_audit_log_that_cannot_be_written_is_an_error_that_names_it(tmp_path: Path) -> None:
    unwritable = tmp_path / "no such folder" / "audit.log"
    refusal = _refused(tmp_path, "--audit-log-path", str(unwritable))
    assert f"cannot write the audit log {unwritable}" in refusal


def _refused(tmp_path: Path, *arguments: str) -> str:
    """What the command says on stderr when it refuses to start with ``arguments``: an exit
    code, no traceback and no kubeconfig besides."""
    result = subprocess.run(
        _command(tmp_path, *arguments), cwd=REPO, capture_output=True, text=True, timeout=30
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "kubeconfig").exists()
    return result.stderr


def _namespace_events(log: Path) -> dict[str, dict[str, Any]] | None:
    """The events of the test's namespace requests by verb, once all three are written."""
    found = {}
    for line in log.read_text().splitlines():
        event = json.loads(line)
        if (event.get("objectRef") or {}).get("name") in ("audited", "missing"):
            found[event["verb"]] = event
    return found if len(found) == 3 else None
