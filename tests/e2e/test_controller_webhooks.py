"""accurate-controller serves its own admission webhooks, on every replica (issue 6): the
cluster's webhook configurations point at a controller process that is not the leader."""

from __future__ import annotations

from pathlib import Path

import trustme

from accurate_testbed.certificates import write_serving_pair
from accurate_testbed.kubectl import kubectl
from accurate_testbed.processes import Process, free_port
from libaccurate.constants import GROUP
from tests.e2e.controller import Controllers, Scene
from tests.e2e.webhooks import register_webhooks

SECRETS = "watches:\n- version: v1\n  kind: Secret\n"


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
