"""Decoding the protobuf request bodies kubectl sends for built-in kinds.

kubectl's ``create namespace|configmap|secret|quota|role...`` and ``auth can-i`` commands use
client-go's typed clients, which since 1.32 send ``application/vnd.kubernetes.protobuf`` and
never fall back to JSON. This module reads the k8s envelope and the generated.proto layouts of
the kinds those commands produce into the JSON form; other kinds are answered 415 by the caller.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"

# A layout maps field numbers to (json name, type); a type is a scalar name, a nested layout,
# ("map", value type) or ("list", element type).
Layout = dict[int, tuple[str, Any]]
FieldType = str | Layout | tuple[str, Any]

_OWNER_REFERENCE: Layout = {
    1: ("kind", "string"),
    3: ("name", "string"),
    4: ("uid", "string"),
    5: ("apiVersion", "string"),
    6: ("controller", "bool"),
    7: ("blockOwnerDeletion", "bool"),
}
_OBJECT_META: Layout = {
    1: ("name", "string"),
    2: ("generateName", "string"),
    3: ("namespace", "string"),
    5: ("uid", "string"),
    6: ("resourceVersion", "string"),
    11: ("labels", ("map", "string")),
    12: ("annotations", ("map", "string")),
    13: ("ownerReferences", ("list", _OWNER_REFERENCE)),
    14: ("finalizers", ("list", "string")),
}
_STRINGS = ("list", "string")
_POLICY_RULE: Layout = {
    1: ("verbs", _STRINGS),
    2: ("apiGroups", _STRINGS),
    3: ("resources", _STRINGS),
    4: ("resourceNames", _STRINGS),
    5: ("nonResourceURLs", _STRINGS),
}
_SUBJECT: Layout = {
    1: ("kind", "string"),
    2: ("apiGroup", "string"),
    3: ("name", "string"),
    4: ("namespace", "string"),
}
_ROLE_REF: Layout = {1: ("apiGroup", "string"), 2: ("kind", "string"), 3: ("name", "string")}
_NAME_ONLY: Layout = {1: ("name", "string")}
_RESOURCE_ATTRIBUTES: Layout = {
    1: ("namespace", "string"),
    2: ("verb", "string"),
    3: ("group", "string"),
    4: ("version", "string"),
    5: ("resource", "string"),
    6: ("subresource", "string"),
    7: ("name", "string"),
}
_NON_RESOURCE_ATTRIBUTES: Layout = {1: ("path", "string"), 2: ("verb", "string")}
_ACCESS_REVIEW_SPEC: Layout = {
    1: ("resourceAttributes", _RESOURCE_ATTRIBUTES),
    2: ("nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES),
    3: ("user", "string"),
    4: ("groups", _STRINGS),
    6: ("uid", "string"),
}
_SUBJECT_ACCESS_REVIEW: Layout = {1: ("metadata", _OBJECT_META), 2: ("spec", _ACCESS_REVIEW_SPEC)}
_RESOURCES = ("map", "quantity")
_SCOPE_SELECTOR: Layout = {
    1: (
        "matchExpressions",
        ("list", {1: ("scopeName", "string"), 2: ("operator", "string"), 3: ("values", _STRINGS)}),
    )
}

LAYOUTS: dict[str, Layout] = {
    "Namespace": {
        1: ("metadata", _OBJECT_META),
        2: ("spec", {1: ("finalizers", _STRINGS)}),
    },
    "ConfigMap": {
        1: ("metadata", _OBJECT_META),
        2: ("data", ("map", "string")),
        3: ("binaryData", ("map", "bytes")),
        4: ("immutable", "bool"),
    },
    "Secret": {
        1: ("metadata", _OBJECT_META),
        2: ("data", ("map", "bytes")),
        3: ("type", "string"),
        4: ("stringData", ("map", "string")),
        5: ("immutable", "bool"),
    },
    "ServiceAccount": {
        1: ("metadata", _OBJECT_META),
        3: ("imagePullSecrets", ("list", _NAME_ONLY)),
        4: ("automountServiceAccountToken", "bool"),
    },
    "Role": {1: ("metadata", _OBJECT_META), 2: ("rules", ("list", _POLICY_RULE))},
    "ClusterRole": {1: ("metadata", _OBJECT_META), 2: ("rules", ("list", _POLICY_RULE))},
    "RoleBinding": {
        1: ("metadata", _OBJECT_META),
        2: ("subjects", ("list", _SUBJECT)),
        3: ("roleRef", _ROLE_REF),
    },
    "ClusterRoleBinding": {
        1: ("metadata", _OBJECT_META),
        2: ("subjects", ("list", _SUBJECT)),
        3: ("roleRef", _ROLE_REF),
    },
    "ResourceQuota": {
        1: ("metadata", _OBJECT_META),
        2: (
            "spec",
            {
                1: ("hard", _RESOURCES),
                2: ("scopes", _STRINGS),
                3: ("scopeSelector", _SCOPE_SELECTOR),
            },
        ),
        3: ("status", {1: ("hard", _RESOURCES), 2: ("used", _RESOURCES)}),
    },
    # A SelfSubjectReview is sent empty: the server fills in its status.
    "SelfSubjectReview": {1: ("metadata", _OBJECT_META)},
    # The self reviews' specs are the first fields of the subject reviews' spec.
    "SelfSubjectAccessReview": _SUBJECT_ACCESS_REVIEW,
    "SubjectAccessReview": _SUBJECT_ACCESS_REVIEW,
    "LocalSubjectAccessReview": _SUBJECT_ACCESS_REVIEW,
    "SelfSubjectRulesReview": {
        1: ("metadata", _OBJECT_META),
        2: ("spec", {1: ("namespace", "string")}),
    },
}
_UNKNOWN: Layout = {
    1: ("typeMeta", {1: ("apiVersion", "string"), 2: ("kind", "string")}),
    2: ("raw", "raw"),
}


class ProtobufError(ValueError):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        result |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, value
        elif wire == 2:
            length, pos = _varint(data, pos)
            yield number, data[pos : pos + length]
            pos += length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            yield number, data[pos : pos + size]
            pos += size
        else:
            raise ProtobufError(f"unsupported wire type {wire}")


def _scalar(kind: str, value: int | bytes) -> Any:
    if kind == "string":
        return bytes(value).decode() if isinstance(value, bytes) else str(value)
    if kind == "bytes":
        return base64.b64encode(value).decode() if isinstance(value, bytes) else ""
    if kind == "bool":
        return bool(value)
    if kind == "int":
        return int(value) if isinstance(value, int) else 0
    if kind == "quantity":  # message Quantity { optional string string = 1; }
        text = decode_message(value, {1: ("string", "string")}) if isinstance(value, bytes) else {}
        return text.get("string", "0")
    return value


def _value(kind: FieldType, value: int | bytes) -> Any:
    if isinstance(kind, dict):
        return decode_message(value if isinstance(value, bytes) else b"", kind)
    if isinstance(kind, tuple) and kind[0] == "map":
        entry = decode_message(
            value if isinstance(value, bytes) else b"",
            {
                1: ("key", "string"),
                2: ("value", kind[1]),
            },
        )
        return entry.get("key", ""), entry.get("value", "")
    return _scalar(str(kind), value)


def decode_message(data: bytes, layout: Layout) -> dict[str, Any]:
    """A message as its JSON form; empty values are left out as the JSON encoder omits them."""
    result: dict[str, Any] = {}
    for number, raw in _fields(data):
        if number not in layout:
            continue
        name, kind = layout[number]
        if isinstance(kind, tuple) and kind[0] == "list":
            result.setdefault(name, []).append(_value(kind[1], raw))
        elif isinstance(kind, tuple) and kind[0] == "map":
            key, value = _value(kind, raw)
            result.setdefault(name, {})[key] = value
        else:
            result[name] = _value(kind, raw)
    return {k: v for k, v in result.items() if v not in ("", None, [], {})}


def decode(body: bytes) -> dict[str, Any]:
    """The object in a k8s protobuf envelope, as JSON; raises ProtobufError for other kinds."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic prefix")
    envelope = decode_message(body[len(MAGIC) :], _UNKNOWN)
    type_meta = envelope.get("typeMeta", {})
    layout = LAYOUTS.get(type_meta.get("kind", ""))
    if layout is None:
        raise ProtobufError(f"protobuf bodies of kind {type_meta.get('kind')!r} are not supported")
    obj = decode_message(envelope.get("raw", b""), layout)
    obj.setdefault("metadata", {})
    return {"apiVersion": type_meta.get("apiVersion", ""), "kind": type_meta["kind"], **obj}
