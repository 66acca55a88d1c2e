"""Scenario 13, the network people really use (issue 29): ``kubectl accurate list`` beside
``kubectl get ns -o name`` through an emulated link (accurate_testbed.link: 30 ms round trip,
10 and 100 Mbit/s), and over loopback, on clusters as the controller leaves them (namespaces in
trees of 50, the sub-namespaces' labels applied by the controller's field manager, so with
their managed fields, and a SubNamespace for each); then the controller's first pass through
the 10 Mbit/s link. Each figure comes with the bytes received, counted by the link, and the same
with compression turned off (``--disable-compression``, the kubeconfig's
``disable-compression``): what the adapter received before it asked for gzip.

The in-memory API server runs in a process of its own (``Target.apart``), as for start-up:
clients are timed while they wait on it. ``list`` runs as the console script of a pip install
(``bench.startup.console_script``: not the development install, whose import finder costs every
start 30 ms), straight, as ``kubectl get`` does: kubectl's plugin dispatch costs every plugin the
same; and as the release binary krew installs (``bench.startup.release_binary``), outside quick
mode. Runs are interleaved, medians reported.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from accurate_testbed.link import Link, Shape
from accurate_testbed.processes import environment
from accurate_testbed.rerouting import rerouted, server_address
from bench import controller, population
from bench.report import Row, median, seconds
from bench.startup import console_script, release_binary
from bench.target import Target

if TYPE_CHECKING:  # bench.scenarios lists this scenario, so it cannot be imported at run time
    from bench.scenarios import Sizes

ROUND_TRIP_MS = 30.0
LINKS = (10.0, 100.0)  # Mbit/s
NAMESPACES_PER_ROOT = 50
LIST_RATIO = 1.0
SMALL_RATIO = 1.2
SMALL = 100
BYTES_SHARE = 0.1
KUBECTL = ("kubectl", "get", "ns", "-o", "name")
LIST = ("list",)
UNCOMPRESSED = ("list", "--disable-compression")
BINARY = ("release binary", "list")


def network(target: Target, sizes: Sizes) -> list[Row]:
    rows: list[Row] = []
    script = console_script(target.scratch("console-")).commands["list"][0]
    lines = {KUBECTL: KUBECTL, LIST: (script, *LIST), UNCOMPRESSED: (script, *UNCOMPRESSED)}
    if sizes.link_binary:
        lines[BINARY] = release_binary(target.scratch("binary-")).commands["list"]
    with target.apart() as served:
        for size in sizes.link:
            _converged(served, size)
            rows += _loopback(served, lines, size, sizes.runs)
            for megabits in LINKS:
                rows += _through_link(served, lines, size, megabits, sizes.runs)
        _converged(served, sizes.link_controller)
        rows += _controller_first_pass(served, sizes.link_controller)
    return rows


def _converged(target: Target, size: int) -> None:
    """A fresh cluster of ``size`` namespaces as the Go Accurate leaves them, then converged by
    our controller (its first pass sets each SubNamespace's conditions), which is stopped."""
    target.fresh()
    population.forest(target, max(1, size // NAMESPACES_PER_ROOT), size, subnamespaces=True)
    running = controller.start(target, "--apiserver-qps-throttle", "0")
    controller.wait_for_pass(running)
    running.stop()


Lines = dict[tuple[str, ...], tuple[str, ...]]


def _loopback(target: Target, lines: Lines, size: int, runs: int) -> list[Row]:
    env = _env(target, target.kubeconfig)
    loopback = {command: line for command, line in lines.items() if command != UNCOMPRESSED}
    times = _interleaved(loopback, env, runs, None)
    return _compared(f"13 network, {size} ns, loopback", size, times, {})


def _through_link(target: Target, lines: Lines, size: int, megabits: float, runs: int) -> list[Row]:
    with Link(server_address(target.kubeconfig), Shape.of(ROUND_TRIP_MS, megabits)) as link:
        config = rerouted(
            target.kubeconfig,
            target.scratch("linked-") / "kubeconfig",
            f"https://127.0.0.1:{link.address[1]}",
        )
        env = _env(target, config)
        times = _interleaved(lines, env, runs, link)
    name = f"13 network, {size} ns, {megabits:g} Mbit/s, {ROUND_TRIP_MS:g} ms RTT"
    return _compared(name, size, times, _bytes(times))


def _env(target: Target, kubeconfig: Path) -> dict[str, str]:
    """A user's shell: its own kubectl cache, and ``.pyc`` files kept, as a pip install keeps
    them (without, every run would compile the plugin's modules again, as in scenario 11)."""
    env = environment(KUBECONFIG=str(kubeconfig), KUBECACHEDIR=str(target.scratch("kubectl-")))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


Samples = dict[tuple[str, ...], list[tuple[float, int]]]


def _interleaved(lines: Lines, env: dict[str, str], runs: int, link: Link | None) -> Samples:
    """Each command line once to warm caches (kubectl's discovery, the plugin's API version),
    then ``runs`` rounds of all of them: (seconds, bytes received) per run, by command."""
    for line in lines.values():
        _run(line, env)
    samples: Samples = {command: [] for command in lines}
    for _ in range(runs):
        for command in lines:
            if link is not None:
                link.wires.reset()
            started = time.monotonic()
            _run(lines[command], env)
            taken = time.monotonic() - started
            samples[command].append((taken, link.wires.down.carried if link is not None else 0))
    return samples


def _run(command: Sequence[str], env: dict[str, str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {result.stderr}")


def _bytes(samples: Samples) -> dict[tuple[str, ...], int]:
    return {command: int(median([b for _, b in taken])) for command, taken in samples.items()}


def _compared(
    name: str, size: int, samples: Samples, received: dict[tuple[str, ...], int]
) -> list[Row]:
    """kubectl's time, ``list``'s and their ratio against the goal (at or below kubectl from
    2,000 namespaces up, within 1.2 at 100), with the bytes each received when counted."""
    limit = SMALL_RATIO if size <= SMALL else LIST_RATIO
    took = {command: median([t for t, _ in taken]) for command, taken in samples.items()}
    rows = [Row(name, "kubectl get ns -o name (median)", seconds(took[KUBECTL]))]
    for command, form in ((LIST, "console script"), (BINARY, "release binary")):
        if command not in took:
            continue
        ratio = took[command] / took[KUBECTL]
        rows += [
            Row(name, f"list, {form} (median)", seconds(took[command])),
            Row(
                name,
                f"list, {form}: ratio to kubectl",
                f"{ratio:.2f}",
                f"<= {limit:g}",
                ratio <= limit,
            ),
        ]
    if received:
        share = received[LIST] / received[UNCOMPRESSED]
        rows += [
            Row(name, "kubectl get ns -o name: bytes received", _size(received[KUBECTL])),
            Row(name, "list: bytes received", _size(received[LIST])),
            Row(name, "list --disable-compression (median)", seconds(took[UNCOMPRESSED])),
            Row(
                name,
                "list --disable-compression: bytes received",
                _size(received[UNCOMPRESSED]),
            ),
            Row(
                name,
                "list: share of the uncompressed bytes",
                f"{share:.3f}",
                f"<= {BYTES_SHARE:g}",
                share <= BYTES_SHARE if size > SMALL else None,
            ),
        ]
    return rows


def _controller_first_pass(target: Target, size: int) -> list[Row]:
    """A controller's start on the converged cluster to its first pass done through the
    10 Mbit/s link, with and without compression, and the bytes it received meanwhile (its
    discovery, its LISTs, its watches' start)."""
    name = f"13 network, controller, {size} ns, {LINKS[0]:g} Mbit/s, {ROUND_TRIP_MS:g} ms RTT"
    rows = []
    for compressed in (True, False):
        with Link(server_address(target.kubeconfig), Shape.of(ROUND_TRIP_MS, LINKS[0])) as link:
            config = rerouted(
                target.kubeconfig,
                target.scratch("linked-") / "kubeconfig",
                f"https://127.0.0.1:{link.address[1]}",
                disable_compression=None if compressed else True,
            )
            started = time.monotonic()
            running = controller.start(target, kubeconfig=config)
            controller.wait_for_pass(running)
            taken = time.monotonic() - started
            received = link.wires.down.carried
            running.stop()
        how = "" if compressed else " (disable-compression)"
        rows += [
            Row(name, f"start to first pass done{how}", seconds(taken)),
            Row(name, f"bytes received until then{how}", _size(received)),
        ]
    return rows


def _size(count: int) -> str:
    return f"{count / 1e6:.2f} MB" if count >= 1e6 else f"{count / 1e3:.0f} kB"
