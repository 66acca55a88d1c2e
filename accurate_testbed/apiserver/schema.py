"""What a CRD's structural schema does to custom objects: pruning, defaulting and type checks.

Pruning matters to the product: a field a structural schema does not declare is silently dropped
by a real server, so a client that relies on one would work here and fail there.
"""

from __future__ import annotations

import json
from typing import Any

from accurate_testbed.apiserver.cloning import clone
from libaccurate.validation import FieldError

_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_ROOT_KEPT = ("apiVersion", "kind", "metadata")


def _prune(value: Any, schema: dict[str, Any], path: str, dropped: list[str]) -> Any:
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        result = {}
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            if properties is not None and key in properties:
                result[key] = _prune(item, properties[key], where, dropped)
            elif isinstance(additional, dict):
                result[key] = _prune(item, additional, where, dropped)
            elif additional is True or schema.get(_PRESERVE):
                result[key] = item
            else:
                dropped.append(where)
        return result
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [
            _prune(item, schema["items"], f"{path}[{index}]", dropped)
            for index, item in enumerate(value)
        ]
    return value


def _default(value: Any, schema: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in value and "default" in sub:
                value[key] = clone(sub["default"])
            if key in value:
                _default(value[key], sub)
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            for item in value.values():
                _default(item, additional)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default(item, schema["items"])


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _type_ok(value: Any, schema: dict[str, Any]) -> bool:
    wanted = schema.get("type")
    actual = _type_name(value)
    if schema.get("x-kubernetes-int-or-string"):
        return actual in ("integer", "string")
    if value is None:
        return bool(schema.get("nullable")) or wanted is None
    return wanted is None or wanted == actual or (wanted == "number" and actual == "integer")


def _check(value: Any, schema: dict[str, Any], path: str, issues: list[FieldError]) -> None:
    if not _type_ok(value, schema):
        actual = _type_name(value)
        # x-kubernetes-int-or-string is validated as the types integer and string.
        wanted = "integer,string" if schema.get("x-kubernetes-int-or-string") else schema["type"]
        detail = f'{path} in body must be of type {wanted}: "{actual}"'
        issues.append(FieldError(path, actual, detail))
        return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(json.dumps(item) for item in schema["enum"])
        issues.append(
            FieldError(path, value, f"supported values: {allowed}", "FieldValueNotSupported")
        )
    if isinstance(value, dict):
        for name in schema.get("required") or []:
            if name not in value:
                required = f"{path}.{name}" if path else name
                issues.append(FieldError(required, None, "", "FieldValueRequired"))
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, additional if isinstance(additional, dict) else None)
            if sub is not None:
                _check(item, sub, f"{path}.{key}" if path else key, issues)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _check(item, schema["items"], f"{path}[{index}]", issues)


def _body_schema(schema: dict[str, Any]) -> dict[str, Any]:
    properties = {k: v for k, v in (schema.get("properties") or {}).items() if k not in _ROOT_KEPT}
    return {**schema, "properties": properties}


def prune_and_default(
    obj: dict[str, Any], schema: dict[str, Any] | None
) -> tuple[dict[str, Any], list[str]]:
    """A new object with undeclared fields removed and schema defaults filled in, and the paths
    of the removed fields (what ``fieldValidation=Strict`` refuses)."""
    dropped: list[str] = []
    if schema is None:
        return clone(obj), dropped
    body = _body_schema(schema)
    result = _prune({k: v for k, v in obj.items() if k not in _ROOT_KEPT}, body, "", dropped)
    _default(result, body)
    return {**{k: clone(obj[k]) for k in _ROOT_KEPT if k in obj}, **result}, dropped


def check(obj: dict[str, Any], schema: dict[str, Any] | None) -> list[FieldError]:
    """Type, enum and required-field errors of the object against its schema."""
    if schema is None:
        return []
    issues: list[FieldError] = []
    _check({k: v for k, v in obj.items() if k not in _ROOT_KEPT}, _body_schema(schema), "", issues)
    return issues
