"""Make the release artifacts of the kubectl plugin: archives, checksums and the krew manifest.

``build`` freezes ``kubectl-accurate`` for the machine it runs on (PyInstaller cannot
cross-compile, so CI runs it once per platform) and packs
``kubectl-accurate_<tag>_<os>_<arch>.tar.gz`` with the binary, the ``_internal`` folder beside it
and LICENSE at the archive root. The binary is PyInstaller's one-folder kind: a one-file binary
unpacks its whole Python into a temporary folder on every run, which cost every command about
0.6 s (bench scenario 11, bench/RESULTS.md); the folder is unpacked once, by krew. Its Python
modules are plain ``.pyc`` files in that folder (PyInstaller's ``noarchive``), imported as
Python imports them anywhere: out of PyInstaller's compressed archive, each one was inflated and
loaded by PyInstaller's own importer, written in Python, which made ``--version`` cost half as
much again as in the console script (bench/RESULTS.md, "Start-up, third pass").
``manifest`` then takes the archives of every platform, writes ``checksums.txt`` and renders
the krew manifest ``krew/accurate.yaml`` from ``krew/accurate.template.yaml``.

Usage (from the repository root)::

    python krew/release.py build --tag v0.1.0 --dist dist
    python krew/release.py manifest --tag v0.1.0 --dist dist
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import os
import platform
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = ROOT / "krew" / "launcher.py"
TEMPLATE = ROOT / "krew" / "accurate.template.yaml"
LICENSE = ROOT / "LICENSE"
PROGRAM = "kubectl-accurate"
# Where a one-folder binary finds its Python, beside it; krew installs it with the binary.
CONTENTS = "_internal"
CHECKSUMS = "checksums.txt"
MANIFEST = "accurate.yaml"
# krew wants a "v"-prefixed semantic version (it rejects the manifest otherwise).
TAG = re.compile(r"v(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)")
# Standard-library and third-party modules nothing in the plugin imports: leaving them out
# keeps the binary smaller and the build faster.
EXCLUDED_MODULES = (
    "tkinter",
    "unittest",
    "doctest",
    "lib2to3",
    "pytest",
    "hypothesis",
    "mypy",
    "IPython",
    "numpy",
    "setuptools",
    "pip",
    "prometheus_client",
    "controller",
    "tests",
    # `report --to` writes into SQLite (the standard library's sqlite3) from the binary; other
    # databases need their drivers, which a frozen binary cannot load from elsewhere, so their
    # SQLAlchemy dialects and the drivers they import stay out: psycopg with libpq and its
    # Kerberos and LDAP libraries were 14 MB of the folder, and `ctypes` at every start (issue
    # 30; docs/plugin.md says how to get the other drivers).
    "sqlalchemy.dialects.postgresql",
    "sqlalchemy.dialects.mysql",
    "sqlalchemy.dialects.mssql",
    "sqlalchemy.dialects.oracle",
    "psycopg",
    "psycopg_binary",
    "psycopg_c",
    "psycopg2",
)
# What nothing imports where it is left out. PyInstaller's bootstrap imports `ctypes` whenever
# the bundle holds it; outside Windows nothing the plugin runs needs it, while on Windows click
# and rich drive the console through it.
EXCLUDED_OUTSIDE_WINDOWS = ("ctypes",)

# Runtime hooks PyInstaller adds because a module is somewhere in the bundle, which the plugin
# does not need and which every start ran (issue 18, bench/RESULTS.md): multiprocessing's (for
# child processes started by multiprocessing, which nothing here starts; the kubernetes package
# uses its thread pool only), inspect's (source lookup of frozen modules, importing zipfile) and
# pkgutil's (teaching ``pkgutil.iter_modules`` to list PyInstaller's archive, which this build
# does not make; nothing the plugin runs lists modules).
DROPPED_RUNTIME_HOOKS = ("pyi_rth_multiprocessing", "pyi_rth_inspect", "pyi_rth_pkgutil")


class ReleaseError(Exception):
    """A reason the release cannot go on, printed as one ``error:`` line."""


@dataclass(frozen=True)
class Platform:
    """An os/arch pair in Go's (and so krew's) names."""

    os: str
    arch: str

    @property
    def binary(self) -> str:
        return f"{PROGRAM}.exe" if self.os == "windows" else PROGRAM

    def archive(self, tag: str) -> str:
        return f"{PROGRAM}_{tag}_{self.os}_{self.arch}.tar.gz"


# What a release supports: one archive each, all of them needed for the manifest.
PLATFORMS = (
    Platform("linux", "amd64"),
    Platform("linux", "arm64"),
    Platform("darwin", "amd64"),
    Platform("darwin", "arm64"),
    Platform("windows", "amd64"),
)
_OS_NAMES = {"linux": "linux", "darwin": "darwin", "win32": "windows"}
_ARCH_NAMES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def host_platform() -> Platform:
    """The platform this machine builds for, refusing the ones a release does not ship."""
    found = Platform(
        _OS_NAMES.get(sys.platform, sys.platform),
        _ARCH_NAMES.get(platform.machine().lower(), platform.machine()),
    )
    if found not in PLATFORMS:
        raise ReleaseError(f"cannot build for {found.os}/{found.arch}: not a release platform")
    return found


def package_version() -> str:
    """The version ``kubectl accurate --version`` prints, read without importing the package
    so that the script runs from a bare checkout."""
    source = (ROOT / "libaccurate" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"$', source, re.MULTILINE)
    if found is None:
        raise ReleaseError("no __version__ in libaccurate/__init__.py")
    return found.group(1)


def check_tag(tag: str) -> str:
    """A tag names the version the binary reports, so a release cannot claim another one."""
    matched = TAG.fullmatch(tag)
    if matched is None:
        raise ReleaseError(f"tag {tag!r} is not v<major>.<minor>.<patch>[-<pre-release>]")
    version = package_version()
    if matched.group(1) != version:
        raise ReleaseError(
            f"tag {tag} does not match the package version {version} (libaccurate/__init__.py)"
        )
    return tag


def excluded_modules(target: Platform) -> tuple[str, ...]:
    """The modules the binary for ``target`` leaves out."""
    if target.os == "windows":
        return EXCLUDED_MODULES
    return EXCLUDED_MODULES + EXCLUDED_OUTSIDE_WINDOWS


def freeze(work: Path) -> Path:
    """Run PyInstaller in ``work`` and return the folder it made: the binary and CONTENTS.

    The spec PyInstaller writes is run without the runtime hooks in ``DROPPED_RUNTIME_HOOKS``.
    """
    spec = work / f"{PROGRAM}.spec"
    _pyinstaller(
        "PyInstaller.utils.cliutils.makespec",
        "--onedir",
        f"--contents-directory={CONTENTS}",
        f"--name={PROGRAM}",
        f"--specpath={work}",
        f"--paths={ROOT}",
        # rich picks its Unicode width table at run time, out of PyInstaller's sight.
        "--collect-submodules=rich._unicode_data",
        # The plugin imports the modules of some commands by name, when they are used.
        "--collect-submodules=kubectl_accurate",
        # Modules as .pyc files in CONTENTS rather than in a compressed archive (see above).
        "--debug=noarchive",
        *(f"--exclude-module={name}" for name in excluded_modules(host_platform())),
        str(LAUNCHER),
    )
    analysed = "\npyz = PYZ("
    text = spec.read_text(encoding="utf-8")
    if text.count(analysed) != 1:
        raise ReleaseError(f"the spec PyInstaller wrote has no single {analysed.strip()!r}")
    dropped = f"\na.scripts = [s for s in a.scripts if s[0] not in {DROPPED_RUNTIME_HOOKS!r}]"
    spec.write_text(text.replace(analysed, dropped + analysed), encoding="utf-8")
    _pyinstaller(
        "PyInstaller",
        "--noconfirm",
        "--log-level=WARN",
        f"--distpath={work / 'dist'}",
        f"--workpath={work / 'build'}",
        str(spec),
    )
    folder = work / "dist" / PROGRAM
    for needed in (folder / host_platform().binary, folder / CONTENTS):
        if not needed.exists():
            raise ReleaseError(f"PyInstaller made no {needed.name}")
    return folder


def _pyinstaller(module: str, *args: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise ReleaseError(f"PyInstaller failed (exit {result.returncode}):\n{result.stderr}")


def _tar_member(name: str, path: Path) -> tuple[tarfile.TarInfo, io.BytesIO | None]:
    """``path`` as member ``name``, owned by root with a fixed time and a mode that says only
    whether it runs, so the same inputs give the same archive. Links stay links."""
    info = tarfile.TarInfo(name)
    info.uname = info.gname = "root"
    if path.is_symlink():
        info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
        return info, None
    if path.is_dir():
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        return info, None
    data = path.read_bytes()
    info.size = len(data)
    info.mode = 0o755 if os.access(path, os.X_OK) else 0o644
    return info, io.BytesIO(data)


def pack(folder: Path, target: Platform, tag: str, dist: Path) -> Path:
    """Write the release archive: the frozen folder's binary and CONTENTS, and LICENSE, at
    the root, in a fixed order."""
    dist.mkdir(parents=True, exist_ok=True)
    archive = dist / target.archive(tag)
    paths = sorted(folder.rglob("*"))
    members = [
        *(_tar_member(path.relative_to(folder).as_posix(), path) for path in paths),
        _tar_member(LICENSE.name, LICENSE),
    ]
    partial = archive.with_name(archive.name + ".partial")
    with (
        open(partial, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as zipped,
        tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for info, data in members:
            tar.addfile(info, data)
    partial.replace(archive)
    return archive


def build(tag: str, dist: Path) -> Path:
    check_tag(tag)
    target = host_platform()
    with tempfile.TemporaryDirectory(prefix="kubectl-accurate-build-") as work:
        return pack(freeze(Path(work)), target, tag, dist)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def release_archives(tag: str, dist: Path) -> dict[Platform, Path]:
    """Every platform's archive, or an error naming all that are missing."""
    archives = {target: dist / target.archive(tag) for target in PLATFORMS}
    missing = sorted(path.name for path in archives.values() if not path.is_file())
    if missing:
        raise ReleaseError(f"missing archives in {dist}: {', '.join(missing)}")
    return archives


def render_manifest(tag: str, base_url: str, sums: dict[Platform, str]) -> dict[str, Any]:
    """The krew manifest: the template plus this release's version and one entry per
    platform. ``files`` names exactly what to install so that nothing else in an archive
    ever lands in the user's plugin directory."""
    manifest: dict[str, Any] = yaml.safe_load(TEMPLATE.read_text(encoding="utf-8"))
    manifest["spec"]["version"] = tag
    manifest["spec"]["platforms"] = [
        {
            "selector": {"matchLabels": {"os": target.os, "arch": target.arch}},
            "uri": f"{base_url.rstrip('/')}/{target.archive(tag)}",
            "sha256": sha256,
            "bin": target.binary,
            "files": [
                {"from": target.binary, "to": "."},
                {"from": CONTENTS, "to": "."},
                {"from": LICENSE.name, "to": "."},
            ],
        }
        for target, sha256 in sums.items()
    ]
    return manifest


def write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def publish(tag: str, dist: Path, base_url: str | None, manifest_path: Path) -> tuple[Path, Path]:
    """Write ``checksums.txt`` (``sha256sum`` format) next to the archives and the krew
    manifest to ``manifest_path``, computing everything before writing anything."""
    check_tag(tag)
    sums = {target: sha256_of(path) for target, path in release_archives(tag, dist).items()}
    template = yaml.safe_load(TEMPLATE.read_text(encoding="utf-8"))
    url = base_url or f"{template['spec']['homepage']}/releases/download/{tag}"
    manifest = render_manifest(tag, url, sums)
    checksums = "".join(
        f"{sha256}  {target.archive(tag)}\n"
        for target, sha256 in sorted(sums.items(), key=lambda item: item[0].archive(tag))
    )
    text = yaml.safe_dump(manifest, sort_keys=False, width=100)
    write_atomically(dist / CHECKSUMS, checksums)
    write_atomically(manifest_path, text)
    return dist / CHECKSUMS, manifest_path


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="krew/release.py", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("build", "freeze kubectl-accurate for this machine and pack its release archive"),
        ("manifest", "write checksums.txt and the krew manifest for every platform's archive"),
    ):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("--tag", required=True, help="the release tag, e.g. v0.1.0")
        command.add_argument(
            "--dist", type=Path, default=ROOT / "dist", help="the directory of the archives"
        )
    commands.choices["manifest"].add_argument(
        "--manifest",
        type=Path,
        default=ROOT / "krew" / MANIFEST,
        help="where to write the krew manifest (default: krew/accurate.yaml)",
    )
    commands.choices["manifest"].add_argument(
        "--base-url",
        help="where the archives are downloaded from (default: the GitHub release of the tag)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.command == "build":
            print(build(args.tag, args.dist))
        else:
            for path in publish(args.tag, args.dist, args.base_url, args.manifest):
                print(path)
    except ReleaseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
