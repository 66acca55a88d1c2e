"""The admission webhooks: the namespace validator and the SubNamespace mutator and validator.

Each unwraps its AdmissionReview (controller.reviews), asks libaccurate's rules with a forest
fresh enough for the request (controller.live) and wraps the verdict. A cluster that cannot be
read refuses the request rather than let it through unchecked.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from controller.live import LiveReads
from controller.reviews import (
    AdmissionRequest,
    admission_request,
    admission_response,
    unavailable,
)
from libaccurate.admission import mutate_subnamespace, review_namespace, review_subnamespace
from libaccurate.config import NamingPolicy
from libaccurate.constants import GROUP, SUBNAMESPACE_KIND
from libaccurate.network.kube import KubeError

log = logging.getLogger(__name__)

Answer = tuple[dict[str, Any], bool]


class AdmissionWebhooks:
    """The three admission handlers; each takes a decoded body and returns the review to send
    back and whether the request was allowed, or raises BadRequest."""

    def __init__(
        self,
        live: LiveReads,
        naming_policies: Sequence[NamingPolicy],
        allow_cascading_deletion: bool,
        tree_label_suffix: str | None = None,
    ) -> None:
        self._live = live
        self._naming_policies = tuple(naming_policies)
        self._allow_cascading_deletion = allow_cascading_deletion
        self._tree_label_suffix = tree_label_suffix

    def validate_namespace(self, body: Any) -> Answer:
        request = admission_request(body, "", "Namespace", needs_name=True)
        try:
            judged = self._live.for_namespace(request.operation, request.new, request.old)
        except KubeError as error:
            return _unavailable(request, error)
        with judged as forest:
            verdict = review_namespace(
                request.operation,
                request.new,
                request.old,
                forest,
                self._allow_cascading_deletion,
                self._tree_label_suffix,
            )
        return admission_response(request, verdict), verdict.allowed

    def mutate_subnamespace(self, body: Any) -> Answer:
        request = admission_request(body, GROUP, SUBNAMESPACE_KIND, needs_name=False)
        verdict = mutate_subnamespace(request.operation, request.new or {})
        return admission_response(request, verdict), verdict.allowed

    def validate_subnamespace(self, body: Any) -> Answer:
        request = admission_request(body, GROUP, SUBNAMESPACE_KIND, needs_name=True)
        reviewed = request.new if request.new is not None else request.old
        try:
            judged = self._live.for_subnamespace(
                request.operation, reviewed or {}, self._allow_cascading_deletion
            )
        except KubeError as error:
            return _unavailable(request, error)
        with judged as forest:
            verdict = review_subnamespace(
                request.operation,
                request.new,
                request.old,
                forest,
                self._naming_policies,
                self._allow_cascading_deletion,
            )
        return admission_response(request, verdict), verdict.allowed


def _unavailable(request: AdmissionRequest, error: KubeError) -> Answer:
    log.warning("cannot review a %s: %s", request.operation, error)
    message = f"cannot check the request against the cluster: {error}"
    return unavailable(request, message), False
