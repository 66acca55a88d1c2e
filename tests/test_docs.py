"""The documentation site builds cleanly and its references match the code they describe."""

from __future__ import annotations

import contextlib
import io
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from controller import options

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# A flags table row: | `--flag` (or `--a` / `--b`) | default | what it does |
FLAG_ROW = re.compile(r"^\| (`--[^|]+`) \|([^|]*)\|", re.MULTILINE)


def test_site_builds_without_warnings(tmp_path: Path) -> None:
    """--strict turns broken links, missing anchors and pages left out of the nav into errors."""
    mkdocs = Path(sys.executable).parent / "mkdocs"
    result = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "reference" / "commands" / "index.html").is_file()


def test_command_reference_is_current() -> None:
    generator = runpy.run_path(str(DOCS / "gen_cli.py"))
    committed = (DOCS / "reference" / "commands.md").read_text(encoding="utf-8")
    assert committed == generator["render"](), "run: .venv/bin/python docs/gen_cli.py"


def _documented_flags() -> dict[str, str]:
    """Each row's first flag (``--leader-election`` of its ``--no-`` pair) and its default."""
    page = (DOCS / "reference" / "controller.md").read_text(encoding="utf-8")
    return {
        re.findall(r"`(--[a-z-]+)`", names)[0]: default.strip().strip("`")
        for names, default in FLAG_ROW.findall(page)
    }


def _documented_names() -> set[str]:
    page = (DOCS / "reference" / "controller.md").read_text(encoding="utf-8")
    return {
        name for names, _ in FLAG_ROW.findall(page) for name in re.findall(r"`(--[a-z-]+)`", names)
    }


def _parser_flags() -> set[str]:
    """The flags ``accurate-controller --help`` lists."""
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), pytest.raises(SystemExit):
        options.parse(["--help"])
    return set(re.findall(r"(--[a-z][a-z-]+)", shown.getvalue())) - {"--help"}


def test_controller_reference_lists_every_flag() -> None:
    assert _documented_names() == _parser_flags()


@pytest.mark.parametrize("flag", sorted(_documented_flags()))
def test_controller_reference_gives_the_real_default(flag: str) -> None:
    """Giving a flag its documented default must change nothing."""
    default = _documented_flags()[flag]
    defaults = options.parse([])
    if flag in ("--version", "--kubeconfig"):
        assert default == ""
    elif default == "off":
        assert options.parse([flag]) != defaults
    elif default == "on":
        assert options.parse([flag]) == defaults
    else:
        assert options.parse([f"{flag}={default}"]) == defaults


def test_configuration_page_shows_the_shipped_example() -> None:
    manifest = yaml.safe_load((ROOT / "controller/config/manager/config.yaml").read_text())
    page = (DOCS / "reference" / "configuration.md").read_text(encoding="utf-8")
    assert f"```yaml\n{manifest['data']['config.yaml']}```" in page


def test_helm_values_table_is_current() -> None:
    generator = runpy.run_path(str(DOCS / "gen_values.py"))
    committed = (DOCS / "install.md").read_text(encoding="utf-8")
    assert committed == generator["render"](committed), "run: .venv/bin/python docs/gen_values.py"
