"""The conversion webhook: SubNamespaces between v1, v2alpha1 and v2, with libaccurate's rules.

Every object of a ConversionReview is converted, or none: one object that cannot be converted
fails the whole request, as kube-apiserver expects.
"""

from __future__ import annotations

from typing import Any

from controller.reviews import conversion_request, conversion_response
from libaccurate.conversion import ConversionError, convert_subnamespace


def convert(body: Any) -> tuple[dict[str, Any], bool]:
    """The ConversionReview answering ``body``, and whether it succeeded; raises BadRequest."""
    request = conversion_request(body)
    try:
        converted = [convert_subnamespace(obj, request.desired) for obj in request.objects]
    except ConversionError as error:
        return conversion_response(request, None, str(error)), False
    return conversion_response(request, converted), True
