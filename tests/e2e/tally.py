"""What the end-to-end suite costs a real cluster, counted per run and reported at its end.

On a real cluster the run's time goes into starting controller processes and waiting for
namespaces to be deleted (seconds each there); the line ``e2e cost: ...`` in the terminal
summary shows both, so a change that adds either is seen. Under pytest-xdist each worker counts
its own and the controller adds them up.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

COSTS: Counter[str] = Counter()
CONTROLLERS = "controller processes started"
DELETIONS = "namespace deletions waited for"
WORKER_OUTPUT = "e2e_costs"


def count(what: str, times: int = 1) -> None:
    COSTS[what] += times


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker: hand the counts to the controller, which prints the line."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output[WORKER_OUTPUT] = dict(COSTS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """In pytest-xdist's controller: add up what each worker counted."""
    COSTS.update(getattr(node, "workeroutput", {}).get(WORKER_OUTPUT, {}))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Only for runs that did either: a unit-test run has nothing to tell."""
    if COSTS:
        terminalreporter.write_line(
            f"e2e cost: {COSTS[CONTROLLERS]} {CONTROLLERS}, {COSTS[DELETIONS]} {DELETIONS}"
        )
