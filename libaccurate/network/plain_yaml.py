"""Reads the plain block YAML that kubeconfig writers produce, without PyYAML, or declines.

Importing PyYAML compiles the regular expressions of its pure-Python reader and resolver, even
to use its C loader: a fifth of the instructions of a ``kubectl accurate list`` (issue 18,
bench/RESULTS.md). Yet the kubeconfig files that kubectl, kind, k3s, minikube and the cloud
CLIs write use a small part of YAML: block mappings and sequences, plain scalars (folded over
lines when long, as go-yaml writes a GKE ``installHint``), simple quoted scalars and ``{}`` or
``[]``. This module reads that part and gives what PyYAML's safe loader gives; anything else
(anchors, tags, flow collections, block scalars, escapes, tabs, non-ASCII text, comments after
a value, a scalar that might not be a string, an error) raises ``NotPlain``, and the caller
hands the file to PyYAML, which decides. Declining is always correct, only slower; the tests
hold every answer given to PyYAML's (tests/unit/test_plain_yaml.py).
"""

# Annotations are evaluated here (no `from __future__ import annotations`): as strings, each
# NamedTuple field cost a compile() at import, the first one 10 M instructions, 5 % of a
# `list` (docs/design-notes.md, "`list` without click").

from typing import Any, NamedTuple

_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_BOOLS = {
    word: value
    for words, value in (("yes true on", True), ("no false off", False))
    for lower in words.split()
    for word in (lower, lower.capitalize(), lower.upper())
}
# Only a plain scalar starting with one of these may be a number or a timestamp to YAML 1.1.
_NUMERIC_START = frozenset("-+.0123456789")
# Characters that start something other than a plain scalar (flow, anchors, tags, block
# scalars, directives, reserved), or a plain scalar this module leaves to PyYAML.
_NOT_PLAIN_START = frozenset("[]{},#&*!|>%@`?:<=\\")


class NotPlain(Exception):
    """The text uses YAML beyond what this module reads; PyYAML must read it."""


class _Line(NamedTuple):
    indent: int
    text: str
    # A blank or comment line came just before: it would end a folded scalar.
    after_gap: bool


def load(data: bytes) -> Any:
    """The document in ``data``, as ``yaml.safe_load`` would give it, or ``NotPlain``."""
    lines = _lines(data)
    if not lines:
        return None
    try:
        value, end = _node(lines, 0, lines[0].indent)
    except RecursionError:  # nested deeper than Python's stack: PyYAML's loader keeps its own
        raise NotPlain("nested too deep") from None
    if end != len(lines):
        raise NotPlain("text after the document")
    return value


def _lines(data: bytes) -> list[_Line]:
    """The lines that hold content, with their indentation; text outside the part of YAML read
    here (tabs, carriage returns, control or non-ASCII characters, directives) is declined."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise NotPlain("not ASCII") from None
    lines: list[_Line] = []
    gap = False
    for number, raw in enumerate(text.split("\n")):
        if not raw.isprintable():
            raise NotPlain("a tab, carriage return or control character")
        stripped = raw.strip(" ")
        if number == 0 and raw == "---":
            continue
        if not stripped or stripped.startswith("#"):
            gap = True
            continue
        if raw[:3] in ("---", "...") and raw[3:4] in ("", " "):
            raise NotPlain("a document marker")
        lines.append(_Line(len(raw) - len(raw.lstrip(" ")), stripped, gap))
        gap = False
    return lines


def _is_entry(text: str) -> bool:
    return text == "-" or text.startswith("- ")


def _node(lines: list[_Line], at: int, indent: int) -> tuple[Any, int]:
    """The collection starting at line ``at``, which sits at column ``indent``."""
    if _is_entry(lines[at].text):
        return _sequence(lines, at, indent)
    return _mapping(lines, at, indent)


def _key_and_rest(text: str) -> tuple[str, str] | None:
    """``key: rest`` split, or None when the text is not a mapping entry."""
    if text.endswith(":"):
        key, rest = text[:-1], ""
    elif ": " in text:
        key, rest = text.split(": ", 1)
    else:
        return None
    key = key.rstrip(" ")
    if not key or key[0] in "'\"":
        raise NotPlain("an empty or quoted key")
    return key, rest.lstrip(" ")


def _mapping(lines: list[_Line], at: int, indent: int) -> tuple[dict[str, Any], int]:
    found: dict[str, Any] = {}
    while at < len(lines) and lines[at].indent == indent and not _is_entry(lines[at].text):
        pair = _key_and_rest(lines[at].text)
        if pair is None:
            raise NotPlain("a line that is not a mapping entry")
        key = _scalar(pair[0])
        if not isinstance(key, str):
            raise NotPlain("a key that is not a string")
        if pair[1]:
            found[key], at = _folded(lines, at, pair[1], indent)
        else:
            found[key], at = _below(lines, at + 1, indent, entries_here=True)
    # A mapping ends at a line less indented; any other line there is an error, or a form
    # this module does not read.
    if at < len(lines) and lines[at].indent >= indent:
        raise NotPlain("a line that belongs to no collection")
    return found, at


def _sequence(lines: list[_Line], at: int, indent: int) -> tuple[list[Any], int]:
    found: list[Any] = []
    while at < len(lines) and lines[at].indent == indent and _is_entry(lines[at].text):
        rest = lines[at].text[1:].lstrip(" ")
        if not rest:
            value, at = _below(lines, at + 1, indent, entries_here=False)
        elif _is_entry(rest) or _key_and_rest(rest) is not None:
            # "- name: a" or "- - a": a collection whose first line starts after the dash.
            column = indent + len(lines[at].text) - len(rest)
            lines[at] = _Line(column, rest, lines[at].after_gap)
            value, at = _node(lines, at, column)
        else:
            value, at = _folded(lines, at, rest, indent)
        found.append(value)
    # A line at the dash's column ends a sequence written at its key's column (the mapping
    # checks it); a line more indented belongs to nothing.
    if at < len(lines) and lines[at].indent > indent:
        raise NotPlain("a line that belongs to no collection")
    return found, at


def _below(lines: list[_Line], at: int, indent: int, entries_here: bool) -> tuple[Any, int]:
    """The value of ``key:`` or ``-`` with nothing after it: the collection on the next lines,
    more indented (or, after a key, a sequence at the key's own column), else null."""
    if at < len(lines):
        line = lines[at]
        here = entries_here and line.indent == indent and _is_entry(line.text)
        if line.indent > indent or here:
            return _node(lines, at, line.indent)
    return None, at


def _folded(lines: list[_Line], at: int, first: str, indent: int) -> tuple[Any, int]:
    """A scalar that starts on line ``at``; a plain one goes on over the following lines that
    are more indented than its collection, folded into one line as YAML folds them."""
    parts = [first]
    at += 1
    while at < len(lines) and lines[at].indent > indent:
        if lines[at].after_gap or first[0] in "'\"":
            raise NotPlain("a scalar over lines this module does not fold")
        parts.append(lines[at].text)
        at += 1
    if len(parts) == 1:
        return _scalar(first), at
    for part in parts:
        _check_plain(part)
    return _resolved(" ".join(parts)), at


def _scalar(text: str) -> Any:
    """One line's scalar: quoted, ``{}``/``[]``, or plain and resolved as YAML 1.1 resolves it."""
    if text in ("{}", "[]"):
        return {} if text == "{}" else []
    if text[0] == "'":
        inner = text[1:-1]
        if len(text) < 2 or text[-1] != "'" or "'" in inner.replace("''", ""):
            raise NotPlain("a single-quoted scalar this module does not read")
        return inner.replace("''", "'")
    if text[0] == '"':
        inner = text[1:-1]
        if len(text) < 2 or text[-1] != '"' or '"' in inner or "\\" in inner:
            raise NotPlain("a double-quoted scalar this module does not read")
        return inner
    _check_plain(text)
    return _resolved(text)


def _check_plain(text: str) -> None:
    """A plain scalar, or a line of one, that YAML reads as written."""
    if text[0] in _NOT_PLAIN_START or _is_entry(text):
        raise NotPlain("a scalar starting with an indicator")
    if ": " in text or text.endswith(":") or " #" in text:
        raise NotPlain("a plain scalar with a mapping indicator or a comment")


def _resolved(text: str) -> Any:
    """What YAML 1.1's implicit types make of a plain scalar: null, a boolean, a decimal
    integer or a string; a scalar that might be another number or a timestamp is declined."""
    if text in _NULLS:
        return None
    if text in _BOOLS:
        return _BOOLS[text]
    if text[0] not in _NUMERIC_START or text.count(".") > 1:
        # No number or timestamp of YAML 1.1 has two dots: an address such as a
        # ``tls-server-name: 10.0.0.1`` (what a kubeconfig for a tunnel or a slow link holds)
        # is a string, and costs no PyYAML import.
        return text
    if text.isdigit() and (text == "0" or text[0] != "0"):
        return int(text)
    unsigned = text[1:] if text[0] in "+-" else text
    # Floats have a dot, sexagesimal numbers a colon, timestamps start "YYYY-", binary and
    # hexadecimal integers "0b" and "0x", and the other integers are digits and underscores.
    if (
        "." in text
        or ":" in text
        or (unsigned[:4].isdigit() and unsigned[4:5] == "-")
        or unsigned[:2] in ("0b", "0x")
        or (unsigned and not unsigned.strip("0123456789_"))
    ):
        raise NotPlain("a scalar that may be a number or a timestamp")
    return text
