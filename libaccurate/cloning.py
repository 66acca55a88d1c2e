"""Copies of propagated objects: how a copy is made from its source and when it is still current.

A copy must be recognisable as a copy (``from`` and ``created-by``), must not carry what the API
server sets on its own, and must be comparable with what the server returns after defaulting
fields; the content hash tells a changed source (including a removed field) apart from such
defaults, so that removals reach copies too (DESIGN.md 4.3).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from libaccurate.config import Config
from libaccurate.constants import (
    ANNOTATION_FROM,
    ANNOTATION_PROPAGATE,
    ANNOTATION_SOURCE_HASH,
    CREATED_BY_VALUE,
    HNC_GROUP,
    LABEL_CREATED_BY,
)
from libaccurate.globs import match_any


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """The annotations of an object; absent and null both read as none."""
    return (obj.get("metadata") or {}).get("annotations") or {}


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """The labels of an object; absent and null both read as none."""
    return (obj.get("metadata") or {}).get("labels") or {}


def propagate_mode(obj: Mapping[str, Any]) -> str | None:
    """The object's ``propagate`` annotation, or None when it does not opt in."""
    return annotations_of(obj).get(ANNOTATION_PROPAGATE) or None


def copied_from(obj: Mapping[str, Any]) -> str | None:
    """The namespace a copy was made from, or None for an object a user made."""
    return annotations_of(obj).get(ANNOTATION_FROM) or None


def _hnc_key(key: str) -> bool:
    """Whether a label or annotation key is HNC's own: its prefix ends with HNC's group, the
    test HNC applies before copying (its ``canonical``), so that exceptions such as
    ``propagate.hnc.x-k8s.io/treeSelect`` stay on the source they narrow."""
    prefix, slash, _ = key.partition("/")
    return bool(slash) and prefix.endswith(HNC_GROUP)


def clone(source: Mapping[str, Any], target_namespace: str, config: Config) -> dict[str, Any]:
    """The object to write into ``target_namespace`` as the copy of ``source``.

    Of the metadata only the name, labels and annotations are taken: everything else there is
    set by the server (uid, resourceVersion, managedFields, ...) or belongs to the source alone
    (owners, finalizers), and so do HNC's keys, which HNC never copied either. The result
    carries the source-hash annotation already: callers compare and write it as a whole, and a
    source that is itself a copy must not pass its own hash on.
    """
    metadata = source.get("metadata") or {}
    result: dict[str, Any] = {
        key: copy.deepcopy(value)
        for key, value in source.items()
        if key not in ("metadata", "status")
    }
    if source.get("apiVersion") == "v1" and source.get("kind") == "ServiceAccount":
        # Token secrets listed here are specific to the source's namespace.
        result.pop("secrets", None)
    labels = {
        key: value
        for key, value in (metadata.get("labels") or {}).items()
        if not _hnc_key(key) and not match_any(config.propagate_label_key_excludes, key)
    }
    labels[LABEL_CREATED_BY] = CREATED_BY_VALUE
    annotations = {
        key: value
        for key, value in (metadata.get("annotations") or {}).items()
        if key != ANNOTATION_SOURCE_HASH
        and not _hnc_key(key)
        and not match_any(config.propagate_annotation_key_excludes, key)
    }
    annotations[ANNOTATION_FROM] = metadata.get("namespace", "")
    result["metadata"] = {
        "name": metadata.get("name", ""),
        "namespace": target_namespace,
        "labels": labels,
        "annotations": annotations,
    }
    annotations[ANNOTATION_SOURCE_HASH] = content_hash(result)
    return result


def retarget(copy_: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The same copy for a sibling namespace, sharing everything but the top-level metadata.

    Siblings get identical copies apart from ``metadata.namespace``, which the content hash
    leaves out, so a clone is made once per source and level and retargeted for each child.
    The result shares nested values with ``copy_``: both must be treated as read-only.
    """
    return {**copy_, "metadata": {**copy_["metadata"], "namespace": namespace}}


def content_hash(obj: Mapping[str, Any]) -> str:
    """A digest of a copy's content, independent of key order and of where it is stored.

    ``metadata.namespace`` and the source-hash annotation itself are left out: the first is
    given by the copy's location, the second cannot be part of what it digests.
    """
    metadata = dict(obj.get("metadata") or {})
    metadata.pop("namespace", None)
    annotations = {
        key: value
        for key, value in (metadata.get("annotations") or {}).items()
        if key != ANNOTATION_SOURCE_HASH
    }
    metadata["annotations"] = annotations
    canonical = json.dumps(
        {**obj, "metadata": metadata}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _is_empty(value: Any) -> bool:
    """Values that Go's ``omitempty`` drops, so a server may return them as absent."""
    return (
        value is None
        or value == {}
        or value == []
        or value == ""
        or value is False
        or (type(value) is int and value == 0)
    )


def contains(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` holds everything in ``expected``, allowing what the server adds.

    Maps may have extra keys (server defaults); a key the server dropped because its value was
    empty counts as present. Lists must match element by element with the same length, so an
    element appended by hand is a difference. Scalars must be equal, and a boolean never equals
    a number.
    """
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return False
        for key, value in expected.items():
            if key in actual:
                if not contains(value, actual[key]):
                    return False
            elif not _is_empty(value):
                return False
        return True
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(expected) != len(actual):
            return False
        return all(contains(e, a) for e, a in zip(expected, actual, strict=True))
    if type(expected) is bool or type(actual) is bool:
        return type(expected) is type(actual) and expected == actual
    return bool(expected == actual)
