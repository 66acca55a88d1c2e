"""The release binary that ``test_binary.py`` drives is frozen while the tests before it run.

Freezing takes one to two minutes of one core, a tenth of the whole suite when the suite waited
for it. So once the tests are collected, if any of ``test_binary.py``'s are among them,
``krew/release.py build`` starts in a process group of its own, with its output and, once it
ends, its exit code in files; the ``dist`` fixture waits for that code. The build, with the
PyInstaller processes it starts, is stopped when the session ends, however it ends (Ctrl-C
included), and its folder removed. With ``ACCURATE_RELEASE_DIST`` set to the folder of an earlier
build's archive, that archive is used instead.

Under pytest-xdist (scripts/test) the controller starts the one build, once a worker has
collected the binary's tests, into a folder it named to every worker; the workers only wait for
its exit code, and the controller, which outlives them, stops it. The root conftest.py registers
this module as a plugin, as xdist's controller loads no conftest.py below the root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from accurate_testbed.processes import stop
from accurate_testbed.waiting import wait_for
from tests.release.krew import SCRIPT, TAG, archive_name, host

BUILD_TIMEOUT = 900.0
# A folder holding the archive an earlier ``krew/release.py build`` of this tree made: the
# binary's tests then use a copy of it rather than freezing again (minutes of CPU), as when
# running them again after changing only the tests.
PREBUILT = "ACCURATE_RELEASE_DIST"
COPY = "import shutil, sys; print(shutil.copy(sys.argv[1], sys.argv[2]))"
# Runs the command after the file name and writes its exit code there once it has ended (by way
# of a second file, so that no reader sees it half-written).
RECORDING = (
    "import os, pathlib, subprocess, sys; code = subprocess.call(sys.argv[2:]); "
    "pathlib.Path(sys.argv[1] + '.new').write_text(str(code)); "
    "os.replace(sys.argv[1] + '.new', sys.argv[1])"
)
STOP_TIMEOUT = 10.0
BINARY_TESTS = "tests/release/test_binary.py"
SHARED_FOLDER = "accurate_release_build"  # the key of xdist's workerinput naming the folder


@dataclass
class Build:
    """``krew/release.py build`` into ``folder / "dist"``; ``process`` when this process started
    it (and so stops it), None in an xdist worker."""

    folder: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def dist(self) -> Path:
        return self.folder / "dist"

    def wait(self) -> tuple[int, str, str]:
        """The build's exit code, standard output and standard error, once it has ended."""
        exit_file = self.folder / "exit"
        wait_for(exit_file.exists, BUILD_TIMEOUT, "the release build to end")
        out, err = (self.folder / name for name in ("stdout", "stderr"))
        code = int(exit_file.read_text())
        return code, out.read_text(), err.read_text(errors="replace")

    def stop(self) -> None:
        """End the build and every process it started, and remove what it made; nothing in a
        worker, which only waited for it."""
        if self.process is None:
            return
        stop(self.process, timeout=STOP_TIMEOUT, group=True)
        shutil.rmtree(self.folder, ignore_errors=True)


BUILD = pytest.StashKey[Build]()
FOLDER = pytest.StashKey[Path]()


def start(folder: Path) -> Build:
    """Start ``krew/release.py build`` for the release's tag into ``folder``; with PREBUILT set,
    copy that archive there instead, saying so as the build does."""
    dist = folder / "dist"
    dist.mkdir()
    prebuilt = os.environ.get(PREBUILT)
    command = [sys.executable, str(SCRIPT), "build", "--tag", TAG, "--dist", str(dist)]
    if prebuilt:
        archive = Path(prebuilt) / archive_name(*host())
        command = [sys.executable, "-c", COPY, str(archive), str(dist)]
    with (folder / "stdout").open("wb") as out, (folder / "stderr").open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-c", RECORDING, str(folder / "exit"), *command],
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    return Build(folder, process)


def _new_folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="accurate-release-"))


def _binary_tests_among(ids: Sequence[str]) -> bool:
    return any(test.startswith(f"{BINARY_TESTS}::") for test in ids)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Without xdist: start the build. In an xdist worker: the controller's build."""
    config = session.config
    if config.option.collectonly:
        return
    ids = [item.nodeid for item in session.items]
    if not _binary_tests_among(ids):
        return
    shared = getattr(config, "workerinput", {}).get(SHARED_FOLDER)
    config.stash[BUILD] = Build(Path(shared)) if shared else start(_new_folder())


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist's controller, before each worker starts: where the one build will be."""
    config: pytest.Config = node.config
    if FOLDER not in config.stash:
        config.stash[FOLDER] = _new_folder()
    node.workerinput[SHARED_FOLDER] = str(config.stash[FOLDER])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: Sequence[str]) -> None:
    """xdist's controller: the first worker that collected the binary's tests starts the build
    (every worker collects the same tests, before any test runs)."""
    config: pytest.Config = node.config
    if config.option.collectonly or BUILD in config.stash or not _binary_tests_among(ids):
        return
    config.stash[BUILD] = start(config.stash[FOLDER])


def pytest_sessionfinish(session: pytest.Session) -> None:
    build = session.config.stash.get(BUILD, None)
    if build is not None:
        build.stop()
    elif FOLDER in session.config.stash:
        shutil.rmtree(session.config.stash[FOLDER], ignore_errors=True)
