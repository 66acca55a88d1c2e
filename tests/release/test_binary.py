"""The frozen ``kubectl-accurate`` as users get it: built by ``krew/release.py build``,
installed from its archive the way krew installs it, found by the real ``kubectl`` on PATH and
driven against the cluster. Freezing takes a minute or two, so the session builds once, beside
the tests that run first (build.py)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from accurate_testbed.cluster import Cluster
from kubectl_accurate import rendered
from kubectl_accurate.main import DEFERRED
from tests.e2e.cli import World, plugin_env
from tests.release.build import BUILD
from tests.release.krew import (
    TAG,
    archive_name,
    check_manifest,
    host,
    install,
    release,
    stand_in_archives,
)

pytestmark = pytest.mark.slow
BASE_URL = "https://example.test/download"


@pytest.fixture(scope="module")
def dist(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The host's real archive (built while the tests before ran: build.py), the other
    platforms' stand-ins, checksums.txt, accurate.yaml; in a folder of this process's own, as
    xdist's workers share the build."""
    build = request.config.stash[BUILD]
    code, out, err = build.wait()
    assert code == 0, err
    built = build.dist / archive_name(*host())
    assert out == f"{built}\n"
    directory = tmp_path_factory.mktemp("dist")
    shutil.copy(built, directory)
    stand_in_archives(directory, real=host())
    published = release(
        "manifest",
        "--tag",
        TAG,
        "--dist",
        str(directory),
        "--manifest",
        str(directory / "accurate.yaml"),
        "--base-url",
        BASE_URL,
    )
    assert published.returncode == 0, published.stderr
    return directory


@pytest.fixture(scope="module")
def plugin_path(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """PATH with krew's bin directory and kubectl, but not the virtualenv's console script:
    whatever ``kubectl accurate`` runs is the frozen binary."""
    manifest = check_manifest(dist / "accurate.yaml", dist, BASE_URL)
    bin_dir = install(manifest, *host(), dist, tmp_path_factory.mktemp("krew"))
    scripts = str(Path(sys.executable).parent)
    rest = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != scripts]
    return os.pathsep.join([str(bin_dir), *rest])


def kubectl_accurate(path: str, *args: str, kubeconfig: Path | None = None, **extra: str) -> Any:
    return subprocess.run(
        ["kubectl", "accurate", *args],
        env=plugin_env(kubeconfig, **extra, PATH=path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_archive_holds_the_binary_its_python_and_license_at_its_root(dist: Path) -> None:
    with tarfile.open(dist / archive_name(*host())) as tar:
        members = {member.name: member for member in tar.getmembers()}
    binary = "kubectl-accurate.exe" if host()[0] == "windows" else "kubectl-accurate"
    assert {name.split("/")[0] for name in members} == {binary, "_internal", "LICENSE"}
    assert members["_internal"].isdir()
    assert any(name.startswith("_internal/libpython") for name in members)
    # Modules are plain files, not in PyInstaller's compressed archive (issue 18: start-up).
    assert {"_internal/kubectl_accurate/entry.pyc", "_internal/click/core.pyc"} <= members.keys()
    assert members[binary].mode & 0o111 and members[binary].isfile()
    assert members["LICENSE"].size == (Path(__file__).parents[2] / "LICENSE").stat().st_size


def test_krew_installed_binary_reports_the_release_version(plugin_path: str) -> None:
    result = kubectl_accurate(plugin_path, "--version")
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        f"kubectl-accurate {TAG[1:]}\n",
        "",
    )


def test_the_binary_prints_the_help_rendered_ahead_and_click_renders_the_rest(
    plugin_path: str,
) -> None:
    """The top-level help without click (issue 18), and a command's help through it."""
    shown = kubectl_accurate(plugin_path, "--help")
    assert (shown.returncode, shown.stdout, shown.stderr) == (0, rendered.HELP, "")
    narrow = kubectl_accurate(plugin_path, "--help", COLUMNS="60")
    assert narrow.returncode == 0 and narrow.stdout != rendered.HELP
    assert narrow.stdout.startswith("Usage: kubectl accurate [OPTIONS] COMMAND [ARGS]...\n")


def test_sub_create_and_list_through_kubectl(
    cluster: Cluster, subnamespace_crd: None, plugin_path: str
) -> None:
    world = World(cluster)
    root = world.root()
    child = world.sub(root, "team")
    name = cluster.unique("dev")
    created = kubectl_accurate(
        plugin_path, "sub", "create", name, root, kubeconfig=cluster.kubeconfig
    )
    assert (created.returncode, created.stderr) == (0, "")
    assert created.stdout == (
        f"created SubNamespace {root}/{name}; the controller will create namespace {name}\n"
    )
    assert world.subnamespace(root, name) is not None
    listed = kubectl_accurate(
        plugin_path, "list", root, "--no-markers", kubeconfig=cluster.kubeconfig
    )
    assert (listed.returncode, listed.stderr) == (0, "")
    assert listed.stdout == f"{root}\n└── {child}\n"


@pytest.mark.parametrize("name", sorted(DEFERRED))
def test_commands_loaded_on_use_are_in_the_binary(plugin_path: str, name: str) -> None:
    """These commands' modules are imported by name, out of PyInstaller's sight."""
    result = kubectl_accurate(plugin_path, name, "--help")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith(f"Usage: kubectl accurate {name} ")


def test_the_binary_carries_sqlite_and_no_other_database_driver(dist: Path) -> None:
    """`report --to` writes into SQLite from the binary; other drivers, psycopg and libpq with
    its libraries, stay out, and so does ctypes, which PyInstaller's bootstrap imported at every
    start when they brought it in (Windows keeps it: click and rich need it for the console).
    docs/plugin.md says how to reach other databases."""
    with tarfile.open(dist / archive_name(*host())) as tar:
        names = tar.getnames()
    assert "_internal/sqlalchemy/dialects/sqlite/base.pyc" in names
    assert [n for n in names if "psycopg" in n or "libpq" in n or "dialects/postgresql" in n] == []
    has_ctypes = "_internal/ctypes/__init__.pyc" in names
    assert has_ctypes == (host()[0] == "windows")


def test_report_writes_into_sqlite_and_names_the_way_to_other_databases(
    cluster: Cluster, subnamespace_crd: None, plugin_path: str, tmp_path: Path
) -> None:
    world = World(cluster)
    root = world.root()
    database = tmp_path / "billing.db"
    keys = ("--key", "billing.example.com/*")

    written = kubectl_accurate(
        plugin_path,
        "report",
        root,
        *keys,
        "--to",
        str(database),
        "--table",
        "usage",
        kubeconfig=cluster.kubeconfig,
    )
    elsewhere = kubectl_accurate(
        plugin_path,
        "report",
        root,
        *keys,
        "--to",
        "postgresql+psycopg://r@127.0.0.1:1/b",
        "--table",
        "usage",
        kubeconfig=cluster.kubeconfig,
    )

    assert (written.returncode, written.stderr) == (0, "")
    with sqlite3.connect(database) as connection:
        assert list(connection.execute("SELECT namespace FROM usage")) == [(root,)]
    assert elsewhere.returncode == 1
    assert "writes only into SQLite" in elsewhere.stderr
    assert "pip install 'accurate-py[report]' psycopg[binary]" in elsewhere.stderr
