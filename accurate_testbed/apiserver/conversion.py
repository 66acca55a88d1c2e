"""Serving a custom object at a version other than the one it was stored at, through its CRD's
conversion webhook, as apiextensions-apiserver's webhook converter does.

A CRD with ``spec.conversion.strategy: Webhook`` has its objects converted by a ConversionReview
(apiextensions.k8s.io/v1) POSTed to ``spec.conversion.webhook.clientConfig``, all the objects of
one read in one review. The answer is checked as the real converter checks it (kind and
apiVersion of the review, uid, ``result.status``, one object back for each sent, each of the
desired version), and only labels and annotations of the metadata are taken from it: the rest
stays as stored. Any failure makes the read a 500 (with no reason, as kube-apiserver sends an
error it did not type) naming the webhook's reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accurate_testbed.apiserver.errors import ApiError
from accurate_testbed.apiserver.uids import new_uid
from accurate_testbed.apiserver.webhooks import CallFailure, post

Obj = dict[str, Any]
REVIEW_API_VERSION = "apiextensions.k8s.io/v1"
# client-go's default for a webhook client without a timeout of its own.
TIMEOUT_SECONDS = 30
_METADATA_FROM_WEBHOOK = ("labels", "annotations")


@dataclass(frozen=True)
class ConversionWebhook:
    """Where a CRD's conversion webhook is called (an Endpoint for webhooks.post)."""

    url: str | None
    service: Mapping[str, Any] | None
    ca_bundle: str
    timeout_seconds: int = TIMEOUT_SECONDS

    @classmethod
    def of_crd(cls, crd: Mapping[str, Any]) -> ConversionWebhook | None:
        """The CRD's conversion webhook, or None when its strategy is None (the default)."""
        conversion = (crd.get("spec") or {}).get("conversion") or {}
        if conversion.get("strategy") != "Webhook":
            return None
        config = (conversion.get("webhook") or {}).get("clientConfig") or {}
        return cls(config.get("url"), config.get("service"), config.get("caBundle") or "")


def convert(
    webhook: ConversionWebhook, objects: Sequence[Obj], desired: str, listing: bool = False
) -> list[Obj]:
    """``objects`` (all of one kind and stored version) as ``desired``, or a 500 ApiError; the
    error names the kind as kube-apiserver does, as a ``...List`` for a ``listing``."""
    if not objects:
        return []
    kind = f"{objects[0].get('kind')}List" if listing else objects[0].get("kind")
    source = f"{objects[0].get('apiVersion')}, Kind={kind}"
    uid = new_uid()
    review = {
        "apiVersion": REVIEW_API_VERSION,
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": list(objects)},
    }
    try:
        converted = _converted_objects(uid, post(webhook, review))
    except CallFailure as failure:
        raise _failed(f"conversion webhook for {source} failed: {failure}") from failure
    if len(converted) != len(objects):
        raise _failed(
            f"conversion webhook for {source} returned {len(converted)} objects, "
            f"expected {len(objects)}"
        )
    return [
        _restored(original, new, desired) for original, new in zip(objects, converted, strict=True)
    ]


def _converted_objects(uid: str, review: Mapping[str, Any]) -> list[Any]:
    """getConvertedObjectsFromResponse: the objects of a usable answer, else a CallFailure."""
    kind = f"{review.get('apiVersion', '')}, Kind={review.get('kind', '')}"
    if kind != f"{REVIEW_API_VERSION}, Kind=ConversionReview":
        raise CallFailure(
            f"expected webhook response of {REVIEW_API_VERSION}, Kind=ConversionReview, got {kind}"
        )
    response = review.get("response")
    if not isinstance(response, dict):
        raise CallFailure("no response provided")
    if response.get("uid") != uid:
        raise CallFailure(f'expected response.uid="{uid}", got "{response.get("uid", "")}"')
    result = response.get("result") or {}
    if result.get("status") != "Success":
        raise CallFailure(
            result.get("message")
            or f"response.result.status was '{result.get('status', '')}', not 'Success'"
        )
    return list(response.get("convertedObjects") or [])


def _restored(original: Obj, converted: Any, desired: str) -> Obj:
    """The converted object with the stored metadata but its labels and annotations."""
    if not isinstance(converted, dict):
        raise _failed("conversion webhook returned an object that is not a JSON object")
    if converted.get("apiVersion") != desired:
        raise _failed(
            f"converted object has wrong apiVersion: expected {desired!r}, "
            f"got {converted.get('apiVersion')!r}"
        )
    if converted.get("kind") != original.get("kind"):
        raise _failed(f"converted object has wrong kind: {converted.get('kind')!r}")
    metadata = dict(original.get("metadata") or {})
    changed = converted.get("metadata") or {}
    for key in _METADATA_FROM_WEBHOOK:
        metadata.pop(key, None)
        if changed.get(key):
            metadata[key] = changed[key]
    return {**converted, "metadata": metadata}


def _failed(message: str) -> ApiError:
    """A conversion error as kube-apiserver answers it: code 500, no reason, the bare text."""
    return ApiError(500, "", message)
