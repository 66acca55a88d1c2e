"""accurate-controller serves its own admission webhooks, on every replica (issue 6): the
cluster's webhook configurations point at a controller process that is not the leader. It
serves them from a child process of its own (issue 20), which nothing the controller's process
does can stall, which never outlives it, and whose death stops the controller."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest
import trustme

from accurate_testbed.certificates import write_serving_pair
from accurate_testbed.kubectl import kubectl
from accurate_testbed.objects import namespace_manifest
from accurate_testbed.processes import Process, free_port
from accurate_testbed.waiting import wait_for
from libaccurate.constants import GROUP, LABEL_PARENT
from tests.e2e.controller import Controllers, Scene
from tests.e2e.webhooks import register_webhooks

SECRETS = "watches:\n- version: v1\n  kind: Secret\n"
# How long the controller may take to notice that its webhook process died, and to exit.
NOTICE_TIMEOUT = 30.0


def test_a_replica_that_is_not_leading_answers_admission(
    controllers: Controllers, scene: Scene, webhook_ca: trustme.CA, tmp_path: Path
) -> None:
    lease = scene.namespace("lease")
    leader = controllers.start(SECRETS, lease_namespace=lease)
    scene.wait(lambda: leader.metric("accurate_leader") == 1, "the first replica to lead")
    cert_dir = tmp_path / "serving-certs"
    write_serving_pair(webhook_ca, cert_dir)
    port = free_port()
    follower: Process = controllers.start(
        SECRETS,
        "--webhook-addr",
        f"127.0.0.1:{port}",
        "--cert-dir",
        str(cert_dir),
        lease_namespace=lease,
    )
    assert follower.metric("accurate_leader") == 0
    register_webhooks(scene.cluster, f"https://127.0.0.1:{port}", webhook_ca)

    plain = scene.namespace("plain")
    manifest = {
        "apiVersion": f"{GROUP}/v2",
        "kind": "SubNamespace",
        "metadata": {"name": scene.name("refused"), "namespace": plain},
    }
    refused = kubectl(scene.cluster.kubeconfig, "apply", "-f", "-", stdin=manifest)
    assert refused.returncode == 1
    assert 'admission webhook "vsubnamespace.accurate.cybozu.com" denied the request' in (
        refused.stderr
    )
    assert plain in refused.stderr

    root = scene.root()
    child = scene.subnamespace(root, "child")
    scene.settle(root, child)
    assert follower.metric("accurate_webhook_requests_total") >= 2
    assert follower.metric("accurate_leader") == 0


def serving_webhooks(
    controllers: Controllers, webhook_ca: trustme.CA, tmp_path: Path
) -> tuple[Process, int]:
    """A ready controller serving its webhooks on a free local port, and that port."""
    cert_dir = tmp_path / "serving-certs"
    write_serving_pair(webhook_ca, cert_dir)
    port = free_port()
    running = controllers.start(
        SECRETS, "--webhook-addr", f"127.0.0.1:{port}", "--cert-dir", str(cert_dir)
    )
    return running, port


def webhook_pid(running: Process) -> int:
    """The webhook process's id, as the controller logs it when the process serves."""
    for record in running.records():
        if record.get("msg") == "webhook process started":
            return int(record["pid"])
    raise AssertionError(f"the controller logged no webhook process:\n{running.output()}")


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie waiting for its reaper has ended too)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_admission_is_answered_while_the_controller_process_is_frozen(
    controllers: Controllers, scene: Scene, webhook_ca: trustme.CA, tmp_path: Path
) -> None:
    """A reconcile pass holding the controller's interpreter cannot delay a review: here the
    controller's process is stopped outright (SIGSTOP) while a user creates namespaces, and the
    webhook still admits the good one and refuses the bad one."""
    running, port = serving_webhooks(controllers, webhook_ca, tmp_path)
    register_webhooks(scene.cluster, f"https://127.0.0.1:{port}", webhook_ca)
    root = scene.root()
    selfish = scene.name("selfish")
    os.kill(running.process.pid, signal.SIGSTOP)
    try:
        child = scene.namespace("child", {LABEL_PARENT: root})
        labels = scene.cluster.own({LABEL_PARENT: selfish})
        refused = kubectl(
            scene.cluster.kubeconfig, "apply", "-f", "-", stdin=namespace_manifest(selfish, labels)
        )
    finally:
        os.kill(running.process.pid, signal.SIGCONT)
    assert scene.labels(child)[LABEL_PARENT] == root
    assert refused.returncode == 1
    assert 'admission webhook "vnamespace.accurate.cybozu.com" denied the request' in (
        refused.stderr
    )
    assert scene.ns(selfish) is None


def test_a_dead_webhook_process_stops_the_controller(
    controllers: Controllers, webhook_ca: trustme.CA, tmp_path: Path
) -> None:
    """A controller whose webhooks are gone would refuse every reviewed write while looking
    healthy; it exits with status 1 instead, naming why, and Kubernetes restarts it."""
    running, _ = serving_webhooks(controllers, webhook_ca, tmp_path)
    os.kill(webhook_pid(running), signal.SIGKILL)
    wait_for(lambda: running.process.poll() is not None, NOTICE_TIMEOUT, "the controller to exit")
    assert running.process.returncode == 1
    assert "the webhook process was killed by signal 9" in running.output()


@pytest.mark.parametrize("ending", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_the_webhook_process_never_outlives_the_controller(
    controllers: Controllers, webhook_ca: trustme.CA, tmp_path: Path, ending: signal.Signals
) -> None:
    """Stopped in order or killed outright, the controller leaves no webhook process behind
    to hold the port."""
    running, port = serving_webhooks(controllers, webhook_ca, tmp_path)
    pid = webhook_pid(running)
    assert not gone(pid)
    running.stop(ending)
    wait_for(lambda: gone(pid), NOTICE_TIMEOUT, "the webhook process to end")
    with socket.socket() as again:
        again.bind(("127.0.0.1", port))


def test_a_webhook_address_in_use_stops_the_start(
    controllers: Controllers, webhook_ca: trustme.CA, tmp_path: Path
) -> None:
    write_serving_pair(webhook_ca, tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = f"127.0.0.1:{taken.getsockname()[1]}"
        result = controllers.run(
            SECRETS, "--no-leader-election", "--webhook-addr", busy, "--cert-dir", str(tmp_path)
        )
    assert result.returncode == 1, result.stderr
    assert f"cannot serve webhooks on {busy}: Address already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_serving_certificate_stops_the_start(
    controllers: Controllers, tmp_path: Path
) -> None:
    result = controllers.run(
        SECRETS,
        "--no-leader-election",
        "--webhook-addr",
        "127.0.0.1:0",
        "--cert-dir",
        str(tmp_path),
    )
    assert result.returncode == 1, result.stderr
    assert f"cannot load the webhook serving certificate {tmp_path}/tls.crt" in result.stderr
    assert "Traceback" not in result.stderr
