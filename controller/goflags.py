"""Reading a command line the way Go's pflag does, so arguments written for a Go controller carry
over: ``--name=value`` and ``--name value``, booleans as ``--name`` or ``--name=false``, the
shorthand ``-v 2`` / ``-v=2`` / ``-v2``, ``--`` ending the flags, a later flag winning over an
earlier one. argparse reads ``--flag=false`` and ``-v=2`` differently, hence this module.

Names are matched with ``_`` and ``-`` alike, so klog's ``--log_dir`` is also ``--log-dir``.
Anything that is not a known flag is a usage error naming it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

# strconv.ParseBool, which pflag's boolean flags use.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})

# time.ParseDuration: a sign, then one or more decimal numbers each with a unit.
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
_NUMBER = r"(?:\d+\.?\d*|\.\d+)"
_DURATION = re.compile(rf"[-+]?(?:{_NUMBER}(?:ns|us|µs|μs|ms|s|m|h))+")
_DURATION_PART = re.compile(rf"({_NUMBER})(ns|us|µs|μs|ms|s|m|h)")


class UsageError(Exception):
    """The command line is wrong; the message names the flag or argument."""


@dataclass(frozen=True)
class Flag:
    """One flag: ``convert`` turns its text, or the ``default`` text, into a value or raises
    ValueError saying why."""

    name: str
    convert: Callable[[str], Any]
    default: str
    help: str
    kind: str = "string"
    shorthand: str = ""

    @property
    def boolean(self) -> bool:
        return self.kind == "bool"

    @property
    def spelled(self) -> str:
        return f"-{self.shorthand}, --{self.name}" if self.shorthand else f"--{self.name}"


@dataclass(frozen=True)
class Parsed:
    """The value of every flag, and which ones the command line gave."""

    values: dict[str, Any]
    given: tuple[str, ...]
    help: bool


def boolean(text: str) -> bool:
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError("use true or false (or 1, 0, t, f)")


def duration(text: str) -> float:
    """Seconds from a Go duration (``1m30s``, ``500ms``, ``-1.5h``, ``0``) or a bare number of
    seconds, which our earlier releases took."""
    if re.fullmatch(_NUMBER, text):
        return float(text)
    if not _DURATION.fullmatch(text):
        raise ValueError("use a Go duration such as 30s, 1m30s or 500ms, or seconds")
    seconds = sum(float(n) * _UNITS[unit] for n, unit in _DURATION_PART.findall(text))
    return -seconds if text.startswith("-") else seconds


def parse(flags: Sequence[Flag], argv: Sequence[str]) -> Parsed:
    """Read ``argv`` (without the program name); raises UsageError."""
    by_name = {_key(flag.name): flag for flag in flags}
    by_shorthand = {flag.shorthand: flag for flag in flags if flag.shorthand}
    values = {flag.name: flag.convert(flag.default) for flag in flags}
    given: list[str] = []
    wants_help = False
    for flag, text in _occurrences(argv, by_name, by_shorthand):
        if flag is None:
            wants_help = True
            continue
        try:
            values[flag.name] = flag.convert(text)
        except ValueError as error:
            raise UsageError(
                f'invalid argument "{text}" for "{flag.spelled}" flag: {error}'
            ) from None
        if flag.name not in given:
            given.append(flag.name)
    return Parsed(values, tuple(given), wants_help)


def _occurrences(
    argv: Sequence[str], by_name: dict[str, Flag], by_shorthand: dict[str, Flag]
) -> Iterator[tuple[Flag | None, str]]:
    """Each flag given with its text, in order; ``None`` for ``-h``/``--help``."""
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--":
            _no_arguments(args)
            return
        if not arg.startswith("-") or arg == "-":
            _no_arguments([arg])
        if arg.startswith("--"):
            name, equals, text = arg[2:].partition("=")
            if not name or name[0] in "-=":
                raise UsageError(f"bad flag syntax: {arg}")
            flag = by_name.get(_key(name))
            if flag is None:
                if name == "help":
                    yield None, ""
                    continue
                raise UsageError(f"unknown flag: --{name}")
        else:
            letter, rest = arg[1], arg[2:]
            flag = by_shorthand.get(letter)
            if flag is None:
                if letter == "h" and not rest:
                    yield None, ""
                    continue
                raise UsageError(f"unknown shorthand flag: {letter!r} in {arg}")
            equals = "=" if rest else ""
            text = rest.removeprefix("=")
        if equals or flag.boolean:
            yield flag, text if equals else "true"
        elif args:
            yield flag, args.pop(0)
        else:
            raise UsageError(f"flag needs an argument: {flag.spelled}")


def _no_arguments(arguments: Sequence[str]) -> None:
    if arguments:
        raise UsageError(
            f"unexpected argument {arguments[0]!r}: this command takes flags only "
            "(a boolean flag takes its value after '=', as in --flag=false)"
        )


def _key(name: str) -> str:
    return name.replace("_", "-")


def usage(flags: Sequence[Flag]) -> str:
    """The flag list printed by ``--help``."""
    lines = []
    for flag in flags:
        head = f"  {'-' + flag.shorthand + ', ' if flag.shorthand else '    '}--{flag.name}"
        if not flag.boolean:
            head += f" {flag.kind}"
        default = "" if flag.default in ("", "false") else f" (default {flag.default})"
        lines.append(f"{head:<44} {flag.help}{default}")
    return "\n".join(lines)
