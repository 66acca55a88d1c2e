"""Everything the plugin prints: styled lines, aligned tables, JSON/YAML, and errors.

Colour is a courtesy to people at a terminal, never something a script has to strip: styles are
used only when standard output is a terminal, ``NO_COLOR`` is unset and ``TERM`` is not
``dumb``; otherwise the text is exactly the same, without escape codes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

# A piece of a line: plain text, or text with a rich style name used only on a terminal.
Span = str | tuple[str, str]
OUTPUT_FORMATS = ("json", "yaml")


class CliError(Exception):
    """A failure the user can act on; printed as ``error: ...`` on stderr, exit code 1, by the
    command tree (``kubectl_accurate.main``), as every failure of the plugin's own. Not click's
    exception, so that what prints needs no click: ``list`` runs without it
    (``kubectl_accurate.listing``)."""


def wants_color(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return stream.isatty()


class Printer:
    """Writes lines to standard output, styled only when colour is wanted."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self._styled = _styled_writer(self.stream) if wants_color(self.stream) else None

    def line(self, *spans: Span) -> None:
        """One line, written and flushed at once as ``click.echo`` would, without its checks
        on every call (whether to strip escape codes, which stream to encode for): those were
        7 % of a ``list`` of 10,000 namespaces (bench/RESULTS.md, "Start-up, fifth pass")."""
        if self._styled is None:
            self.stream.write("".join(s if isinstance(s, str) else s[0] for s in spans) + "\n")
            self.stream.flush()
            return
        self._styled(spans)

    def table(self, header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "") -> None:
        """Columns padded to their widest cell, as ``kubectl get`` aligns them."""
        widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

        def cells(row: Sequence[str]) -> str:
            return "   ".join(
                cell.ljust(width) for cell, width in zip(row, widths, strict=True)
            ).rstrip()

        self.line(indent, (cells(header), "bold"))
        for row in rows:
            self.line(indent + cells(row))

    def data(self, value: Any, output: str) -> None:
        """Machine-readable output: JSON with two-space indents, or block-style YAML. Each is
        imported only when asked for: the text output, which most runs print, needs neither."""
        import click

        if output == "json":
            import json

            click.echo(json.dumps(value, indent=2), self.stream)
        else:
            import yaml

            click.echo(yaml.safe_dump(value, sort_keys=False).rstrip("\n"), self.stream)


def _styled_writer(stream: TextIO) -> Callable[[Sequence[Span]], None]:
    """Styled lines through rich, imported only for a terminal: scripts and pipes, which
    never see colour, do not pay its start-up time."""
    from rich.console import Console
    from rich.text import Text

    console = Console(file=stream, highlight=False, soft_wrap=True)

    def write(spans: Sequence[Span]) -> None:
        console.print(Text.assemble(*spans), soft_wrap=True)

    return write


def metadata_text(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str:
    """``labels a=b, c=d; annotations e=f``, leaving out what is empty."""
    parts = [
        f"{kind} {', '.join(f'{k}={v}' for k, v in sorted(values.items()))}"
        for kind, values in (("labels", labels), ("annotations", annotations))
        if values
    ]
    return "; ".join(parts)


def shorten(names: Sequence[str], shown: int = 10) -> str:
    """A readable list of names, cut after ``shown`` with a count of the rest."""
    text = ", ".join(names[:shown])
    hidden = len(names) - shown
    return f"{text} and {hidden} more" if hidden > 0 else text
