"""Server-side Table output, which ``kubectl get`` asks for instead of the objects.

Columns follow the real server where kubectl users look (Name, Status for namespaces, Type/Data
for secrets, Age/Request/Limit for resource quotas, a CRD's additionalPrinterColumns); everything
else gets Name and Age.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from accurate_testbed.apiserver.representations import as_metadata
from accurate_testbed.apiserver.resources import Resource

Obj = dict[str, Any]
Column = tuple[dict[str, Any], Callable[[Obj], Any]]


def age(timestamp: str | None) -> str:
    """kubectl's short human duration ("5s", "3m", "2d") since ``timestamp``."""
    if not timestamp:
        return "<unknown>"
    then = datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc
    )
    seconds = max(int((datetime.datetime.now(datetime.timezone.utc) - then).total_seconds()), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * 2 or (unit == "m" and seconds >= 120):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _column(name: str, kind: str = "string", fmt: str = "", priority: int = 0) -> dict[str, Any]:
    return {"name": name, "type": kind, "format": fmt, "description": "", "priority": priority}


_NAME: Column = (_column("Name", fmt="name"), lambda obj: obj["metadata"]["name"])
_AGE: Column = (_column("Age"), lambda obj: age(obj["metadata"].get("creationTimestamp")))

_QUOTA_COLUMNS: list[Column] = [
    _NAME,
    _AGE,
    (_column("Request"), lambda obj: _quota_cells(obj, limits=False)),
    (_column("Limit"), lambda obj: _quota_cells(obj, limits=True)),
]

_BUILTIN_COLUMNS: dict[str, list[Column]] = {
    "Namespace": [(_column("Status"), lambda obj: (obj.get("status") or {}).get("phase", ""))],
    "Secret": [
        (_column("Type"), lambda obj: obj.get("type", "")),
        (_column("Data", "integer"), lambda obj: len(obj.get("data") or {})),
    ],
    "ConfigMap": [
        (
            _column("Data", "integer"),
            lambda obj: len(obj.get("data") or {}) + len(obj.get("binaryData") or {}),
        )
    ],
}


def _quota_cells(obj: Obj, limits: bool) -> str:
    """printResourceQuota: ``name: used/hard`` for each resource of status.hard, sorted, the
    ``limits.*`` ones in the Limit column and the rest in Request."""
    status = obj.get("status") or {}
    hard, used = status.get("hard") or {}, status.get("used") or {}
    return ", ".join(
        f"{name}: {used.get(name, '0')}/{hard[name]}"
        for name in sorted(hard)
        if (name.split(".")[0] == "limits" and "." in name) == limits
    )


def _json_path(obj: Obj, path: str) -> Any:
    value: Any = obj
    for part in path.strip(".").split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _printer_column(spec: dict[str, Any]) -> Column:
    kind = spec.get("type", "string")
    path = spec.get("jsonPath", "")

    def cell(obj: Obj) -> Any:
        value = _json_path(obj, path)
        if kind == "date":
            return age(value) if value else "<unknown>"
        if value is None:
            return "<none>" if kind == "string" else None
        return value

    return (
        _column(
            spec["name"],
            "string" if kind == "date" else kind,
            spec.get("format", ""),
            spec.get("priority", 0),
        ),
        cell,
    )


def columns_for(resource: Resource) -> list[Column]:
    if resource.custom and resource.printer_columns:
        return [_NAME, *(_printer_column(spec) for spec in resource.printer_columns)]
    if (resource.group, resource.kind) == ("", "ResourceQuota"):
        return _QUOTA_COLUMNS
    return [_NAME, *_BUILTIN_COLUMNS.get(resource.kind, []), _AGE]


def table(resource: Resource, items: list[Obj], metadata: Obj, headers: bool = True) -> Obj:
    """A meta.k8s.io/v1 Table of ``items``; rows carry the object's metadata as kubectl expects.
    ``metadata`` is the list's (version, and for a page ``continue`` and ``remainingItemCount``,
    which kubectl follows)."""
    columns = columns_for(resource)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": [definition for definition, _ in columns] if headers else None,
        "rows": [
            {"cells": [cell(item) for _, cell in columns], "object": as_metadata(item, "v1")}
            for item in items
        ],
    }
