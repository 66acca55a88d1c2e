"""Label and field selectors as the list and watch query parameters spell them.

Label selectors support the full string syntax (``a=b``, ``a!=b``, ``a in (x,y)``, ``a notin
(x)``, ``a``, ``!a``); field selectors support equality on the fields the real server indexes
for the kinds served here, and answer 400 for others exactly like kube-apiserver.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from accurate_testbed.apiserver.errors import ApiError, bad_request

Predicate = Callable[[dict[str, Any]], bool]

_SET_TERM = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")
_EQUALITY_TERM = re.compile(r"^\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)\s*$")

# Field paths per kind beyond metadata.name/metadata.namespace, as the real server registers them.
_EXTRA_FIELDS: Mapping[str, tuple[str, ...]] = {
    "Namespace": ("status.phase",),
    "Secret": ("type",),
    "Event": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
}


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    terms, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [term for term in terms if term.strip()]


def _label_term(term: str) -> Callable[[Mapping[str, str]], bool]:
    equality = _EQUALITY_TERM.match(term)
    if equality:
        key, operator, value = equality.groups()
        if operator == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    match = _SET_TERM.match(term)
    if not match:
        raise bad_request(f"unable to parse requirement: found '{term.strip()}', expected: key")
    negated, key, operator, values_text = match.groups()
    if operator:
        values = {value.strip() for value in values_text.split(",") if value.strip()}
        if operator == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if negated:
        return lambda labels: key not in labels
    return lambda labels: key in labels


def label_selector(text: str) -> Predicate:
    terms = [_label_term(term) for term in _split_terms(text)]

    def matches(obj: dict[str, Any]) -> bool:
        labels = obj["metadata"].get("labels") or {}
        return all(term(labels) for term in terms)

    return matches


def _field_value(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, dict) and path == "source":
        value = value.get("component")
    return "" if value is None else str(value)


def field_selector(text: str, kind: str, namespaced: bool) -> Predicate:
    supported = {"metadata.name"} | set(_EXTRA_FIELDS.get(kind, ()))
    if namespaced:
        supported.add("metadata.namespace")
    checks = []
    for term in _split_terms(text):
        match = _EQUALITY_TERM.match(term)
        if not match:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        path, operator, value = match.groups()
        if path not in supported:
            raise ApiError(400, "BadRequest", f"field label not supported: {path}")
        checks.append((path, operator == "!=", value))

    def matches(obj: dict[str, Any]) -> bool:
        return all((_field_value(obj, path) == value) != negated for path, negated, value in checks)

    return matches


def selector(labels: str, fields: str, kind: str, namespaced: bool) -> Predicate:
    """Both selectors of a request combined; an empty string selects everything."""
    by_labels = label_selector(labels) if labels else None
    by_fields = field_selector(fields, kind, namespaced) if fields else None
    return lambda obj: (
        (by_labels is None or by_labels(obj)) and (by_fields is None or by_fields(obj))
    )
