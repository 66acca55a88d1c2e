"""Conversion of SubNamespace objects between the CRD's versions v1, v2alpha1 and v2.

A cluster upgraded from the Go Accurate may still hold SubNamespaces stored as v1, so the
conversion webhook must read them exactly as the Go controller wrote them. v2alpha1 and v2 have
the same schema. v1 had only a status string (``ok``/``conflict``); when the Go controller wrote
a v2 object as v1 it kept what v1 cannot express in two annotations, and reading it back as v2
restores the status from them, so that a v2 -> v1 -> v2 round trip loses nothing. The v1 status
string itself is derived from the v2 status and is not carried back (as in the Go Accurate): it
reads as the Go controller's would in the same state, whatever extra conditions we write.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from libaccurate.constants import (
    ANNOTATION_V1_CONDITIONS,
    ANNOTATION_V1_OBSERVED_GENERATION,
    CONDITION_READY,
    CONDITION_STALLED,
    GROUP,
    SUBNAMESPACE_KIND,
    V1_STATUS_CONFLICT,
    V1_STATUS_OK,
)

V1: str = f"{GROUP}/v1"
V2ALPHA1: str = f"{GROUP}/v2alpha1"
V2: str = f"{GROUP}/v2"
API_VERSIONS: tuple[str, ...] = (V1, V2ALPHA1, V2)

# Go's strconv.ParseInt(s, 10, 64): an optional sign and decimal digits, nothing else.
_INT64 = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# These characters only occur inside JSON strings, so replacing them anywhere is safe.
_GO_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


class ConversionError(ValueError):
    """The object cannot be converted; the message says which field is wrong."""


def convert_subnamespace(obj: Mapping[str, Any], to_api_version: str) -> dict[str, Any]:
    """Return a copy of the SubNamespace ``obj`` in ``to_api_version``; ``obj`` is not changed.

    Every conversion goes through v2 (the storage version), as the Go Accurate's hub does.
    """
    if obj.get("kind") != SUBNAMESPACE_KIND:
        raise ConversionError(f"cannot convert kind {obj.get('kind')!r}, only {SUBNAMESPACE_KIND}")
    source = obj.get("apiVersion")
    for version, role in ((source, "source"), (to_api_version, "target")):
        if version not in API_VERSIONS:
            raise ConversionError(
                f"unknown {role} apiVersion {version!r}; expected one of {', '.join(API_VERSIONS)}"
            )
    _check_shape(obj, source == V1)
    import copy  # here: `kubectl accurate list` loads this module and converts nothing

    converted = copy.deepcopy(dict(obj))
    if source == V1 and to_api_version != V1:
        _v1_to_v2(converted)
    elif source != V1 and to_api_version == V1:
        _v2_to_v1(converted)
    converted["apiVersion"] = to_api_version
    return converted


def _check_shape(obj: Mapping[str, Any], v1: bool) -> None:
    """The fields conversion reads must have the types the CRD's schema gives them; the API
    server guarantees that, a hostile caller of the webhook does not."""
    metadata = _typed(obj, "metadata", dict, "an object")
    _typed(metadata, "generation", int, "an integer", "metadata.")
    annotations = _typed(metadata, "annotations", dict, "a map of strings", "metadata.")
    if not all(isinstance(value, str) for value in annotations.values()):
        raise ConversionError("metadata.annotations must be a map of strings")
    if v1:
        return
    status = _typed(obj, "status", dict, "an object")
    _typed(status, "observedGeneration", int, "an integer", "status.")
    conditions = _typed(status, "conditions", list, "a list of objects", "status.")
    if not all(isinstance(condition, dict) for condition in conditions):
        raise ConversionError("status.conditions must be a list of objects")


def _typed(parent: Mapping[str, Any], key: str, kind: type, wanted: str, where: str = "") -> Any:
    """``parent[key]`` if it is a ``kind`` (an empty one if it is absent)."""
    value = parent.get(key)
    if value is None:
        return kind()
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ConversionError(f"{where}{key} must be {wanted}")
    return value


def _v1_to_v2(obj: dict[str, Any]) -> None:
    """Rebuild the v2 status from the annotations a v1 object carries, and drop them."""
    metadata = obj.setdefault("metadata", {})
    annotations = metadata.get("annotations") or {}
    status: dict[str, Any] = {}
    if ANNOTATION_V1_OBSERVED_GENERATION in annotations:
        status["observedGeneration"] = _parse_int64(annotations[ANNOTATION_V1_OBSERVED_GENERATION])
    if ANNOTATION_V1_CONDITIONS in annotations:
        status["conditions"] = _parse_conditions(annotations[ANNOTATION_V1_CONDITIONS])
    obj.pop("status", None)
    status = {key: value for key, value in status.items() if value}
    if status:
        obj["status"] = status
    if ANNOTATION_V1_OBSERVED_GENERATION in annotations or ANNOTATION_V1_CONDITIONS in annotations:
        kept = {
            key: value
            for key, value in annotations.items()
            if key not in (ANNOTATION_V1_OBSERVED_GENERATION, ANNOTATION_V1_CONDITIONS)
        }
        if kept:
            metadata["annotations"] = kept
        else:
            metadata.pop("annotations")


def _v2_to_v1(obj: dict[str, Any]) -> None:
    """Replace the v2 status by the v1 status string and keep the details in annotations."""
    metadata = obj.setdefault("metadata", {})
    status = obj.pop("status", None) or {}
    observed = status.get("observedGeneration") or 0
    conditions = status.get("conditions") or []
    summary = _v1_status(observed, conditions, metadata.get("generation"))
    if summary is not None:
        obj["status"] = summary
    extra: dict[str, str] = {}
    if observed:
        extra[ANNOTATION_V1_OBSERVED_GENERATION] = str(observed)
    if conditions:
        extra[ANNOTATION_V1_CONDITIONS] = _go_json(conditions)
    if extra:
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **extra}


def _v1_status(observed: int, conditions: list[Any], generation: int | None) -> str | None:
    """The v1 status the Go controller would have left in the same state: conflict, ok, or
    unknown (None).

    The Go rule: ``conflict`` when Stalled is True; ``ok`` when the current generation was
    reconciled and there are no conditions (the Go controller writes none on a healthy
    SubNamespace); otherwise unknown. Our controller always adds Ready, a condition the Go
    controller never writes, so the rule is applied to the conditions the Go controller would
    have written: those without Ready. Whatever Ready says, the Go controller would have
    written ``ok`` there: its status only tells a namespace that exists from one in conflict.
    """
    if any(c.get("type") == CONDITION_STALLED and c.get("status") == "True" for c in conditions):
        return V1_STATUS_CONFLICT
    go_conditions = [c for c in conditions if c.get("type") != CONDITION_READY]
    if observed and observed == generation and not go_conditions:
        return V1_STATUS_OK
    return None


def _go_json(value: Any) -> str:
    """JSON as Go's encoding/json writes it, so the annotation matches the Go controller's byte
    for byte: compact, UTF-8, with the characters Go escapes for HTML safety escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in _GO_ESCAPES:
        text = text.replace(char, escaped)
    return text


def _parse_int64(text: Any) -> int:
    if not isinstance(text, str) or not _INT64.fullmatch(text):
        raise ConversionError(
            f"annotation {ANNOTATION_V1_OBSERVED_GENERATION} must be an integer, not {text!r}"
        )
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ConversionError(
            f"annotation {ANNOTATION_V1_OBSERVED_GENERATION} is out of range for int64: {text}"
        )
    return value


def _parse_conditions(text: Any) -> list[dict[str, Any]]:
    try:
        conditions = json.loads(text)
    except (TypeError, ValueError) as error:
        raise ConversionError(
            f"annotation {ANNOTATION_V1_CONDITIONS} is not valid JSON: {error}"
        ) from None
    if conditions is None:
        return []
    if not isinstance(conditions, list) or not all(isinstance(c, dict) for c in conditions):
        raise ConversionError(
            f"annotation {ANNOTATION_V1_CONDITIONS} must be a JSON list of condition objects"
        )
    return conditions
