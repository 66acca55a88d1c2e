"""Naming policies for sub-namespaces, evaluated the way the Go Accurate evaluates them.

Policies are Go (RE2) regular expressions and templates written for the Go controller, so they are
translated to Python ``re`` syntax where the two differ, and anything without a faithful
translation is rejected instead of silently meaning something else.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # config validates policies with this module, so it cannot be imported here
    from libaccurate.config import NamingPolicy

_GO_MAX_REPEAT = 1000
_GO_FLAGS = frozenset("ims")
_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_CHAR_ESCAPES = frozenset("aftnrv")
_PERL_CLASSES = frozenset("dDsSwW")
_ASSERTION_ESCAPES = {"A": "\\A", "b": "\\b", "B": "\\B", "z": "\\Z"}
_CLASS_SPECIALS = frozenset("\\]^-[&~|")
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")
_NAMED_GROUP = re.compile(r"\(\?P?<(\w+)>", re.ASCII)
_FLAG_GROUP = re.compile(r"\(\?([a-zA-Z]*(?:-[a-zA-Z]*)?)([:)])")
_HEX = re.compile(r"\{([0-9A-Fa-f]+)\}|([0-9A-Fa-f]{2})")
_OCTAL_TAIL = re.compile("[0-7]{0,2}")
_POSIX_CLASS = re.compile(r"\[:(\^?)(.*?):\]", re.S)


def compile_policy_root(root: str) -> re.Pattern[str]:
    """Compile a Go regular expression; raises ``re.error`` naming what cannot be used."""
    return re.compile(_GoTranslator(root).translate(), re.ASCII)


def expand_template(template: str, match: re.Match[str]) -> str:
    """Expand ``$name``, ``${name}``, ``$1`` and ``${1}`` in ``template`` as Go's Regexp.Expand.

    Go's rules, not Python's ``Match.expand``: the longest run of letters, digits and ``_`` is the
    name (``$1x`` is group ``1x``), ``$$`` is a ``$``, a ``$`` without a valid name stays as it is,
    and unknown or unmatched groups become "".
    """
    out: list[str] = []
    i = 0
    while i < len(template):
        dollar = template.find("$", i)
        if dollar < 0:
            break
        out.append(template[i:dollar])
        if template.startswith("$$", dollar):
            out.append("$")
            i = dollar + 2
            continue
        reference = _read_reference(template, dollar + 1)
        if reference is None:
            out.append("$")
            i = dollar + 1
            continue
        name, i = reference
        out.append(_group_text(match, name))
    out.append(template[i:])
    return "".join(out)


def check_name(policies: Sequence[NamingPolicy], root: str, name: str) -> str | None:
    """None when ``name`` may be created in the tree of ``root``, else why it may not.

    Every policy whose ``root`` regex occurs in the root's name applies, and all of them must
    pass. As in the Go Accurate, the ``match`` template is expanded once per non-overlapping
    occurrence and the expansions are concatenated before being searched for in ``name``.
    """
    for policy in policies:
        matches = list(_find_all(compile_policy_root(policy.root), root))
        if not matches:
            continue
        expanded = "".join(expand_template(policy.match, m) for m in matches)
        where = (
            f"namespace {name!r} under root namespace {root!r} by naming policy "
            f"(root={policy.root!r}, match={policy.match!r}, expanded to {expanded!r})"
        )
        try:
            required = compile_policy_root(expanded)
        except re.error as err:
            return f"cannot check {where}: the expanded match is not a valid regex: {err}"
        if required.search(name) is None:
            return f"denied {where}"
    return None


def _find_all(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """Successive non-overlapping matches as Go finds them.

    Go, unlike Python, skips an empty match that starts where the previous match ended.
    """
    pos = 0
    previous_end = -1
    while pos <= len(text):
        found = pattern.search(text, pos)
        if found is None:
            return
        if found.end() == pos:
            if found.start() != previous_end:
                yield found
            pos += 1
        else:
            yield found
            pos = found.end()
        previous_end = found.end()


def _read_reference(template: str, i: int) -> tuple[str, int] | None:
    """Read the group name after a ``$`` at ``i - 1``; return it and the index after it."""
    braced = template.startswith("{", i)
    start = i + 1 if braced else i
    end = start
    while end < len(template) and _is_name_char(template[end]):
        end += 1
    if end == start:
        return None
    if braced:
        if not template.startswith("}", end):
            return None
        return template[start:end], end + 1
    return template[start:end], end


def _is_name_char(char: str) -> bool:
    return char.isalpha() or char.isdecimal() or char == "_"


def _group_text(match: re.Match[str], name: str) -> str:
    """The text of group ``name`` (a number, or a group name), "" when absent or unmatched."""
    if name.isascii() and name.isdigit() and (name == "0" or not name.startswith("0")):
        # Go stops reading a number past nine digits; no pattern has that many groups anyway.
        index = int(name) if len(name) <= 9 else -1
    else:
        index = match.re.groupindex.get(name, -1)
    if not 0 <= index <= match.re.groups:
        return ""
    return match.group(index) or ""


@dataclass
class _Group:
    """An open group of the pattern being translated.

    ``inline_flags`` are the ``(?flags)`` seen in it, each turned into a scoped group that is
    closed before every ``|`` and the group's ``)`` and reopened after a ``|``. ``multiline``
    tells whether ``$`` means end of line (Go's ``m`` flag) or end of text.
    """

    multiline: bool
    inline_flags: list[str] = field(default_factory=list)

    def child(self, flags: str = "") -> _Group:
        return _Group(_multiline_after(self.multiline, flags))


def _multiline_after(multiline: bool, flags: str) -> bool:
    enabled, _, disabled = flags.partition("-")
    return ("m" in enabled or multiline) and "m" not in disabled


class _GoTranslator:
    """Rewrites one Go regular expression into Python syntax with the same meaning."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.pos = 0
        self.out: list[str] = []
        self.groups = [_Group(multiline=False)]
        self.can_repeat = False
        self.after_repeat = False

    def fail(self, message: str) -> re.error:
        return re.error(message, self.pattern, self.pos)

    def translate(self) -> str:
        while self.pos < len(self.pattern):
            self.step()
        if len(self.groups) > 1:
            raise self.fail("missing closing )")
        return "".join(self.out) + ")" * len(self.groups[0].inline_flags)

    def emit(self, text: str, *, repeatable: bool) -> None:
        self.out.append(text)
        self.can_repeat = repeatable
        self.after_repeat = False

    def step(self) -> None:
        char = self.pattern[self.pos]
        if char in "*+?{":
            self.repeat()
        elif char == "\\":
            self.escape()
        elif char == "[":
            self.pos += 1
            self.emit(self.char_class(), repeatable=True)
        elif char == "(":
            self.open_group()
        elif char == ")":
            if len(self.groups) == 1:
                raise self.fail("unexpected )")
            self.pos += 1
            self.emit(")" * (len(self.groups.pop().inline_flags) + 1), repeatable=True)
        elif char == "|":
            self.pos += 1
            flags = self.groups[-1].inline_flags
            reopen = "".join(f"(?{f}:" for f in flags)
            self.emit(")" * len(flags) + "|" + reopen, repeatable=False)
        elif char == "$":
            # Go's "$" is the end of the text unless the m flag is on; Python's also matches
            # before a final newline.
            self.pos += 1
            self.emit("$" if self.groups[-1].multiline else "\\Z", repeatable=True)
        else:
            self.pos += 1
            self.emit(char, repeatable=True)

    def repeat(self) -> None:
        """Copy a repetition operator; Go rejects a repetition of a repetition and big counts."""
        counted = _REPEAT.match(self.pattern, self.pos)
        if self.pattern[self.pos] == "{" and counted is None:
            self.pos += 1
            self.emit("\\{", repeatable=True)
            return
        operator = counted.group(0) if counted else self.pattern[self.pos]
        if self.after_repeat:
            raise self.fail(f"invalid nested repetition operator {operator}")
        if not self.can_repeat:
            raise self.fail(f"missing argument to repetition operator {operator}")
        if counted and any(
            int(bound) > _GO_MAX_REPEAT for bound in (counted.group(1), counted.group(3)) if bound
        ):
            raise self.fail(f"invalid repeat count {operator}")
        self.pos += len(operator)
        if self.pattern.startswith("?", self.pos):
            operator += "?"
            self.pos += 1
        self.out.append(operator)
        self.after_repeat = True

    def open_group(self) -> None:
        if not self.pattern.startswith("(?", self.pos):
            self.pos += 1
            self.groups.append(self.groups[-1].child())
            self.emit("(", repeatable=False)
            return
        named = _NAMED_GROUP.match(self.pattern, self.pos)
        if named:
            self.pos = named.end()
            self.groups.append(self.groups[-1].child())
            self.emit(f"(?P<{named.group(1)}>", repeatable=False)
            return
        flags = _FLAG_GROUP.match(self.pattern, self.pos)
        if flags is None:
            raise self.fail("invalid or unsupported Perl syntax (Go has no lookaround or similar)")
        self.flag_group(flags.group(1), scoped=flags.group(2) == ":")
        self.pos = flags.end()

    def flag_group(self, flags: str, *, scoped: bool) -> None:
        """``(?flags:...)`` stays; ``(?flags)`` becomes a group closed with the enclosing one.

        Python allows global flags only at the very start of a pattern, Go anywhere.
        """
        if "U" in flags:
            raise self.fail("the U (ungreedy) flag has no Python equivalent")
        if not set(flags) - {"-"} <= _GO_FLAGS or flags.endswith("-"):
            raise self.fail(f"invalid or unsupported Perl flags {flags!r}")
        enabled, _, disabled = flags.partition("-")
        # Go lets a later "-x" undo an earlier "x"; Python refuses a flag both on and off.
        enabled = "".join(sorted(set(enabled) - set(disabled)))
        flags = enabled + ("-" + "".join(sorted(set(disabled))) if disabled else "")
        current = self.groups[-1]
        if scoped:
            self.groups.append(current.child(flags))
            self.emit(f"(?{flags}:", repeatable=False)
        elif flags:
            current.inline_flags.append(flags)
            current.multiline = _multiline_after(current.multiline, flags)
            self.emit(f"(?{flags}:", repeatable=False)

    def escape(self) -> None:
        """Translate an escape outside a character class."""
        code = self.pattern[self.pos + 1 : self.pos + 2]
        if code == "Q":
            end = self.pattern.find("\\E", self.pos + 2)
            end = len(self.pattern) if end < 0 else end
            literal = self.pattern[self.pos + 2 : end]
            self.pos = end + 2
            self.emit(re.escape(literal), repeatable=bool(literal))
        elif code in _ASSERTION_ESCAPES:
            self.pos += 2
            self.emit(_ASSERTION_ESCAPES[code], repeatable=True)
        else:
            self.emit(self.class_escape(), repeatable=True)

    def class_escape(self) -> str:
        """Translate an escape that stands for a character or a set of characters."""
        self.pos += 1
        if self.pos >= len(self.pattern):
            raise self.fail("trailing backslash at end of expression")
        code = self.pattern[self.pos]
        self.pos += 1
        if code in _CHAR_ESCAPES or code in _PERL_CLASSES:
            return "\\" + code
        if code in "pP":
            raise self.fail("Unicode classes (\\p, \\P) are not supported")
        if code == "x":
            return _code_point(self.hex_escape())
        if code in "01234567":
            return _code_point(self.octal_escape(code))
        if code.isascii() and not code.isalnum():
            return "\\" + code
        raise self.fail(f"invalid escape sequence \\{code}")

    def hex_escape(self) -> int:
        braced = _HEX.match(self.pattern, self.pos)
        if braced is None or int(braced.group(1) or braced.group(2), 16) > 0x10FFFF:
            raise self.fail("invalid escape sequence \\x")
        self.pos = braced.end()
        return int(braced.group(1) or braced.group(2), 16)

    def octal_escape(self, first: str) -> int:
        """Go reads ``\\1``..``\\7`` as octal only when a digit follows (else a backreference)."""
        digits = _OCTAL_TAIL.match(self.pattern, self.pos)
        assert digits is not None  # an optional run always matches
        if first != "0" and not digits.group(0):
            raise self.fail(f"backreferences such as \\{first} are not supported")
        self.pos = digits.end()
        return int(first + digits.group(0), 8)

    def char_class(self) -> str:
        """Translate a class whose ``[`` was just read; members are re-escaped for Python."""
        parts = ["["]
        if self.pattern.startswith("^", self.pos):
            parts.append("^")
            self.pos += 1
        first = True
        while first or not self.pattern.startswith("]", self.pos):
            first = False
            parts.append(self.class_member())
        self.pos += 1
        return "".join(parts) + "]"

    def class_member(self) -> str:
        posix = _POSIX_CLASS.match(self.pattern, self.pos)
        if posix:
            if posix.group(1) or posix.group(2) not in _POSIX_CLASSES:
                raise self.fail(f"unsupported character class {posix.group(0)}")
            self.pos = posix.end()
            return _POSIX_CLASSES[posix.group(2)]
        low = self.class_char()
        if low.startswith("\\") and low[1] in _PERL_CLASSES:
            return low
        if self.pattern.startswith("-", self.pos) and not self.pattern.startswith("-]", self.pos):
            self.pos += 1
            return f"{low}-{self.class_char()}"
        return low

    def class_char(self) -> str:
        if self.pos >= len(self.pattern):
            raise self.fail("missing closing ]")
        char = self.pattern[self.pos]
        if char != "\\":
            self.pos += 1
            return "\\" + char if char in _CLASS_SPECIALS else char
        return self.class_escape()


def _code_point(value: int) -> str:
    return f"\\U{value:08x}"
