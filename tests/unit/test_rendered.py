"""The texts ``kubectl-accurate`` prints without click (issue 18) are the ones click renders from
the command tree now, and the width that decides whether the help is one of them is read as
click reads it."""

from __future__ import annotations

import shutil

import pytest

from kubectl_accurate.entry import columns
from scripts.render_answers import TARGET, render


def test_the_rendered_texts_are_what_click_renders_now() -> None:
    assert TARGET.read_text(encoding="utf-8") == render(), (
        "kubectl_accurate/rendered.py is stale: run python scripts/render_answers.py"
    )


@pytest.mark.parametrize("value", [None, "", "0", "-5", "wide", " 120 ", "79", "80", "200"])
def test_the_width_is_read_as_shutil_reads_it(
    value: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if value is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", value)
    assert columns() == shutil.get_terminal_size().columns
