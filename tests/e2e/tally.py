"""What the end-to-end suite costs a real cluster, counted per run and reported at its end.

On a real cluster the run's time goes into starting controller processes and waiting for
namespaces to be deleted (seconds each there); the line ``e2e cost: ...`` in the terminal
summary shows both, so a change that adds either is seen.
"""

from __future__ import annotations

from collections import Counter

import pytest

COSTS: Counter[str] = Counter()
CONTROLLERS = "controller processes started"
DELETIONS = "namespace deletions waited for"


def count(what: str, times: int = 1) -> None:
    COSTS[what] += times


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Only for runs that did either: a unit-test run has nothing to tell."""
    if COSTS:
        terminalreporter.write_line(
            f"e2e cost: {COSTS[CONTROLLERS]} {CONTROLLERS}, {COSTS[DELETIONS]} {DELETIONS}"
        )
