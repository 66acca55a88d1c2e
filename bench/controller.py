"""The controller as an operator runs it (its console script, real flags), and what the
benchmarks read off the process: passes done, CPU time and peak memory from /proc."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from accurate_testbed.processes import PROGRAM, Process, environment, launch
from accurate_testbed.waiting import wait_for
from bench.target import Target

AGENT = "accurate-controller"
STARTUP_TIMEOUT = 120.0
CONFIG: dict[str, Any] = {
    "watches": [{"version": "v1", "kind": "Secret"}, {"version": "v1", "kind": "ConfigMap"}]
}


def start(
    target: Target,
    *flags: str,
    settings: Mapping[str, Any] = CONFIG,
    kubeconfig: Path | None = None,
) -> Process:
    """A controller (no leader election, default resync, no webhook server unless ``flags``
    ask for one: a later flag wins) that is running; not yet synced. ``settings`` is its
    config file; ``kubeconfig`` another way to the target's cluster (through a link)."""
    folder = target.scratch("controller-")
    config = folder / "config.yaml"
    config.write_text(yaml.safe_dump(dict(settings)))
    arguments = [
        str(PROGRAM),
        "--kubeconfig",
        str(kubeconfig or target.kubeconfig),
        "--config-file",
        str(config),
    ]
    running = launch(
        arguments, ["--no-leader-election", *flags], folder / "controller.log", environment()
    )
    target.on_cleanup(running.stop)
    return running


def passes(running: Process, lane: str | None = None) -> float:
    """The passes the controller has ended, of every lane or of ``lane``."""
    if running.process.poll() is not None:
        raise RuntimeError(f"the controller exited:\n{running.output()}")
    if running.get(f"{running.metrics}/metrics")[0] != 200:
        return 0.0
    name = "accurate_reconcile_passes_total"
    return running.metric(name if lane is None else f'{name}{{lane="{lane}"}}')


def wait_for_pass(running: Process, after: float = 0.0, timeout: float = STARTUP_TIMEOUT) -> None:
    """Until the controller has completed more than ``after`` passes."""
    wait_for(lambda: passes(running) > after, timeout, "a reconcile pass")


def cpu_seconds(running: Process) -> float:
    """User plus system CPU time the process has used so far."""
    fields = Path(f"/proc/{running.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(running: Process) -> float:
    return _peak_rss_mib(running.process.pid)


def webhook_peak_rss_mib(running: Process) -> float:
    """The peak RSS of the controller's webhook process (controller.webhook_process), the child
    started by multiprocessing's ``spawn``."""
    pid = running.process.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    for child in children:
        if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
            return _peak_rss_mib(int(child))
    raise RuntimeError("the controller has no webhook process")


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc status")
