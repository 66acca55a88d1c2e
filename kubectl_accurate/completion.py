"""Shell completion scripts: click's for bash, zsh and fish, and one of our own for PowerShell,
which click does not ship, so that ``completion`` covers the shells ``kubectl completion`` does.

The PowerShell script asks the plugin itself, as click's scripts do: it runs ``kubectl-accurate``
with the words typed so far in ``COMP_LINE``, the word being completed in ``COMP_INCOMPLETE``
and the completion variable set to ``powershell_complete``, and offers one candidate per line.
"""

from __future__ import annotations

import os
from typing import Any

import click
from click.shell_completion import (
    CompletionItem,
    ShellComplete,
    add_completion_class,
    get_completion_class,
    split_arg_string,
)

SHELLS = ("bash", "zsh", "fish", "powershell")

_POWERSHELL = """\
Register-ArgumentCompleter -Native -CommandName '%(prog_name)s' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)
    $line = $commandAst.ToString()
    if ($line.Length -gt $cursorPosition) { $line = $line.Substring(0, $cursorPosition) }
    $env:COMP_LINE = $line
    $env:COMP_INCOMPLETE = $wordToComplete
    $env:%(complete_var)s = 'powershell_complete'
    $candidates = & '%(prog_name)s' 2>$null
    Remove-Item Env:\\COMP_LINE, Env:\\COMP_INCOMPLETE, Env:\\%(complete_var)s
    $candidates | ForEach-Object {
        [System.Management.Automation.CompletionResult]::new($_, $_, 'ParameterValue', $_)
    }
}
"""


class PowerShellComplete(ShellComplete):
    """Completion for PowerShell's native-command argument completer."""

    name = "powershell"
    source_template = _POWERSHELL

    def get_completion_args(self) -> tuple[list[str], str]:
        incomplete = os.environ.get("COMP_INCOMPLETE", "")
        args = split_arg_string(os.environ.get("COMP_LINE", ""))[1:]
        if incomplete and args and args[-1] == incomplete:
            args = args[:-1]
        return args, incomplete

    def format_completion(self, item: CompletionItem) -> str:
        return str(item.value)


add_completion_class(PowerShellComplete)


def completion_script(command: click.Command, shell: str, prog_name: str, var: str) -> str:
    """The shell's script, as click's ``ShellComplete.source`` makes it by default, for bash
    too: click's bash class first runs ``bash`` to warn when it is older than 4.4, and since
    ``source <(kubectl accurate completion bash)`` runs in every new shell, that process (with
    the subprocess module) was a tenth of each (issue 18). An older bash says so itself when
    it reads the script (``complete: nosort: invalid option name``)."""
    completer: Any = get_completion_class(shell)
    if completer is None:
        raise click.ClickException(f"no completion for {shell}")
    made = completer(command, {}, prog_name, var)
    return str(made.source_template % made.source_vars())
