"""The demo that README.md's "Try it" runs (``python -m demo``; ``scripts/demo`` adds the
virtualenv): the tour runs to its end with the results a newcomer should see, and whatever way
it ends, nothing it started keeps running.

The demo starts its own in-memory API server, so these tests need no cluster and pass the same
with ACCURATE_TEST_KUBECONFIG set.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from accurate_testbed.waiting import wait_for

REPOSITORY = Path(__file__).resolve().parents[2]
DEMO = [sys.executable, "-m", "demo"]
TOUR_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0
LISTS = "$ kubectl accurate list\n"
BINDINGS = "$ kubectl get rolebindings --all-namespaces\n"

pytestmark = pytest.mark.slow


def block_after(text: str, command: str, start: int = 0) -> str:
    """The output shown after the first ``command`` line from ``start`` on, up to the blank
    line that ends it."""
    begin = text.index(command, start) + len(command)
    return text[begin : text.index("\n\n", begin)]


def test_the_tour_shows_trees_propagation_and_removal() -> None:
    result = subprocess.run(
        DEMO, cwd=REPOSITORY, capture_output=True, text=True, timeout=TOUR_TIMEOUT, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert block_after(out, LISTS) == (
        "team-a [r]\n├── team-a-batch [s]\n└── team-a-web [s]\n    └── team-a-web-staging [s]"
    )
    propagated = block_after(out, BINDINGS).splitlines()
    assert [line.split()[:2] for line in propagated] == [
        ["NAMESPACE", "NAME"],
        ["team-a", "team-a-admin"],
        ["team-a-batch", "team-a-admin"],
        ["team-a-web", "team-a-admin"],
        ["team-a-web-staging", "team-a-admin"],
    ]
    moved = block_after(out, "$ kubectl get rolebindings -n team-a-batch\n").splitlines()
    assert [line.split()[0] for line in moved] == ["NAME", "team-b-admin"]
    cut = out.index("$ kubectl accurate sub cut team-a-web\n")
    assert block_after(out, LISTS, cut) == (
        "team-a [r]\nteam-a-web [r]\n└── team-a-web-staging [s]\nteam-b [r]\n└── team-a-batch [s]"
    )
    remaining = block_after(out, BINDINGS, cut).splitlines()
    assert [line.split()[:2] for line in remaining] == [
        ["NAMESPACE", "NAME"],
        ["team-a", "team-a-admin"],
        ["team-a-batch", "team-b-admin"],
        ["team-b", "team-b-admin"],
    ]
    assert out.rstrip().endswith("That was the tour. See README.md and docs/ for more.")


def assert_stopped(out: str) -> None:
    """Nothing listens any more on the ports the demo's output names: the API server, the
    controller's webhooks and its probes."""
    assert "Stopping everything the demo started." in out
    ports = [int(port) for port in re.findall(r"127\.0\.0\.1:(\d+)", out)]
    assert len(ports) >= 3, out
    for port in ports:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_a_failing_step_stops_the_demo_naming_the_command(tmp_path: Path) -> None:
    """A kubectl that refuses ``sub cut`` (first on PATH) stands in for any step that fails."""
    fake = tmp_path / "kubectl"
    fake.write_text(
        '#!/bin/sh\ncase "$*" in *"sub cut"*) echo "error: no" >&2; exit 3;; esac\n'
        f'exec {shutil.which("kubectl")} "$@"\n'
    )
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        DEMO,
        cwd=REPOSITORY,
        env=env,
        capture_output=True,
        text=True,
        timeout=TOUR_TIMEOUT,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "$ kubectl accurate sub cut team-a-web\nerror: no\n" in result.stdout
    assert "--- the last lines of controller.log ---" in result.stdout
    assert result.stderr.strip() == (
        "The demo failed: kubectl accurate sub cut team-a-web failed with exit code 3"
    )
    assert_stopped(result.stdout)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stopped_demo_stops_the_server_and_controller_it_started(
    sig: signal.Signals, code: int, tmp_path: Path
) -> None:
    log = tmp_path / "demo.out"
    with log.open("w") as sink:
        demo = subprocess.Popen(DEMO, cwd=REPOSITORY, stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_for(
            lambda: demo.poll() is None and "$ kubectl create namespace team-a" in log.read_text(),
            TOUR_TIMEOUT,
            "the tour to begin",
        )
    finally:
        demo.send_signal(sig)
        assert demo.wait(STOP_TIMEOUT) == code, log.read_text()
    assert_stopped(log.read_text())
