"""Go's parsers as their errors reach kube-apiserver's clients: strconv integers, base64 without
padding, encoding/json into a struct, path.Clean.

Query parameters and continue tokens are parsed by these in Go, and their error texts go into the
Status messages unchanged, so the in-memory server reproduces them: each function raises
ValueError with Go's text. Only what requests meet is covered (a continue token is a small JSON
object), not every corner of Go's scanners.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from typing import Any

_INT64 = range(-(2**63), 2**63)
_UINT64 = range(2**64)
_BASE64_URL = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_WHITESPACE = " \t\r\n"


def parse_integer(text: str, signed: bool) -> int:
    """strconv.ParseInt (int64) or ParseUint (uint64) in base 10."""
    function, pattern, bounds = (
        ("ParseInt", r"[+-]?[0-9]+", _INT64) if signed else ("ParseUint", r"[0-9]+", _UINT64)
    )
    quoted = json.dumps(text, ensure_ascii=False)
    if not re.fullmatch(pattern, text):
        raise ValueError(f"strconv.{function}: parsing {quoted}: invalid syntax")
    if int(text) not in bounds:
        raise ValueError(f"strconv.{function}: parsing {quoted}: value out of range")
    return int(text)


def raw_url_base64(text: str) -> bytes:
    """base64.RawURLEncoding.DecodeString, with Go's error offsets (newlines are skipped)."""
    data = text.encode("utf-8", "surrogateescape")
    kept = bytearray()
    for offset, byte in enumerate(data):
        if byte in b"\r\n":
            continue
        if byte not in _BASE64_URL:
            raise ValueError(f"illegal base64 data at input byte {offset}")
        kept.append(byte)
    if len(kept) % 4 == 1:
        raise ValueError(f"illegal base64 data at input byte {len(data) - 1}")
    return base64.urlsafe_b64decode(bytes(kept) + b"=" * (-len(kept) % 4))


def is_clean_path(path: str) -> bool:
    """Whether path.Clean leaves an absolute ``path`` as it is."""
    return path == "/" or all(part not in ("", ".", "..") for part in path.split("/")[1:])


def unmarshal_struct(data: bytes, struct: str, go_type: str, fields: Mapping[str, str]) -> dict:
    """json.Unmarshal into a struct named ``struct`` (printed as ``go_type``) whose JSON
    ``fields`` have the Go types given ("string" or "int64"): the fields found (matched without
    regard to case, as Go does; null leaves a field out), or Go's syntax or type error."""
    value = _json_value(data)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(
            f"json: cannot unmarshal {_json_type(value)} into Go value of type {go_type}"
        )
    found: dict[str, Any] = {}
    for name, item in value.items():
        field = name.lower()
        if field not in fields or item is None:
            continue
        wanted = fields[field]
        if not _fits(item, wanted):
            shown = _json_type(item)
            if wanted == "int64" and shown == "number":
                shown = f"number {item}"
            raise ValueError(
                f"json: cannot unmarshal {shown} into Go struct field {struct}.{field} of type "
                f"{wanted}"
            )
        found[field] = item
    return found


def _fits(item: Any, go_type: str) -> bool:
    if go_type == "string":
        return isinstance(item, str) and not isinstance(item, _Number)
    return isinstance(item, int) and not isinstance(item, bool) and item in _INT64


class _Number(str):
    """A JSON number that is not an integer, kept as written (Go's errors quote it)."""


def _json_value(data: bytes) -> Any:
    """The value, or Go's message for a syntax error. Go scans bytes, so positions and the
    characters it quotes are bytes (Latin-1 here)."""
    text = data.decode("latin-1")
    try:
        json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise ValueError(_syntax_error(text, error)) from None
    return json.loads(data.decode("utf-8", "replace"), parse_float=_Number)


_CONSTANT = "constant"


def _no_constant(name: str) -> None:
    """Python reads NaN and Infinity; Go does not (its error is at the letter)."""
    raise json.JSONDecodeError(_CONSTANT, name, 1 if name.startswith("-") else 0)


def _syntax_error(text: str, error: json.JSONDecodeError) -> str:
    if error.msg == _CONSTANT:  # its own text is the document
        where = "in numeric literal" if error.pos else "looking for beginning of value"
        return f"invalid character {_go_char(error.doc[error.pos])} {where}"
    if error.pos >= len(text.rstrip(_WHITESPACE)) or error.msg.startswith("Unterminated"):
        return "unexpected end of JSON input"
    reason = next((known for known in _SYNTAX if error.msg.startswith(known)), "Expecting value")
    where = _SYNTAX[reason]
    position = error.pos + 1 if reason == "Invalid \\escape" else error.pos
    if reason == "Expecting value" and text[position] in _LITERALS:
        return _literal_error(text, position, _LITERALS[text[position]])
    if reason == "Invalid \\uXXXX escape":
        start = text.rfind("\\u", 0, error.pos + 2) + 2
        digits = range(start, min(start + 4, len(text)))
        position = next((i for i in digits if text[i] not in _HEX), len(text))
        if position == len(text):
            return "unexpected end of JSON input"
    if reason == "Expecting ',' delimiter" and _open_bracket(text, error.pos) == "[":
        where = "after array element"
    return f"invalid character {_go_char(text[position])} {where}"


_LITERALS = {"t": "true", "f": "false", "n": "null"}
_HEX = frozenset("0123456789abcdefABCDEF")
# Python's json messages and what Go's scanner says at the same character.
_SYNTAX = {
    "Invalid \\uXXXX escape": "in \\u hexadecimal character escape",
    "Expecting value": "looking for beginning of value",
    "Expecting property name enclosed in double quotes": "looking for beginning of object key "
    "string",
    "Expecting ':' delimiter": "after object key",
    "Expecting ',' delimiter": "after object key:value pair",
    "Extra data": "after top-level value",
    "Invalid control character": "in string literal",
    "Invalid \\escape": "in string escape code",
}


def _literal_error(text: str, start: int, literal: str) -> str:
    """A misspelt true, false or null, where Go's scanner stops reading it."""
    for position in range(start, min(start + len(literal), len(text))):
        wanted = literal[position - start]
        if text[position] != wanted:
            found, expected = _go_char(text[position]), _go_char(wanted)
            return f"invalid character {found} in literal {literal} (expecting {expected})"
    return "unexpected end of JSON input"


def _open_bracket(text: str, end: int) -> str:
    """The innermost bracket still open at ``end`` (strings skipped)."""
    stack: list[str] = []
    in_string = escaped = False
    for char in text[:end]:
        if in_string:
            in_string = escaped or char != '"'
            escaped = not escaped and char == "\\"
        elif char == '"':
            in_string = True
        elif char in "[{":
            stack.append(char)
        elif char in "]}" and stack:
            stack.pop()
    return stack[-1] if stack else ""


def _go_char(char: str) -> str:
    """encoding/json's quoteChar: the byte in single quotes, escaped like strconv.Quote."""
    if char == "'":
        return "'\\''"
    if char == '"':
        return "'\"'"
    if char.isprintable():
        return f"'{char}'"
    if char in _ESCAPES:
        return f"'{_ESCAPES[char]}'"
    code = ord(char)
    return f"'\\x{code:02x}'" if code < 0x80 else f"'\\u{code:04x}'"


_ESCAPES = {  # strconv.Quote's short escapes
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (_Number, int)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"
