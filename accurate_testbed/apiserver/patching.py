"""The three PATCH bodies kube-apiserver accepts besides apply: JSON merge, JSON and strategic.

Pure functions over the JSON form of objects, so the in-memory server patches the way the real
one does: `kubectl label`/`annotate` send JSON merge patches, `kubectl apply` (client-side) and
`kubectl edit` send strategic merge patches with the directives below for built-in kinds, and
controllers send all three. Inputs are never mutated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accurate_testbed.apiserver.cloning import clone

_PATCH = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_FROM = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"


class PatchError(ValueError):
    """A patch that is malformed or does not apply; the message mirrors the real server's."""


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null deletes, everything else replaces."""
    return _merge_into(clone(target), patch)


def _merge_into(target: Any, patch: Any) -> Any:
    """json_merge_patch on a target of its own, changed in place: copying it again at every
    level made a patch cost its depth times the object's size."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_into(result.get(key), value)
    return result


# --- RFC 6902 JSON patch -------------------------------------------------------------------


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902, applied in order to a copy; the first failing operation aborts the whole patch."""
    if not isinstance(operations, list):
        raise PatchError("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    document = clone(target)
    for operation in operations:
        if not isinstance(operation, dict):
            raise PatchError(f"invalid JSON patch operation: {operation!r}")
        document = _apply_operation(document, operation)
    return document


def _apply_operation(document: Any, operation: dict[str, Any]) -> Any:
    kind = operation.get("op")
    path = _required(operation, "path")
    if kind == "add":
        return _add(document, path, clone(_required(operation, "value")), kind)
    if kind == "remove":
        return _remove(document, path, kind)
    if kind == "replace":
        value = clone(_required(operation, "value"))
        _get(document, path, kind)
        return value if path == "" else _add(_remove(document, path, kind), path, value, kind)
    if kind in ("move", "copy"):
        source = _required(operation, "from")
        value = clone(_get(document, source, kind))
        if kind == "move":
            if path.startswith(source + "/"):
                raise PatchError(
                    f'move operation does not apply: "{source}" is a parent of "{path}"'
                )
            document = _remove(document, source, kind)
        return _add(document, path, value, kind)
    if kind == "test":
        if not _json_equal(_get(document, path, kind), _required(operation, "value")):
            raise PatchError(f"testing value {path} failed: test failed")
        return document
    raise PatchError(f"Unexpected kind: {kind}")


def _required(operation: dict[str, Any], name: str) -> Any:
    if name not in operation:
        raise PatchError(f'{operation.get("op")} operation does not apply: missing "{name}"')
    value = operation[name]
    if name in ("path", "from") and not isinstance(value, str):
        raise PatchError(f"{operation.get('op')} operation does not apply: {name} is not a string")
    return value


def _pointer(path: str, kind: str) -> list[str]:
    """Split a JSON pointer into unescaped tokens ("" is the whole document)."""
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f'{kind} operation does not apply: invalid JSON pointer "{path}"')
    return [token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/")]


def _index(container: list[Any], token: str, path: str, kind: str, allow_end: bool) -> int:
    """An array index as RFC 6901 spells it: digits without leading zeros, or "-" for the end."""
    if token == "-" and allow_end:
        return len(container)
    valid = token.isdigit() and (token == "0" or not token.startswith("0"))
    limit = len(container) if allow_end else len(container) - 1
    if not valid or int(token) > limit:
        raise PatchError(f'{kind} operation does not apply: doc is missing path: "{path}"')
    return int(token)


def _parent(document: Any, tokens: list[str], path: str, kind: str) -> Any:
    node = document
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, path, kind, allow_end=False)]
        else:
            raise PatchError(f'{kind} operation does not apply: doc is missing path: "{path}"')
    if not isinstance(node, (dict, list)):
        raise PatchError(f'{kind} operation does not apply: doc is missing path: "{path}"')
    return node


def _get(document: Any, path: str, kind: str) -> Any:
    tokens = _pointer(path, kind)
    if not tokens:
        return document
    node = _parent(document, tokens, path, kind)
    if isinstance(node, list):
        return node[_index(node, tokens[-1], path, kind, allow_end=False)]
    if tokens[-1] not in node:
        raise PatchError(f'{kind} operation does not apply: doc is missing key: "{path}"')
    return node[tokens[-1]]


def _add(document: Any, path: str, value: Any, kind: str) -> Any:
    tokens = _pointer(path, kind)
    if not tokens:
        return value
    node = _parent(document, tokens, path, kind)
    if isinstance(node, list):
        node.insert(_index(node, tokens[-1], path, kind, allow_end=True), value)
    else:
        node[tokens[-1]] = value
    return document


def _remove(document: Any, path: str, kind: str) -> Any:
    tokens = _pointer(path, kind)
    if not tokens:
        raise PatchError(f"{kind} operation does not apply: cannot remove the whole document")
    node = _parent(document, tokens, path, kind)
    if isinstance(node, list):
        del node[_index(node, tokens[-1], path, kind, allow_end=False)]
    elif tokens[-1] in node:
        del node[tokens[-1]]
    else:
        raise PatchError(f"Unable to remove nonexistent key: {tokens[-1]}: missing value")
    return document


def _json_equal(left: Any, right: Any) -> bool:
    """Equality as JSON sees it: true is not 1, and 1 equals 1.0."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(_json_equal, left, right))
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return left == right
    return type(left) is type(right) and left == right


# --- strategic merge patch -----------------------------------------------------------------


@dataclass(frozen=True)
class _Field:
    """What the Go struct tags say about one field: patchStrategy merge, patchMergeKey, and the
    fields of the struct it holds (or of its list elements)."""

    merge: bool = False
    key: str | None = None
    fields: Mapping[str, _Field] = field(default_factory=dict)


def _struct(**fields: _Field) -> _Field:
    return _Field(fields=fields)


def _merge(key: str | None = None, **fields: _Field) -> _Field:
    return _Field(merge=True, key=key, fields=fields)


_OBJECT_META = _struct(finalizers=_merge(), ownerReferences=_merge("uid"))
_CONDITIONS = _merge("type")
_CONTAINER = _merge(
    "name",
    ports=_merge("containerPort"),
    env=_merge("name"),
    volumeMounts=_merge("mountPath"),
    volumeDevices=_merge("devicePath"),
)
_POD_SPEC = _struct(
    containers=_CONTAINER,
    initContainers=_CONTAINER,
    ephemeralContainers=_CONTAINER,
    volumes=_merge("name"),
    imagePullSecrets=_merge("name"),
    hostAliases=_merge("ip"),
    topologySpreadConstraints=_merge("topologyKey"),
    schedulingGates=_merge("name"),
    resourceClaims=_merge("name"),
)
_PLAIN = _struct(metadata=_OBJECT_META)
_WEBHOOKS = _struct(metadata=_OBJECT_META, webhooks=_merge("name"))

# Kinds whose Go types the real server patches with; every list not named here is replaced.
_SCHEMAS: dict[str, _Field] = {
    "Namespace": _struct(metadata=_OBJECT_META, status=_struct(conditions=_CONDITIONS)),
    "ServiceAccount": _struct(metadata=_OBJECT_META, secrets=_merge("name")),
    "Service": _struct(
        metadata=_OBJECT_META,
        spec=_struct(ports=_merge("port")),
        status=_struct(conditions=_CONDITIONS),
    ),
    "Deployment": _struct(
        metadata=_OBJECT_META,
        spec=_struct(template=_struct(metadata=_OBJECT_META, spec=_POD_SPEC)),
        status=_struct(conditions=_CONDITIONS),
    ),
    "ValidatingWebhookConfiguration": _WEBHOOKS,
    "MutatingWebhookConfiguration": _WEBHOOKS,
    **dict.fromkeys(
        (
            "Secret",
            "ConfigMap",
            "Event",
            "ResourceQuota",
            "LimitRange",
            "Role",
            "RoleBinding",
            "ClusterRole",
            "ClusterRoleBinding",
            "NetworkPolicy",
            "Lease",
            "CustomResourceDefinition",
        ),
        _PLAIN,
    ),
}
_UNKNOWN = _Field()


def strategic_merge_patch(
    target: dict[str, Any], patch: dict[str, Any], kind: str
) -> dict[str, Any]:
    """Apply a strategic merge patch as apimachinery's strategicpatch does on the server side.

    Maps merge, null deletes, lists tagged patchStrategy=merge merge by their patchMergeKey
    (or as sets of scalars), other lists are replaced; the directives $patch, $retainKeys,
    $deleteFromPrimitiveList/<f> and $setElementOrder/<f> work as kubectl expects.
    """
    schema = _SCHEMAS.get(kind)
    if schema is None:
        raise PatchError(f"strategic merge patch is not supported for kind {kind}")
    if not isinstance(patch, dict):
        raise PatchError("invalid JSON document")
    return _merge_map(clone(target), clone(patch), schema)


def _merge_map(original: dict[str, Any], patch: dict[str, Any], schema: _Field) -> dict[str, Any]:
    """Merge `patch` into `original` (both owned by the caller, so mutated in place)."""
    if _PATCH in patch:
        directive = patch.pop(_PATCH)
        if directive == "replace":
            return _merge_map({}, patch, schema)
        if directive == "delete":
            return {}
        raise PatchError(f"unknown patch type: {directive} in map: {patch}")
    _retain_keys(original, patch)
    for order_key in [key for key in patch if key.startswith(_SET_ORDER)]:
        _set_element_order(original, patch, order_key, schema)
    for key, value in patch.items():
        if key.startswith(_DELETE_FROM):
            _delete_from_list(original, _directive_field(key, _DELETE_FROM), value)
        elif value is None:
            original.pop(key, None)
        else:
            original[key] = _merge_value(original.get(key), value, schema.fields.get(key, _UNKNOWN))
    return original


def _merge_value(current: Any, value: Any, meta: _Field) -> Any:
    """A value arriving at a key: merged into what is there if both are maps or merge lists."""
    if isinstance(value, dict):
        return _merge_map(current if isinstance(current, dict) else {}, value, meta)
    if isinstance(value, list) and meta.merge:
        return _merge_list(current if isinstance(current, list) else [], value, meta)
    return value


def _directive_field(key: str, prefix: str) -> str:
    name = key[len(prefix) :]
    if not name:
        what = "primitive list" if prefix == _DELETE_FROM else "setElementOrder list"
        raise PatchError(f"invalid patch format of {what}")
    return name


def _retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    """$retainKeys: keys of the live map not listed are cleared (kubectl sends it for fields with
    the retainKeys strategy, such as a Deployment's strategy, so an old rollingUpdate goes away)."""
    if _RETAIN_KEYS not in patch:
        return
    retained = patch.pop(_RETAIN_KEYS)
    if not isinstance(retained, list):
        raise PatchError("invalid patch format of retainKeys")
    for key, value in patch.items():
        directive = key.startswith((_DELETE_FROM, _SET_ORDER))
        if value is not None and not directive and key not in retained:
            raise PatchError("invalid patch format of retainKeys")
    for key in [key for key in original if key not in retained]:
        del original[key]


def _delete_from_list(original: dict[str, Any], name: str, values: Any) -> None:
    if not isinstance(values, list):
        raise PatchError("invalid patch format of primitive list")
    current = original.get(name)
    if isinstance(current, list):
        doomed = {_identity(value, None) for value in values}
        original[name] = [item for item in current if _identity(item, None) not in doomed]


def _set_element_order(
    original: dict[str, Any], patch: dict[str, Any], order_key: str, schema: _Field
) -> None:
    """$setElementOrder/<f>: merge the list as usual, then order it as the patch says.

    Items named in the order come in that order; items only the server has keep their place
    relative to them, as apimachinery's normalizeElementOrder does.
    """
    order = patch.pop(order_key)
    name = _directive_field(order_key, _SET_ORDER)
    if not isinstance(order, list):
        raise PatchError("invalid patch format of setElementOrder list")
    meta = schema.fields.get(name, _UNKNOWN)
    current = original.get(name)
    change = patch.pop(name, None)
    if current is not None and not isinstance(current, list):
        raise PatchError(f"invalid value for {name}: expected a list")
    if change is not None and not isinstance(change, list):
        raise PatchError(f"invalid value for {name}: expected a list")
    if change is not None:
        _check_order(change, order, meta.key)
    if current is None and change is None:
        return
    if change is None:
        merged = current or []
    elif current is None:
        merged = _merge_list([], change, meta) if meta.merge else change
    else:
        merged = _merge_list(current, change, meta) if meta.merge else change
    original[name] = _ordered(merged, order, current or [], meta.key)


def _check_order(change: list[Any], order: list[Any], key: str | None) -> None:
    """The patch's own items must appear in the order list, in the same relative order."""
    if not order:
        return
    wanted = [_identity(item, key) for item in order]
    position = 0
    for item in change:
        if isinstance(item, dict) and _PATCH in item:
            continue
        ident = _identity(item, key)
        while position < len(wanted) and wanted[position] != ident:
            position += 1
        if position == len(wanted):
            raise PatchError(
                f"The order in patch list:\n{change}\n doesn't match {_SET_ORDER} list:\n{order}\n"
            )
        position += 1


def _merge_list(original: list[Any], patch: list[Any], meta: _Field) -> list[Any]:
    """A list tagged patchStrategy=merge: a set of scalars, or maps matched by the merge key."""
    if not original and not patch:
        return original
    items = original + patch
    if any(isinstance(item, list) for item in items):
        raise PatchError("lists of lists are not supported")
    if not any(isinstance(item, dict) for item in items):
        merged = _dedupe(items)
        return _ordered(merged, patch, original, None)
    if meta.key is None:
        raise PatchError("cannot merge lists without merge key")
    original, patch = _special_elements(original, patch, meta.key)
    merged = list(original)
    for item in patch:
        if not isinstance(item, dict) or meta.key not in item:
            raise PatchError(f"map: {item} does not contain declared merge key: {meta.key}")
        position = _position(merged, item[meta.key], meta.key)
        if position is None:
            merged.append(_merge_map({}, item, meta))
        else:
            merged[position] = _merge_map(merged[position], item, meta)
    return _ordered(merged, patch, original, meta.key)


def _special_elements(
    original: list[Any], patch: list[Any], key: str
) -> tuple[list[Any], list[Any]]:
    """Elements carrying $patch: delete drops matching items, replace discards the live list."""
    plain: list[Any] = []
    replace = False
    for item in patch:
        if not isinstance(item, dict) or _PATCH not in item:
            plain.append(item)
            continue
        directive = item[_PATCH]
        if directive == "delete":
            if key not in item:
                raise PatchError(f"map: {item} does not contain declared merge key: {key}")
            original = [
                live
                for live in original
                if not (isinstance(live, dict) and _same(live.get(key), item[key]))
            ]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise PatchError("merging lists cannot yet be specified in the patch")
        else:
            raise PatchError(f"unknown patch type: {directive} in map: {item}")
    if replace:
        return plain, []
    return original, plain


def _ordered(merged: list[Any], order: list[Any], server: list[Any], key: str | None) -> list[Any]:
    """Interleave items the patch names (in its order) with server-only items (in theirs).

    A server-only item goes before a patch item only when the live list had it earlier, which
    is why an item new to the list comes first unless kubectl sent $setElementOrder.
    """
    in_order = [_identity(item, key) for item in order]
    in_server = [_identity(item, key) for item in server]
    named = [item for item in merged if _identity(item, key) in in_order]
    others = [item for item in merged if _identity(item, key) not in in_order]
    named.sort(key=lambda item: _rank(in_order, _identity(item, key)))
    others.sort(key=lambda item: _rank(in_server, _identity(item, key)))
    result: list[Any] = []
    while named and others:
        left = _rank(in_server, _identity(others[0], key), missing=-1)
        right = _rank(in_server, _identity(named[0], key), missing=-1)
        take_left = left >= 0 and right >= 0 and left < right
        result.append(others.pop(0) if take_left else named.pop(0))
    return result + named + others


def _rank(idents: list[Any], ident: Any, missing: int | None = None) -> int:
    if ident in idents:
        return idents.index(ident)
    return len(idents) if missing is None else missing


def _identity(item: Any, key: str | None) -> Any:
    """What identifies a list item: its merge key's value, or the scalar itself (typed, so that
    true and 1 stay different as they do in Go)."""
    value = item.get(key) if key is not None and isinstance(item, dict) else item
    if isinstance(value, (dict, list)):
        return ("json", repr(value))
    return (type(value) is bool, value)


def _same(left: Any, right: Any) -> bool:
    return _identity(left, None) == _identity(right, None)


def _position(items: list[Any], value: Any, key: str) -> int | None:
    for index, item in enumerate(items):
        if isinstance(item, dict) and key in item and _same(item[key], value):
            return index
    return None


def _dedupe(items: list[Any]) -> list[Any]:
    seen: list[Any] = []
    result = []
    for item in items:
        ident = _identity(item, None)
        if ident not in seen:
            seen.append(ident)
            result.append(item)
    return result
