"""AdmissionReview and ConversionReview envelopes: read a request body, check it carries what the
rules read, and wrap answers again.

Bodies come from the network, so decoding is bounded: a body over MAX_BODY bytes or nested
deeper than MAX_DEPTH is refused before JSON is decoded (Python's decoder recurses, and a body a
few thousand brackets deep would otherwise exhaust the stack). Whatever is wrong with a request
raises BadRequest with a message naming the field, which the server answers with HTTP 400.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from libaccurate.admission import CREATE, DELETE, UPDATE, Verdict
from libaccurate.constants import SUBNAMESPACE_KIND

ADMISSION_REVIEW = "admission.k8s.io/v1"
CONVERSION_REVIEW = "apiextensions.k8s.io/v1"
OPERATIONS = (CREATE, UPDATE, DELETE)
# kube-apiserver caps a request body at 3 MiB and a review carries the object twice.
MAX_BODY = 8 * 1024 * 1024
# Kubernetes objects nest a few levels (managedFields' fieldsV1 a few more); this is ample.
MAX_DEPTH = 100

# A JSON string, quotes and escapes included; one left open runs to the end of the body. Every
# match attempt succeeds, so each byte is read once, whatever a hostile body holds.
_STRING = re.compile(rb'"[^"\\]*(?:\\(?:.|\Z)[^"\\]*)*(?:"|\Z)', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_NOT_BRACKETS_OR_QUOTES = bytes(b for b in range(256) if b not in b'[]{}"')
_ONE_KIND = bytes.maketrans(b"[]", b"{}")
# Bodies with more brackets than this are measured by the walk alone (see _depth).
_PASSES_UP_TO = 64 * 1024
_STEP = [0] * 256
_STEP[ord("{")], _STEP[ord("}")] = 1, -1


class BadRequest(Exception):
    """The request is not a review this webhook can answer (HTTP 400)."""


@dataclass(frozen=True)
class AdmissionRequest:
    """The parts of an AdmissionReview request that the rules read."""

    uid: str
    operation: str
    new: dict[str, Any] | None
    old: dict[str, Any] | None
    user: str = ""


def decode(body: bytes) -> Any:
    """The JSON value of a request body, within the bounds; raises BadRequest."""
    if len(body) > MAX_BODY:
        raise BadRequest(f"the request body is {len(body)} bytes, more than {MAX_BODY}")
    depth = _depth(body)
    if depth > MAX_DEPTH:
        raise BadRequest(f"the request body nests {depth} levels deep, more than {MAX_DEPTH}")
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as error:
        raise BadRequest(f"the request body is not valid JSON: {error}") from None


def _depth(body: bytes) -> int:
    """How deep the brackets outside strings nest, without recursion.

    Taking out every innermost pair (``{}`` once brackets are of one kind) empties balanced
    brackets in as many passes as they nest; each pass is one C-speed replace, and a review
    has a few hundred brackets nested about ten deep. Brackets that do not empty so
    (unbalanced, or deeper than the limit) are walked once instead, for the exact depth the
    refusal names, and so are more brackets than a review holds, so that a hostile body costs
    one walk, not a hundred passes.
    """
    brackets = _brackets_outside_strings(body)
    depth = _emptied_in(brackets) if len(brackets) <= _PASSES_UP_TO else None
    if depth is None:
        depth = max(accumulate(map(_STEP.__getitem__, brackets)), default=0)
    return depth


def _emptied_in(brackets: bytes) -> int | None:
    """In how many passes taking out the innermost pairs empties ``brackets``, or None if
    they do not empty in MAX_DEPTH + 1."""
    depth = 0
    while brackets and depth <= MAX_DEPTH:
        inner = brackets.replace(b"{}", b"")
        if len(inner) == len(brackets):
            return None
        brackets, depth = inner, depth + 1
    return None if brackets else depth


def _brackets_outside_strings(body: bytes) -> bytes:
    """The brackets outside strings, all of one kind (``{`` opens, ``}`` closes).

    Without a backslash (nearly every review) no quote is escaped, so quotes pair up in order:
    keeping only quotes and brackets, every string without a bracket in it becomes ``""``, and
    taking those out leaves the brackets outside strings when no quote is left. A string that
    holds brackets sends the body to the slower cut into pieces between quotes, and one with
    escapes to the regular expression, ten times slower still.
    """
    if b"\\" in body:
        outside = _STRING.sub(b'""', body)
    else:
        outside = body.translate(None, _NOT_BRACKETS_OR_QUOTES).replace(b'""', b"")
        if b'"' in outside:
            outside = b"".join(body.split(b'"')[::2])
    return outside.translate(_ONE_KIND, _NOT_BRACKETS)


def admission_request(body: Any, group: str, kind: str, *, needs_name: bool) -> AdmissionRequest:
    """Check an AdmissionReview and return what the rules read; raises BadRequest."""
    request = _request(body, ADMISSION_REVIEW, "AdmissionReview")
    uid = _field(request, "uid", str, "request")
    operation = _field(request, "operation", str, "request")
    if operation not in OPERATIONS:
        raise BadRequest(
            f"request.operation must be one of {', '.join(OPERATIONS)}, not {operation!r}"
        )
    requested = _field(request, "kind", dict, "request")
    if (requested.get("group"), requested.get("kind")) != (group, kind):
        wanted = f"{group}/{kind}" if group else kind
        got = "/".join(str(requested.get(key) or "") for key in ("group", "version", "kind"))
        raise BadRequest(f"this webhook reviews {wanted} objects, not {got}")
    new = _object(request, "object", operation in (CREATE, UPDATE), operation, needs_name)
    old = _object(request, "oldObject", operation in (UPDATE, DELETE), operation, needs_name)
    if kind == SUBNAMESPACE_KIND:
        for obj, key in ((new, "object"), (old, "oldObject")):
            if obj is None:
                continue
            metadata = obj["metadata"]
            if metadata.get("namespace") is None:
                # kube-apiserver fills it in from the path; a request without it is malformed.
                metadata["namespace"] = _field(request, "namespace", str, "request")
            _field(metadata, "namespace", str, f"request.{key}.metadata")
    user_info = request.get("userInfo")
    user = str(user_info.get("username") or "") if isinstance(user_info, dict) else ""
    return AdmissionRequest(uid, operation, new, old, user)


def _object(
    request: Mapping[str, Any], key: str, wanted: bool, operation: str, needs_name: bool
) -> dict[str, Any] | None:
    """The object at ``key`` if the operation carries one, checked; raises BadRequest."""
    if not wanted:
        return None
    obj: dict[str, Any] = request.get(key)  # type: ignore[assignment]
    _check_object(obj, f"request.{key}", operation, needs_name)
    return obj


def _check_object(obj: Any, where: str, operation: str, needs_name: bool) -> None:
    """The object must carry the metadata the rules read, with the types they expect."""
    if not isinstance(obj, dict):
        raise BadRequest(f"{where} is required for {operation} and must be an object")
    metadata = _field(obj, "metadata", dict, where)
    if needs_name:
        _field(metadata, "name", str, f"{where}.metadata")
    for key in ("labels", "annotations"):
        _string_map(metadata.get(key), f"{where}.metadata.{key}")
    finalizers = metadata.get("finalizers")
    if finalizers is not None and not (isinstance(finalizers, list) and _strings(finalizers)):
        raise BadRequest(f"{where}.metadata.finalizers must be a list of strings")
    spec = obj.get("spec")
    if spec is not None:
        if not isinstance(spec, dict):
            raise BadRequest(f"{where}.spec must be an object")
        for key in ("labels", "annotations"):
            _string_map(spec.get(key), f"{where}.spec.{key}")


def _string_map(value: Any, where: str) -> None:
    if value is not None and not (isinstance(value, dict) and _strings(value.values())):
        raise BadRequest(f"{where} must be a map of strings")


def _strings(values: Iterable[Any]) -> bool:
    return all(isinstance(value, str) for value in values)


def admission_response(request: AdmissionRequest, verdict: Verdict) -> dict[str, Any]:
    """Denials carry code 403 and the rule's message, as controller-runtime's Denied does; a
    mutation carries a base64 JSON patch."""
    response: dict[str, Any] = {"uid": request.uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": verdict.message}
    if verdict.patch:
        patch = json.dumps(list(verdict.patch)).encode()
        response.update(patchType="JSONPatch", patch=base64.b64encode(patch).decode())
    return _review(ADMISSION_REVIEW, "AdmissionReview", response)


def unavailable(request: AdmissionRequest, message: str) -> dict[str, Any]:
    """A refusal because the cluster could not be read: code 500 tells clients (the controller
    among them) to try again."""
    response = {
        "uid": request.uid,
        "allowed": False,
        "status": {"code": 500, "reason": "InternalError", "message": message},
    }
    return _review(ADMISSION_REVIEW, "AdmissionReview", response)


@dataclass(frozen=True)
class ConversionRequest:
    """The parts of a ConversionReview request that conversion reads."""

    uid: str
    desired: str
    objects: list[dict[str, Any]]


def conversion_request(body: Any) -> ConversionRequest:
    """Check a ConversionReview; raises BadRequest."""
    request = _request(body, CONVERSION_REVIEW, "ConversionReview")
    uid = _field(request, "uid", str, "request")
    desired = _field(request, "desiredAPIVersion", str, "request")
    objects = _field(request, "objects", list, "request")
    if not all(isinstance(obj, dict) for obj in objects):
        raise BadRequest("request.objects must be a list of objects")
    return ConversionRequest(uid, desired, objects)


def conversion_response(
    request: ConversionRequest, converted: list[dict[str, Any]] | None, failure: str = ""
) -> dict[str, Any]:
    """All objects converted, or (``converted`` None) the reason none was."""
    response: dict[str, Any] = {"uid": request.uid}
    if converted is None:
        response["result"] = {"status": "Failure", "message": failure}
    else:
        response.update(convertedObjects=converted, result={"status": "Success"})
    return _review(CONVERSION_REVIEW, "ConversionReview", response)


def _review(api_version: str, kind: str, response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "response": response}


def _request(body: Any, api_version: str, kind: str) -> dict[str, Any]:
    """The ``request`` of a review envelope of the given type; raises BadRequest."""
    if not isinstance(body, dict):
        raise BadRequest(f"expected an {api_version} {kind}, got a JSON {type(body).__name__}")
    if (body.get("apiVersion"), body.get("kind")) != (api_version, kind):
        got = f"got apiVersion={body.get('apiVersion')!r}, kind={body.get('kind')!r}"
        raise BadRequest(f"expected an {api_version} {kind}, {got}")
    return dict(_field(body, "request", dict, kind))


_DESCRIBED: dict[type[Any], str] = {dict: "an object", list: "a list", str: "a non-empty string"}


def _field(parent: Mapping[str, Any], key: str, kind: type[Any], where: str) -> Any:
    """``parent[key]``, which must be a ``kind`` (a string must not be empty)."""
    value = parent.get(key)
    if not isinstance(value, kind) or (kind is str and not value):
        raise BadRequest(f"{where}.{key} is required and must be {_DESCRIBED[kind]}")
    return value


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    """A metav1 Status: kube-apiserver shows its message when a webhook call fails."""
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
