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
# A flags table row: | `--flag` (or `--a`, `--b`) | default or values | what it does |
FLAG_ROW = re.compile(r"^\| (`-[^|]+`) \|([^|]*)\|", re.MULTILINE)
FLAG_NAME = re.compile(r"`(--?[a-z][a-z_-]*)`")


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


def _flag_rows(logging: bool) -> list[tuple[str, str]]:
    """The rows of the main flags table, or of the Go controller's logging flags."""
    page = (DOCS / "reference" / "controller.md").read_text(encoding="utf-8")
    flags, _, rest = page.partition("### Logging flags of the Go controller")
    return FLAG_ROW.findall(rest.partition("\n## ")[0] if logging else flags)


def _documented_flags() -> dict[str, str]:
    """Each main row's first flag (``--leader-election`` of its pair) and its default."""
    return {
        FLAG_NAME.findall(names)[0]: default.strip().strip("`")
        for names, default in _flag_rows(logging=False)
    }


def _documented_names() -> set[str]:
    rows = [*_flag_rows(logging=False), *_flag_rows(logging=True)]
    return {name for names, _ in rows for name in FLAG_NAME.findall(names)}


def _parser_flags() -> set[str]:
    """The flags ``accurate-controller --help`` lists, by every name they have."""
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), pytest.raises(SystemExit):
        options.parse(["--help"])
    return set(re.findall(r"(?<![\w-])(--?[a-z][a-z_-]*)", shown.getvalue()))


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
