"""What krew does with a release, done here the way krew does it, so the tests see what users get.

``release`` runs ``krew/release.py`` as a release engineer (and CI) does; ``check_manifest``
applies krew's own manifest validation rules; ``install`` picks the platform by its selector,
checks the archive's sha256, extracts it, applies the ``files`` mapping into a fresh plugin
directory and links ``kubectl-<name>`` to ``bin`` in a bin directory to put on PATH.
"""

from __future__ import annotations

import hashlib
import io
import platform
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import yaml

from libaccurate import __version__

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "krew" / "release.py"
TAG = f"v{__version__}"
PLATFORMS = {
    ("linux", "amd64"),
    ("linux", "arm64"),
    ("darwin", "amd64"),
    ("darwin", "arm64"),
    ("windows", "amd64"),
}
SEMVER = re.compile(r"v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?")
SHA256 = re.compile(r"[a-f0-9]{64}")


def host() -> tuple[str, str]:
    """This machine's os and arch in krew's (Go's) names."""
    os_name = {"win32": "windows"}.get(sys.platform, sys.platform)
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine().lower())
    return os_name, arch or platform.machine().lower()


def release(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def archive_name(os_name: str, arch: str) -> str:
    return f"kubectl-accurate_{TAG}_{os_name}_{arch}.tar.gz"


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def checksums(dist: Path) -> dict[str, str]:
    """``checksums.txt`` as ``sha256sum --check`` reads it: file name to digest."""
    sums = {}
    for line in (dist / "checksums.txt").read_text(encoding="utf-8").splitlines():
        digest, name = line.split("  ", 1)
        sums[name] = digest
    return sums


def stand_in_archives(dist: Path, real: tuple[str, str] | None = None) -> None:
    """An archive for every platform but ``real`` (built for real), each with a different
    stand-in binary so that a mixed-up sha256 shows."""
    dist.mkdir(exist_ok=True)
    for os_name, arch in sorted(PLATFORMS - {real}):
        binary = "kubectl-accurate.exe" if os_name == "windows" else "kubectl-accurate"
        members = (
            (binary, f"{os_name}/{arch}".encode()),
            ("_internal/base_library.zip", b"python"),
            ("LICENSE", b"license"),
        )
        with tarfile.open(dist / archive_name(os_name, arch), "w:gz") as tar:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def check_manifest(path: Path, dist: Path, base_url: str) -> dict[str, Any]:
    """The manifest passes krew's validation, and each platform points at its archive."""
    manifest: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin"
    assert manifest["metadata"]["name"] == path.stem == "accurate"
    spec = manifest["spec"]
    assert spec["version"] == TAG and SEMVER.fullmatch(spec["version"])
    assert spec["homepage"].startswith("https://")
    assert spec["shortDescription"] and "\n" not in spec["shortDescription"]
    assert spec["description"].strip()
    sums = checksums(dist)
    seen = set()
    for entry in spec["platforms"]:
        labels = entry["selector"]["matchLabels"]
        assert set(labels) == {"os", "arch"}
        target = (labels["os"], labels["arch"])
        seen.add(target)
        name = archive_name(*target)
        assert entry["uri"] == f"{base_url}/{name}"
        assert SHA256.fullmatch(entry["sha256"])
        assert entry["sha256"] == sums[name] == sha256_of(dist / name)
        binary = "kubectl-accurate.exe" if labels["os"] == "windows" else "kubectl-accurate"
        assert entry["bin"] == binary
        assert entry["files"] == [
            {"from": binary, "to": "."},
            {"from": "_internal", "to": "."},
            {"from": "LICENSE", "to": "."},
        ]
    assert seen == PLATFORMS and len(spec["platforms"]) == len(PLATFORMS)
    return manifest


def install(manifest: dict[str, Any], os_name: str, arch: str, dist: Path, root: Path) -> Path:
    """Install the plugin like ``kubectl krew install --manifest --archive``; returns the bin
    directory that holds the ``kubectl-accurate`` link."""
    (entry,) = [
        p
        for p in manifest["spec"]["platforms"]
        if p["selector"]["matchLabels"] == {"os": os_name, "arch": arch}
    ]
    archive = dist / Path(entry["uri"]).name
    assert sha256_of(archive) == entry["sha256"], "krew refuses an archive whose sha256 differs"
    staging = root / "download"
    with tarfile.open(archive) as tar:
        tar.extractall(staging, filter="data")
    plugin_dir = root / "store" / manifest["metadata"]["name"] / manifest["spec"]["version"]
    plugin_dir.mkdir(parents=True)
    for operation in entry["files"]:
        matches = sorted(staging.glob(operation["from"]))
        assert matches, f"no file in the archive matches {operation['from']}"
        for found in matches:
            target = plugin_dir / (found.name if operation["to"] == "." else operation["to"])
            shutil.move(found, target)
    executable = plugin_dir / entry["bin"]
    assert executable.is_file(), f"bin {entry['bin']} is not among the installed files"
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / f"kubectl-{manifest['metadata']['name']}").symlink_to(executable)
    return bin_dir
