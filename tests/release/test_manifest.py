"""``krew/release.py manifest``: checksums.txt and the krew manifest from every platform's
archive (the archives here hold a stand-in binary; tests/release/test_binary.py freezes the real
one), and its refusals, which write nothing."""

from __future__ import annotations

from pathlib import Path

from tests.release.krew import (
    PLATFORMS,
    TAG,
    archive_name,
    check_manifest,
    release,
    stand_in_archives,
)

BASE_URL = "https://example.test/releases/download/" + TAG


def manifest_at(folder: Path) -> tuple[str, str]:
    """Keep the test's manifest out of the checkout (the default is krew/accurate.yaml)."""
    return ("--manifest", str(folder / "accurate.yaml"))


def test_manifest_and_checksums_cover_every_platform(tmp_path: Path) -> None:
    stand_in_archives(tmp_path)
    result = release(
        "manifest",
        "--tag",
        TAG,
        "--dist",
        str(tmp_path),
        *manifest_at(tmp_path),
        "--base-url",
        BASE_URL,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        str(tmp_path / "checksums.txt"),
        str(tmp_path / "accurate.yaml"),
    ]
    names = (tmp_path / "checksums.txt").read_text(encoding="utf-8").splitlines()
    assert [line.split("  ")[1] for line in names] == sorted(archive_name(*p) for p in PLATFORMS)
    check_manifest(tmp_path / "accurate.yaml", tmp_path, BASE_URL)


def test_manifest_defaults_to_krew_accurate_yaml_and_the_github_release_of_the_tag(
    tmp_path: Path,
) -> None:
    stand_in_archives(tmp_path)
    rendered = Path(__file__).resolve().parents[2] / "krew" / "accurate.yaml"
    try:
        result = release("manifest", "--tag", TAG, "--dist", str(tmp_path))
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[-1] == str(rendered)
        default = f"https://github.com/accurate-py/accurate-py/releases/download/{TAG}"
        check_manifest(rendered, tmp_path, default)
    finally:
        rendered.unlink(missing_ok=True)


def test_manifest_refuses_missing_archives_and_writes_nothing(tmp_path: Path) -> None:
    stand_in_archives(tmp_path)
    (tmp_path / archive_name("windows", "amd64")).unlink()
    (tmp_path / archive_name("darwin", "arm64")).unlink()
    result = release("manifest", "--tag", TAG, "--dist", str(tmp_path), *manifest_at(tmp_path))
    assert result.returncode == 1
    assert result.stderr == (
        f"error: missing archives in {tmp_path}: {archive_name('darwin', 'arm64')}, "
        f"{archive_name('windows', 'amd64')}\n"
    )
    assert not (tmp_path / "checksums.txt").exists()
    assert not (tmp_path / "accurate.yaml").exists()


def test_tags_must_be_the_package_version(tmp_path: Path) -> None:
    for command in ("build", "manifest"):
        wrong = release(command, "--tag", "v99.0.0", "--dist", str(tmp_path))
        assert wrong.returncode == 1
        assert wrong.stderr == (
            f"error: tag v99.0.0 does not match the package version {TAG[1:]} "
            "(libaccurate/__init__.py)\n"
        )
        bare = release(command, "--tag", TAG[1:], "--dist", str(tmp_path))
        assert bare.returncode == 1
        assert bare.stderr == (
            f"error: tag '{TAG[1:]}' is not v<major>.<minor>.<patch>[-<pre-release>]\n"
        )
    assert list(tmp_path.iterdir()) == []
