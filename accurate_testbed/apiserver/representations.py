"""Which form of an object or list a request's Accept header asks for, as kube-apiserver
negotiates it (handlers/negotiation and handlers/response.go).

A clause such as ``application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`` asks for a
transform; the server serves Table, PartialObjectMetadata and PartialObjectMetadataList of
meta.k8s.io v1 and v1beta1 for every resource, built-in or custom. Clauses naming another
transform are skipped, so a client lists its fallback after them (client-go's metadata client
ends with plain ``application/json``); when nothing is left the answer is 406. A transform that
does not fit what was asked for (the list form on a GET, the object form on a LIST) is a 406 too.
"""

from __future__ import annotations

from typing import Any

from accurate_testbed.apiserver.errors import ApiError

TABLE = "Table"
METADATA = "PartialObjectMetadata"
METADATA_LIST = "PartialObjectMetadataList"
_TRANSFORMS = (TABLE, METADATA, METADATA_LIST)
_GROUP = "meta.k8s.io"
_VERSIONS = ("v1", "v1beta1")
_SERVED = "application/json, application/yaml, application/vnd.kubernetes.protobuf"


def negotiate(accept: str) -> tuple[str, str] | None:
    """The transform the first servable clause of ``accept`` asks for, as (kind, version), or
    None for the plain object; raises 406 when no clause can be served."""
    clauses = [clause for clause in accept.split(",") if clause.strip()]
    for clause in clauses or [""]:
        parameters = _parameters(clause)
        target = parameters.get("as")
        if target is None:
            return None
        version = parameters.get("v", "")
        if target in _TRANSFORMS and parameters.get("g") == _GROUP and version in _VERSIONS:
            return target, version
    raise not_acceptable(f"only the following media types are accepted: {_SERVED}")


def not_acceptable(message: str) -> ApiError:
    return ApiError(406, "NotAcceptable", message)


def as_metadata(obj: dict[str, Any], version: str) -> dict[str, Any]:
    """The object's PartialObjectMetadata: its whole metadata (managed fields included)."""
    return {"kind": METADATA, "apiVersion": f"{_GROUP}/{version}", "metadata": obj["metadata"]}


def as_metadata_list(listed: dict[str, Any], version: str) -> dict[str, Any]:
    """The list as a PartialObjectMetadataList: the list's metadata, each item's metadata."""
    return {
        "kind": METADATA_LIST,
        "apiVersion": f"{_GROUP}/{version}",
        "metadata": listed["metadata"],
        "items": [as_metadata(item, version) for item in listed["items"]],
    }


def _parameters(clause: str) -> dict[str, str]:
    """The media type's parameters (``as``, ``g``, ``v``), names lower-cased as Go's
    mime.ParseMediaType leaves them."""
    parameters = {}
    for part in clause.split(";")[1:]:
        name, _, value = part.partition("=")
        parameters[name.strip().lower()] = value.strip()
    return parameters
