"""Running ``accurate-controller`` as a process with its real flags: the way an operator runs it,
and the way the tests, the demo and the benchmarks start it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPTS = Path(sys.executable).parent
PROGRAM = SCRIPTS / "accurate-controller"
STOP_TIMEOUT = 20.0


def stop(
    process: subprocess.Popen[bytes],
    sig: int = signal.SIGTERM,
    timeout: float = STOP_TIMEOUT,
    group: bool = False,
) -> bool:
    """Send ``sig`` to ``process`` unless it has ended, and wait for it; one that has not ended
    within ``timeout`` is killed. With ``group``, both go to the process group ``process``
    leads (started with ``start_new_session``), so that what it started ends with it. Whether
    it ended by itself: the caller says what a process that had to be killed means."""
    if process.poll() is None:
        _send(process, sig, group)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        _send(process, signal.SIGKILL, group)
        process.wait()
        return False
    return True


def _send(process: subprocess.Popen[bytes], sig: int, group: bool) -> None:
    if group:
        os.killpg(process.pid, sig)
    elif sig == signal.SIGKILL:
        process.kill()
    else:
        process.send_signal(sig)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def environment(**extra: str) -> dict[str, str]:
    """An operator's shell: the virtualenv's scripts first on PATH, no ambient kubeconfig."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "POD_NAMESPACE")}
    env["PATH"] = f"{SCRIPTS}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **extra}


@dataclass
class Process:
    """One running controller: its process, log file and probe/metrics addresses."""

    process: subprocess.Popen[bytes]
    log: Path
    probes: str
    metrics: str

    def get(self, url: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as error:
            return int(error.code), error.read().decode()
        except OSError as error:
            return 0, str(error)

    def ready(self) -> bool:
        return self.get(f"{self.probes}/readyz")[0] == 200

    def metric(self, name: str) -> float:
        """The sum of a metric's samples (all labels) on /metrics."""
        status, text = self.get(f"{self.metrics}/metrics")
        assert status == 200, text
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def records(self) -> list[dict[str, Any]]:
        """The JSON log records written so far: whole lines only, as the one being written
        may be read half done."""
        text = self.output()
        found = []
        for line in text[: text.rfind("\n") + 1].splitlines():
            if line.startswith("{"):
                found.append(json.loads(line))
        return found

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send ``sig`` and wait for the exit; the exit code."""
        if not stop(self.process, sig):
            raise AssertionError(f"the controller ignored signal {sig}:\n{self.output()}")
        return self.process.returncode

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


def launch(
    arguments: Sequence[str], flags: Sequence[str], log: Path, env: Mapping[str, str]
) -> Process:
    """The controller as a process: ``arguments`` (program, kubeconfig, config file), probes
    and metrics on free local ports, JSON logs into ``log``, no webhook server, then ``flags``
    (a later flag wins, so they may ask for one)."""
    probes, metrics = free_port(), free_port()
    served = [
        "--log-format",
        "json",
        "--health-probe-addr",
        f"127.0.0.1:{probes}",
        "--metrics-addr",
        f"127.0.0.1:{metrics}",
        "--webhook-addr",
        "0",
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*arguments, *served, *flags], stdout=sink, stderr=subprocess.STDOUT, env=env
        )
    return Process(process, log, f"http://127.0.0.1:{probes}", f"http://127.0.0.1:{metrics}")
