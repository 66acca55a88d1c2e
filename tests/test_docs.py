"""The documentation site builds cleanly and its references match the code they describe."""

from __future__ import annotations

import contextlib
import io
import re
import runpy
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml

from controller import options
from kubectl_accurate.main import PROG, root
from libaccurate import constants

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


def _comparison_rows(section: str) -> list[str]:
    """The first cells of the table under ``### section`` in docs/comparison.md."""
    page = (DOCS / "comparison.md").read_text(encoding="utf-8")
    _, found, rest = page.partition(f"\n### {section}\n")
    assert found, f"docs/comparison.md has no section {section!r}"
    table = rest.partition("\n#")[0]
    return [line[2:].split(" | ")[0] for line in table.splitlines() if line.startswith("| ")]


def _annotations() -> list[str]:
    """Every annotation Accurate reads or writes (libaccurate/constants.py)."""
    return sorted(
        value
        for name, value in vars(constants).items()
        if name.startswith("ANNOTATION_") and isinstance(value, str)
    )


def _commands() -> list[str]:
    """Every command of the plugin that runs (groups only hold others), as typed after
    ``kubectl accurate``."""
    found = []
    pending = [click.Context(root, info_name=PROG)]
    while pending:
        ctx = pending.pop()
        command = ctx.command
        if not isinstance(command, click.Group):
            found.append(ctx.command_path.removeprefix(f"{PROG} "))
            continue
        for name in command.list_commands(ctx):
            child = command.get_command(ctx, name)
            if child is not None:
                pending.append(click.Context(child, info_name=name, parent=ctx))
    return sorted(found)


@pytest.mark.parametrize("annotation", _annotations())
def test_the_comparison_has_a_row_for_every_annotation(annotation: str) -> None:
    """docs/comparison.md says, for each annotation, what each controller does with it (issue
    30): a new one must get a row."""
    rows = _comparison_rows("Annotations")
    assert any(f"`{annotation}`" in row for row in rows), f"no row for {annotation}"


@pytest.mark.parametrize("command", _commands())
def test_the_comparison_has_a_row_for_every_plugin_command(command: str) -> None:
    rows = _comparison_rows("Plugin commands")
    assert any(f"`{command}`" in row for row in rows), f"no row for {command}"
