"""The collector set for a process that holds the API's answers (libaccurate.network.collector),
which the plugin and the controller share: what it leaves the interpreter with, seen in a fresh
one so that the test run's own collector is left alone."""

from __future__ import annotations

import subprocess
import sys

from libaccurate.network.collector import THRESHOLD

PROGRAM = """
import gc
from libaccurate.network import collector
held = [{"metadata": {"name": str(n)}} for n in range(5000)]
before = gc.get_freeze_count()
collector.hold()
print(gc.get_threshold()[0], gc.get_freeze_count() - before >= 2 * len(held), gc.isenabled())
"""


def test_what_the_process_holds_is_frozen_and_passes_wait_for_many_new_objects() -> None:
    printed = subprocess.run(
        [sys.executable, "-c", PROGRAM], check=True, capture_output=True, text=True
    ).stdout
    assert printed.split() == [str(THRESHOLD), "True", "True"]
