"""Kubernetes label selectors in their string form (``env=prod,!legacy,tier in (a,b)``).

The propagate-select annotation holds one; ``kubectl -l`` and the API's ``labelSelector``
query read the same syntax, so a user can try a selector with ``kubectl get ns -l`` first. The
rules follow k8s.io/apimachinery's ``labels.Parse``: ``!=`` and ``notin`` also match when the
key is absent, and an empty selector matches everything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from libaccurate.validation import validate_label_value, validate_qualified_name

Operator = Literal["exists", "absent", "in", "notin"]

_SET = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)$")
_EQUALITY = re.compile(r"^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$")


class SelectorError(ValueError):
    """A selector that does not parse; the message says which part and why."""


@dataclass(frozen=True)
class Requirement:
    """One comma-separated part: a key, how it is tested, and the values for in/notin."""

    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "absent":
            return not present
        if self.operator == "in":
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values


@dataclass(frozen=True)
class LabelSelector:
    """Requirements that must all hold."""

    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)


def parse_selector(text: str) -> LabelSelector:
    """Parse the string form; raises SelectorError naming the part that is wrong."""
    return LabelSelector(tuple(_requirement(part.strip()) for part in _parts(text)))


def _parts(text: str) -> list[str]:
    """Split at the commas that are not inside an in/notin value list."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced ')' at position {index}")
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    if depth:
        raise SelectorError("a '(' is never closed")
    parts.append(text[start:])
    if len(parts) == 1 and not parts[0].strip():
        return []
    return parts


def _requirement(part: str) -> Requirement:
    if not part:
        raise SelectorError("an empty requirement (two commas in a row, or one at an end)")
    found = _SET.match(part)
    if found:
        key, operator, listed = found.groups()
        if not listed.strip():
            raise SelectorError(f"{part!r}: {operator} needs at least one value")
        values = [value.strip() for value in listed.split(",")]
        for value in values:
            _check_value(value, part)
        return Requirement(
            _key(key, part), "in" if operator == "in" else "notin", frozenset(values)
        )
    if part.startswith("!"):
        return Requirement(_key(part[1:].strip(), part), "absent")
    found = _EQUALITY.match(part)
    if found:
        key, operator, value = found.groups()
        _check_value(value, part)
        kind: Operator = "notin" if operator == "!=" else "in"
        return Requirement(_key(key, part), kind, frozenset({value}))
    return Requirement(_key(part, part), "exists")


def _key(key: str, part: str) -> str:
    errors = validate_qualified_name(key, "key")
    if errors:
        raise SelectorError(f"{part!r}: invalid label key {key!r}: {errors[0].detail}")
    return key


def _check_value(value: str, part: str) -> None:
    errors = validate_label_value(value, "value")
    if errors:
        raise SelectorError(f"{part!r}: invalid label value {value!r}: {errors[0].detail}")
