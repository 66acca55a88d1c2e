"""Stopping the in-memory API server ends the threads it started for its own controllers."""

from __future__ import annotations

import threading

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.waiting import wait_for

LOOPS = 3  # namespace termination and role aggregation, garbage collection, quota


def _loops() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "apiserver-controllers"}


def test_a_stopped_server_leaves_none_of_its_controller_loops_running() -> None:
    before = _loops()
    server = ApiServer().start()
    assert len(_loops() - before) == LOOPS

    server.stop()

    wait_for(lambda: not _loops() - before, 10, "the controller loops to end")
