"""Shows the tour to a person: headings with the reason for each step, every command before its
output, and a clear stop when a command fails."""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

# Long enough for a slow machine; a command that takes longer is a failure to report.
COMMAND_TIMEOUT = 60.0


class DemoError(Exception):
    """A step of the demo went wrong; the message says which and why."""


class Narrator:
    """Runs the tour's commands in ``env`` (the demo cluster's kubeconfig, the virtualenv's
    scripts first on PATH) and prints them as a reader would type them."""

    def __init__(self, env: Mapping[str, str], cwd: Path, out: TextIO = sys.stdout) -> None:
        self.env = dict(env)
        self.cwd = cwd
        self.out = out
        self.chapter = 0

    def heading(self, title: str, why: str) -> None:
        """A numbered step: its title and one sentence on why it matters."""
        self.chapter += 1
        self.say(f"## {self.chapter}. {title}\n{why}\n")

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def run(self, *command: str, stdin: str | None = None, cwd: Path | None = None) -> str:
        """Show ``command``, run it (in ``cwd``, else the repository) and show its output; its
        standard output. A manifest piped in on ``stdin`` is shown as a here-document."""
        shown_stdin = f" <<EOF\n{stdin.rstrip()}\nEOF" if stdin else ""
        self.say(f"$ {shlex.join(command)}{shown_stdin}")
        try:
            result = subprocess.run(
                command,
                input=stdin,
                env=self.env,
                cwd=cwd or self.cwd,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise DemoError(f"{shlex.join(command)}: {error}") from error
        shown = (result.stdout + result.stderr).rstrip("\n")
        if shown:
            self.say(shown)
        self.say("")
        if result.returncode != 0:
            raise DemoError(f"{shlex.join(command)} failed with exit code {result.returncode}")
        return result.stdout
