"""The end-to-end suite leaves a real cluster as it found it, also when stopped part way (issue 17).

Each test here runs a few of the suite's own tests as a child pytest, the way a developer does
against a real cluster (ACCURATE_TEST_KUBECONFIG), pointed at an in-memory API server of its own
running as a process, and stops that run the way a developer does: Ctrl-C (SIGINT to the whole
process group, controllers included) or a kill. Then it reads what is left on the server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from accurate_testbed.cluster import REAL_KUBECONFIG_ENV, RUN_LABEL
from accurate_testbed.kubectl import kubectl
from accurate_testbed.leftovers import NAMESPACES, WEBHOOK_CONFIGURATIONS
from accurate_testbed.waiting import wait_for
from libaccurate.constants import LABEL_TYPE, TYPE_ROOT
from libaccurate.network.kube import ConnectionOptions, Kube

REPO = Path(__file__).resolve().parents[2]
INITIAL_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease"}
# Controllers, webhook servers and namespaces: what stopping a run may leave behind.
BUSY = [
    "tests/e2e/test_controller_webhooks.py",
    "tests/e2e/test_webhook_subnamespaces.py::test_a_subnamespace_whose_namespace_has_children_cannot_be_deleted",
]
QUICK = ["tests/e2e/test_webhook_namespaces.py::test_self_references_are_denied"]
RUN_TIMEOUT = 300.0
GONE_TIMEOUT = 60.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Path]:
    """An in-memory API server as a process of its own; its kubeconfig."""
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [sys.executable, "-m", "accurate_testbed.apiserver", "--kubeconfig", str(kubeconfig)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("https://")
        yield kubeconfig
    finally:
        process.terminate()
        process.wait(timeout=30)


def start_run(kubeconfig: Path, tests: list[str], log: Path) -> subprocess.Popen[bytes]:
    """``pytest TESTS`` against the server, in a process group of its own as a shell job is."""
    env = {**os.environ, REAL_KUBECONFIG_ENV: str(kubeconfig)}
    with log.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *tests],
            cwd=REPO,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def finish(run: subprocess.Popen[bytes], log: Path) -> int:
    try:
        return run.wait(RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        raise AssertionError(f"the run did not end:\n{log.read_text()}") from None


def webhook_configurations(kube: Kube) -> list[str]:
    return [
        item["metadata"]["name"]
        for collection in WEBHOOK_CONFIGURATIONS
        for item in kube.list_objects(collection).get("items") or []
    ]


def namespaces(kube: Kube) -> dict[str, dict[str, str]]:
    """The namespaces but the server's own, with their labels."""
    items = kube.list_objects(NAMESPACES).get("items") or []
    return {
        item["metadata"]["name"]: item["metadata"].get("labels") or {}
        for item in items
        if item["metadata"]["name"] not in INITIAL_NAMESPACES
    }


def busy(kube: Kube) -> bool:
    """The run has webhooks registered and namespaces of its own, a controller made one too."""
    made = namespaces(kube)
    return len(webhook_configurations(kube)) >= 2 and len(made) >= 3


def wait_until_busy(kube: Kube, run: subprocess.Popen[bytes], log: Path) -> None:
    def ready() -> bool:
        if run.poll() is not None:
            raise AssertionError(f"the run ended before it was stopped:\n{log.read_text()}")
        return busy(kube)

    wait_for(ready, RUN_TIMEOUT, "the run to register webhooks and make namespaces")


def wait_until_clean(kube: Kube) -> None:
    wait_for(lambda: not namespaces(kube), GONE_TIMEOUT, "the run's namespaces to go")


def test_ctrl_c_part_way_leaves_no_webhook_configuration_and_no_namespace(
    server: Path, tmp_path: Path
) -> None:
    kube = Kube.connect(ConnectionOptions(kubeconfig=str(server)))
    log = tmp_path / "run.log"
    run = start_run(server, BUSY, log)
    wait_until_busy(kube, run, log)

    os.killpg(run.pid, signal.SIGINT)

    assert finish(run, log) == pytest.ExitCode.INTERRUPTED, log.read_text()
    assert webhook_configurations(kube) == []
    left = kube.list_objects(NAMESPACES, labelSelector=RUN_LABEL).get("items") or []
    assert all(item["metadata"].get("deletionTimestamp") for item in left)
    wait_until_clean(kube)


def test_a_new_run_removes_what_a_killed_run_left(server: Path, tmp_path: Path) -> None:
    kube = Kube.connect(ConnectionOptions(kubeconfig=str(server)))
    killed_log = tmp_path / "killed.log"
    killed = start_run(server, BUSY, killed_log)
    wait_until_busy(kube, killed, killed_log)

    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    left = webhook_configurations(kube)
    assert left
    # Its webhooks fail every call now, but see only its own namespaces: others are untouched.
    bystander = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "bystander", "labels": {LABEL_TYPE: TYPE_ROOT}},
    }
    created = kubectl(server, "create", "-f", "-", stdin=bystander)
    assert created.returncode == 0, created.stderr
    assert kubectl(server, "delete", "namespace", "bystander").returncode == 0

    log = tmp_path / "next.log"
    assert finish(start_run(server, QUICK, log), log) == pytest.ExitCode.OK, log.read_text()
    assert webhook_configurations(kube) == []
    wait_until_clean(kube)
