"""The one table every run prints: a row per measured figure, with its target and verdict."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    """One figure. ``met`` is None when the figure has no target or cannot be judged here;
    ``checked`` marks the deterministic request-count figures quick mode fails on."""

    scenario: str
    figure: str
    value: str
    target: str = ""
    met: bool | None = None
    checked: bool = False


def timed(action: Callable[[], object], clock: Callable[[], float] = time.perf_counter) -> float:
    """How long ``action`` took, in seconds of ``clock`` (the wall's by default)."""
    started = clock()
    action()
    return clock() - started


def median(samples: Sequence[float]) -> float:
    return float(statistics.median(samples))


def percentile(samples: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile: the value a ``fraction`` of the samples stay at or under."""
    ordered = sorted(samples)
    rank = max(1, -(-len(ordered) * fraction // 1))
    return ordered[int(rank) - 1]


def seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def verdict(met: bool | None) -> str:
    return {True: "met", False: "NOT met", None: "-"}[met]


def table(rows: Sequence[Row]) -> str:
    """A Markdown table, readable on a terminal and pasteable into RESULTS.md."""
    header = ("Scenario", "Figure", "Value", "Target", "Verdict")
    lines = [header, *((r.scenario, r.figure, r.value, r.target, verdict(r.met)) for r in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]

    def render(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([render(header), rule, *(render(line) for line in lines[1:])])


def machine() -> str:
    """Where the figures were measured: they mean little without it."""
    memory = "unknown"
    try:
        with open("/proc/meminfo") as info:
            total_kib = int(info.readline().split()[1])
        memory = f"{total_kib / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return (
        f"{os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), {memory} memory, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )
