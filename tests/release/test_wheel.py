"""The wheel that is published: built as pip builds it, from the repository, and read."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What the wheel is for: the library, the plugin, the controller, and the test bed (the
# ``testbed`` extra) without its own tests (issue 30).
PACKAGES = {"libaccurate", "kubectl_accurate", "controller", "accurate_testbed"}


def source_copy(folder: Path) -> Path:
    """The repository's files (tracked, or new and not ignored) copied to ``folder``: a build in
    the repository itself would take in what an earlier build left in ``build/``."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    return folder


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The file names in the wheel pip builds from the repository's files."""
    source = source_copy(tmp_path_factory.mktemp("source"))
    folder = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(folder), "."],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (archive,) = folder.glob("*.whl")
    with zipfile.ZipFile(archive) as opened:
        return opened.namelist()


@pytest.mark.slow
def test_the_wheel_holds_the_packages_and_not_the_test_beds_tests(wheel: list[str]) -> None:
    packages = {name.split("/")[0] for name in wheel if ".dist-info/" not in name}

    assert packages == PACKAGES
    assert "accurate_testbed/apiserver/server.py" in wheel
    assert [name for name in wheel if "/tests/" in name or name.startswith("tests/")] == []
