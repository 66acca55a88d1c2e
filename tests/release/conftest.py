"""The release binary that ``test_binary.py`` drives is frozen while the tests before it run.

Freezing takes one to two minutes of one core, a tenth of the whole suite when the suite waited
for it. So once the tests are collected, if any of ``test_binary.py``'s are among them,
``krew/release.py build`` starts in a process group of its own; its ``dist`` fixture waits for
it. The build, with the PyInstaller processes it starts, is stopped when the session ends,
however it ends (Ctrl-C included), and its folder removed. With ``ACCURATE_RELEASE_DIST`` set
to the folder of an earlier build's archive, that archive is used instead (tests/release/build.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.release.build import BUILD, start

BINARY_TESTS = Path(__file__).parent / "test_binary.py"


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    if any(item.path == BINARY_TESTS for item in session.items):
        session.config.stash[BUILD] = start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    build = session.config.stash.get(BUILD, None)
    if build is not None:
        build.stop()
