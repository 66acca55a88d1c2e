"""A running controller's log as the tests and the benchmarks read it (Process.records): the
controller writes a record while they read, so the last line may be half written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from accurate_testbed.processes import Process


def test_a_record_still_being_written_is_left_for_the_next_read(tmp_path: Path) -> None:
    log = tmp_path / "controller.log"
    log.write_text('{"msg": "started"}\nnot json\n{"msg": "reconcile pa')
    process = subprocess.Popen([sys.executable, "-c", ""])
    process.wait()
    running = Process(process, log, "http://127.0.0.1:1", "http://127.0.0.1:1")
    assert running.records() == [{"msg": "started"}]
    with log.open("a") as out:
        out.write('ss done"}\n')
    assert running.records() == [{"msg": "started"}, {"msg": "reconcile pass done"}]
