"""The admission webhooks: the namespace validator and the SubNamespace mutator and validator.

Each unwraps its AdmissionReview (controller.reviews), asks libaccurate's rules with a forest
fresh enough for the request (controller.live) and wraps the verdict. A cluster that cannot be
read refuses the request rather than let it through unchecked.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from typing import Any

from controller.live import LiveReads
from controller.quota_admission import QuotaReviews
from controller.reviews import (
    AdmissionRequest,
    admission_request,
    admission_response,
    unavailable,
)
from libaccurate.admission import (
    UPDATE,
    Verdict,
    mutate_subnamespace,
    review_namespace,
    review_subnamespace,
)
from libaccurate.config import NamingPolicy
from libaccurate.constants import GROUP, SUBNAMESPACE_KIND
from libaccurate.forest import node_from_object
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
        quotas: QuotaReviews | None = None,
    ) -> None:
        self._live = live
        self._naming_policies = tuple(naming_policies)
        self._allow_cascading_deletion = allow_cascading_deletion
        self._tree_label_suffix = tree_label_suffix
        self._quotas = quotas

    def validate_namespace(self, body: Any) -> Answer:
        """The forest rules, then, for a namespace that gets a new parent, the hierarchical
        quotas of the new parent's chain."""
        request = admission_request(body, "", "Namespace", needs_name=True)
        try:
            judged = self._live.for_namespace(request.operation, request.new, request.old)
        except KubeError as error:
            return _unavailable(request, error)
        deciding = self._quotas.deciding() if self._quotas is not None else nullcontext(None)
        with deciding as moves, judged as forest:
            verdict = review_namespace(
                request.operation,
                request.new,
                request.old,
                forest,
                self._allow_cascading_deletion,
                self._tree_label_suffix,
            )
            moved = _new_parent(request.operation, request.new, request.old)
            if verdict.allowed and moves is not None and moved is not None:
                denial = moves(moved[0], moved[1], forest)
                verdict = verdict if denial is None else Verdict(False, denial)
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


def _new_parent(
    operation: str, new: Mapping[str, Any] | None, old: Mapping[str, Any] | None
) -> tuple[str, str] | None:
    """The namespace and its new parent, when an UPDATE gives it one."""
    if operation != UPDATE or new is None or old is None:
        return None
    after, before = node_from_object(new), node_from_object(old)
    if after.parent is None or after.parent == before.parent:
        return None
    return after.name, after.parent


def _unavailable(request: AdmissionRequest, error: KubeError) -> Answer:
    log.warning("cannot review a %s: %s", request.operation, error)
    message = f"cannot check the request against the cluster: {error}"
    return unavailable(request, message), False
