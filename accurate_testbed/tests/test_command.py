"""``python -m accurate_testbed.apiserver`` on its own, driven by the real kubectl (as the demo)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from accurate_testbed.cluster import real_kubeconfig
from accurate_testbed.kubectl import kubectl

pytestmark = pytest.mark.skipif(
    real_kubeconfig() is not None, reason="tests the in-memory server's own command"
)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path, str]]:
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [sys.executable, "-m", "accurate_testbed.apiserver", "--kubeconfig", str(kubeconfig)],
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
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "accurate_testbed.apiserver",
                "--kubeconfig",
                str(tmp_path / "kubeconfig"),
                "--port",
                str(port),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode != 0
    assert f"127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "kubeconfig").exists()
