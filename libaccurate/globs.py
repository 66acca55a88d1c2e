"""Glob patterns for label and annotation keys, with the semantics of Go's ``path.Match``.

The config file is shared with the Go Accurate, so a pattern must select exactly the keys it
selects there. Python's ``fnmatch`` differs (``*`` crosses ``/``, ``[!...]`` negation, no escapes,
no syntax errors), hence this module. Names are compared character by character; Go compares
bytes, which gives the same answers for the ASCII keys Kubernetes allows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple


class GlobError(ValueError):
    """A malformed pattern; Go's ``path.Match`` reports it as ``ErrBadPattern``."""

    def __init__(self, pattern: str) -> None:
        super().__init__(f"syntax error in pattern {pattern!r}")
        self.pattern = pattern


@dataclass(frozen=True)
class CharClass:
    """A ``[...]`` term: inclusive code point ranges, possibly negated."""

    negated: bool
    ranges: tuple[tuple[str, str], ...]

    def matches(self, char: str) -> bool:
        inside = any(lo <= char <= hi for lo, hi in self.ranges)
        return inside != self.negated


Term = str | CharClass | None
"""A literal character, a class, or None for ``?``."""


class Chunk(NamedTuple):
    """A run of terms, after one or more ``*`` when ``star``; a trailing ``*`` is a chunk
    with no terms."""

    star: bool
    terms: tuple[Term, ...]


def validate_glob(pattern: str) -> None:
    """Raise GlobError if ``pattern`` is malformed.

    Mirrors the Go Accurate, which validates a pattern by matching it against "" (Go checks
    the syntax of the whole pattern even after a mismatch).
    """
    glob_match(pattern, "")


def glob_match(pattern: str, name: str) -> bool:
    """Whether ``name`` matches all of ``pattern``; raises GlobError when it is malformed."""
    rest = pattern
    while rest:
        star, chunk, rest = _split_chunk(rest)
        if star and not chunk:
            return "/" not in name
        terms = _parse_chunk(chunk, pattern)
        remainder = _advance(terms, name, last=not rest, star=star)
        if remainder is None:
            _check_syntax(rest, pattern)
            return False
        name = remainder
    return not name


def parse_glob(pattern: str) -> tuple[Chunk, ...]:
    """The chunks of ``pattern`` in the order Go's ``path.Match`` scans them; raises GlobError
    when it is malformed."""
    validate_glob(pattern)
    chunks = []
    rest = pattern
    while rest:
        star, chunk, rest = _split_chunk(rest)
        chunks.append(Chunk(star, tuple(_parse_chunk(chunk, pattern))))
    return tuple(chunks)


def match_any(patterns: Iterable[str], name: str) -> bool:
    """Whether any of ``patterns`` matches ``name``."""
    return any(glob_match(pattern, name) for pattern in patterns)


def _advance(terms: list[Term], name: str, *, last: bool, star: bool) -> str | None:
    """Match one chunk at the start of ``name``, or after a ``*`` prefix that has no ``/``.

    Like Go, the first position that fits is taken without backtracking into earlier chunks; the
    last chunk must use up the whole name.
    """
    starts = range(len(name) + 1) if star else range(1)
    for start in starts:
        if start > 0 and name[start - 1] == "/":
            return None
        remainder = _match_terms(terms, name[start:])
        if remainder is not None and not (last and remainder):
            return remainder
    return None


def _check_syntax(rest: str, pattern: str) -> None:
    """Parse the chunks left after a mismatch, so that a malformed tail is still an error."""
    while rest:
        _, chunk, rest = _split_chunk(rest)
        _parse_chunk(chunk, pattern)


def _split_chunk(pattern: str) -> tuple[bool, str, str]:
    """Split off leading stars and the run of non-star terms after them."""
    stripped = pattern.lstrip("*")
    star = len(stripped) != len(pattern)
    in_class = False
    i = 0
    while i < len(stripped):
        char = stripped[i]
        if char == "\\":
            i += 1
        elif char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        elif char == "*" and not in_class:
            return star, stripped[:i], stripped[i:]
        i += 1
    return star, stripped, ""


def _parse_chunk(chunk: str, pattern: str) -> list[Term]:
    """Turn a star-free chunk into terms."""
    terms: list[Term] = []
    i = 0
    while i < len(chunk):
        char = chunk[i]
        if char == "[":
            term, i = _parse_class(chunk, i + 1, pattern)
            terms.append(term)
        elif char == "?":
            terms.append(None)
            i += 1
        elif char == "\\":
            if i + 1 == len(chunk):
                raise GlobError(pattern)
            terms.append(chunk[i + 1])
            i += 2
        else:
            terms.append(char)
            i += 1
    return terms


def _parse_class(chunk: str, i: int, pattern: str) -> tuple[CharClass, int]:
    """Parse the body of a class starting after its ``[``; return it and the index after ``]``."""
    negated = i < len(chunk) and chunk[i] == "^"
    if negated:
        i += 1
    ranges: list[tuple[str, str]] = []
    while not (ranges and i < len(chunk) and chunk[i] == "]"):
        lo, i = _class_char(chunk, i, pattern)
        hi = lo
        if chunk[i] == "-":
            hi, i = _class_char(chunk, i + 1, pattern)
        ranges.append((lo, hi))
    return CharClass(negated, tuple(ranges)), i + 1


def _class_char(chunk: str, i: int, pattern: str) -> tuple[str, int]:
    """Read a possibly escaped class character; something must follow it (a ``]`` at least)."""
    if i >= len(chunk) or chunk[i] in "-]":
        raise GlobError(pattern)
    if chunk[i] == "\\":
        i += 1
    if i + 1 >= len(chunk):
        raise GlobError(pattern)
    return chunk[i], i + 1


def _match_terms(terms: list[Term], name: str) -> str | None:
    """Match terms against the start of ``name``; return what is left, or None on a mismatch."""
    if len(name) < len(terms):
        return None
    for term, char in zip(terms, name[: len(terms)], strict=True):
        if term is None:
            if char == "/":
                return None
        elif isinstance(term, CharClass):
            if not term.matches(char):
                return None
        elif term != char:
            return None
    return name[len(terms) :]
