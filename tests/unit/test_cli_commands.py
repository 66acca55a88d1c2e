"""Commands whose modules the plugin imports only when they are used (issue 18): each one is
found under its name, and ``--help`` lists it with the summary its own help starts with."""

from __future__ import annotations

import inspect

import click
import pytest

from kubectl_accurate.main import DEFERRED, root


@pytest.mark.parametrize("name", sorted(DEFERRED))
def test_a_deferred_command_is_listed_with_the_first_paragraph_of_its_help(name: str) -> None:
    command = root.get_command(click.Context(root), name)
    assert command is not None and command.name == name
    first_paragraph = " ".join(inspect.cleandoc(command.help or "").split("\n\n")[0].split())
    assert DEFERRED[name].summary == first_paragraph
