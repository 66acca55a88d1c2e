"""The release build the binary's tests drive, run in the background: ``krew/release.py build``
in a process group of its own, with its output in files, stopped with every process it started.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from accurate_testbed.processes import stop
from tests.release.krew import SCRIPT, TAG, archive_name, host

BUILD_TIMEOUT = 900.0
# A folder holding the archive an earlier ``krew/release.py build`` of this tree made: the
# binary's tests then use a copy of it rather than freezing again (minutes of CPU), as when
# running them again after changing only the tests.
PREBUILT = "ACCURATE_RELEASE_DIST"
COPY = "import shutil, sys; print(shutil.copy(sys.argv[1], sys.argv[2]))"
STOP_TIMEOUT = 10.0


@dataclass
class Build:
    """``krew/release.py build`` running into ``folder / "dist"``."""

    process: subprocess.Popen[bytes]
    folder: Path

    @property
    def dist(self) -> Path:
        return self.folder / "dist"

    def wait(self) -> tuple[int, str, str]:
        """The build's exit code, standard output and standard error, once it has ended."""
        self.process.wait(BUILD_TIMEOUT)
        out, err = (self.folder / name for name in ("stdout", "stderr"))
        return self.process.returncode, out.read_text(), err.read_text(errors="replace")

    def stop(self) -> None:
        """End the build and every process it started, and remove what it made."""
        stop(self.process, timeout=STOP_TIMEOUT, group=True)
        shutil.rmtree(self.folder, ignore_errors=True)


BUILD = pytest.StashKey[Build]()


def start() -> Build:
    """Start ``krew/release.py build`` for the release's tag into a new temporary folder; with
    PREBUILT set, copy that archive there instead, saying so as the build does."""
    folder = Path(tempfile.mkdtemp(prefix="accurate-release-"))
    dist = folder / "dist"
    dist.mkdir()
    prebuilt = os.environ.get(PREBUILT)
    command = [sys.executable, str(SCRIPT), "build", "--tag", TAG, "--dist", str(dist)]
    if prebuilt:
        archive = Path(prebuilt) / archive_name(*host())
        command = [sys.executable, "-c", COPY, str(archive), str(dist)]
    with (folder / "stdout").open("wb") as out, (folder / "stderr").open("wb") as err:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    return Build(process, folder)
