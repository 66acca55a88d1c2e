"""The hierarchical quota webhook: judges updates of the status of the ResourceQuotas kept for
HRQs, which kube-apiserver's quota admission makes as part of every write it counts.

A refusal here refuses that write, with the HRQ's message. Decisions are taken one at a time,
on the webhook process's cache corrected by the ledger of what was admitted but is not in the
cache yet (libaccurate.quotaledger), so that concurrent writes in sibling namespaces never
both pass when only one fits; docs/hierarchical-quotas.md says why that is enough. The same
picture serves the namespace webhook's check of moves (``deciding``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NamedTuple

from controller.cache import HRQ_QUOTAS, HRQS, Cache
from controller.reviews import admission_request, admission_response, unavailable
from libaccurate import quota
from libaccurate.admission import ALLOWED, UPDATE, Verdict
from libaccurate.forest import Forest
from libaccurate.network.kube import ApiError, Kube, KubeError, resource_path
from libaccurate.quantity import ZERO, Quantity
from libaccurate.quotaledger import Ledger, Seen

Answer = tuple[dict[str, Any], bool]
Spec = tuple[Any, Any]


class Parsed(NamedTuple):
    """One cached HRQ object, what tells its spec apart, and what it parsed to (None: a spec
    that cannot be enforced)."""

    key: quota.QuotaKey
    obj: Mapping[str, Any]
    spec: Spec
    hrq: quota.Hrq | None


MoveCheck = Callable[[str, "str | None", Forest], "str | None"]
# kube-controller-manager's quota controller recounts what exists; refusing it would only make
# the status wrong (its own account, or the manager's without per-controller accounts).
RECOUNTERS = frozenset(
    {
        "system:serviceaccount:kube-system:resourcequota-controller",
        "system:kube-controller-manager",
    }
)

NOT_DECIDING = (
    "this replica does not decide hierarchical quotas now (another holds the quota Lease); "
    "try again"
)


class QuotaReviews:
    """The status-update verdicts and the ledger they share; safe to call from many threads."""

    def __init__(
        self,
        cache: Cache,
        kube: Kube,
        deciding: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cache = cache
        self._kube = kube
        self._deciding = deciding
        self._clock = clock
        self._ledger = Ledger()
        self._lock = threading.Lock()
        # Parsed statuses by quota, with the resourceVersion they were parsed at.
        self._parsed: dict[quota.QuotaKey, Seen] = {}
        # The HRQs as last parsed, and the cache generation they were parsed at.
        self._hrqs: tuple[int, quota.HrqIndex] = (-1, quota.HrqIndex(()))
        # Each HRQ parsed once per spec, by key (the cached object last looked at, unchanged
        # while it is the same object, its uid and generation, and what it parsed to).
        self._specs: dict[quota.QuotaKey, Parsed] = {}

    def validate_status(self, body: Any) -> Answer:
        request = admission_request(body, "", "ResourceQuota", needs_name=True)
        new, old = request.new or {}, request.old or {}
        if request.operation != UPDATE or request.user in RECOUNTERS:
            return admission_response(request, ALLOWED), True
        if not self._deciding():
            return unavailable(request, NOT_DECIDING), False
        verdict = self._judge(new, old)
        return admission_response(request, verdict), verdict.allowed

    def _judge(self, new: Mapping[str, Any], old: Mapping[str, Any]) -> Verdict:
        hrq_key = quota.hrq_of_quota(new)
        if hrq_key is None:
            return ALLOWED
        try:
            after = _used(new)
            before = _used(old)
        except quota.QuotaError as error:
            return Verdict(False, f"status.used cannot be read: {error}")
        metadata = new["metadata"]
        namespace, name = str(metadata.get("namespace") or ""), str(metadata["name"])
        with self._lock:
            now = self._clock()
            self._ledger.sync(self._seen)
            try:
                self._confirm_expired(now)
            except KubeError as error:
                message = f"cannot check the hierarchical quota against the cluster: {error}"
                return Verdict(False, message)
            with self._cache.reading() as forest:
                hrqs = self._current_hrqs()
                hrq = next((h for h in hrqs.in_namespace(hrq_key[0]) if h.key == hrq_key), None)
                if hrq is None:
                    return ALLOWED
                denial = quota.review_usage(
                    forest, hrqs, self._ledger, namespace, hrq, before, after
                )
            if denial is not None:
                return Verdict(False, denial)
            version = str(metadata.get("resourceVersion") or "")
            if any(q.value > before.get(r, ZERO).value for r, q in after.items()):
                self._ledger.reserve((namespace, name), version, after, now)
        return ALLOWED

    @contextmanager
    def deciding(self) -> Iterator[MoveCheck]:
        """Hold the decisions still while a namespace review runs, and give it the check of a
        move. Enter this before the cache's forest: decisions take the two in that order."""
        with self._lock:
            self._ledger.sync(self._seen)
            yield self._move_denial

    def _move_denial(self, name: str, parent: str | None, forest: Forest) -> str | None:
        """Why namespace ``name`` may not move under ``parent`` (``forest`` as it is, without
        the move), or None."""
        return quota.review_move(forest, self._current_hrqs(), self._ledger, name, parent)

    def _current_hrqs(self) -> quota.HrqIndex:
        """The cached HRQs, indexed again only when one was added, removed or got a new spec.

        The keeper writes HRQ statuses after nearly every counted write; a status write does
        not move ``metadata.generation``, so it costs a look at each HRQ's generation, not a
        parse of every HRQ.
        """
        generation = self._cache.generation(HRQS)
        if self._hrqs[0] == generation:
            return self._hrqs[1]
        objects = self._cache.items(HRQS)
        changed = len(objects) != len(self._specs)
        seen = {id(p.obj): p for p in self._specs.values()}
        specs = {}
        for obj in objects:
            known = seen.get(id(obj))
            if known is None or known.obj is not obj:
                key, spec = _spec_of(obj)
                before = self._specs.get(key)
                same = before is not None and before.spec == spec
                known = Parsed(key, obj, spec, before.hrq if same and before else _parsed(obj))
                changed = changed or not same
            specs[known.key] = known
        self._specs = specs
        index = self._hrqs[1]
        if changed:
            index = quota.HrqIndex(p.hrq for p in specs.values() if p.hrq is not None)
        self._hrqs = (generation, index)
        return index

    def _seen(self, key: quota.QuotaKey) -> Seen | None:
        """A cached quota's version and usage, parsed once per version."""
        obj = self._cache.get(HRQ_QUOTAS, *key)
        if obj is None:
            self._parsed.pop(key, None)
            return None
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        known = self._parsed.get(key)
        if known is None or known.version != version:
            known = Seen(version, quota.usage_of([obj]).get(key) or {})
            self._parsed[key] = known
        return known

    def _confirm_expired(self, now: float) -> None:
        """Read live the quotas whose reservations are too old to wait for the cache."""
        for namespace, name in self._ledger.expired(now):
            path = resource_path("", "v1", "resourcequotas", namespace, name)
            try:
                obj = self._kube.get(path)
            except ApiError as error:
                if not error.not_found:
                    raise
                self._ledger.confirm((namespace, name), None, now)
                continue
            version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            used = quota.usage_of([obj]).get((namespace, name)) or {}
            self._ledger.confirm((namespace, name), Seen(version, used), now)


def _spec_of(obj: Mapping[str, Any]) -> tuple[quota.QuotaKey, Spec]:
    """An HRQ's key, and what tells one spec of it from another: its uid and generation (the
    API server moves ``metadata.generation`` on every spec change, and never on a status
    write); without a generation, the spec itself."""
    metadata = obj.get("metadata") or {}
    key = (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
    generation = metadata.get("generation")
    return key, (metadata.get("uid"), generation if generation else obj.get("spec"))


def _parsed(obj: Mapping[str, Any]) -> quota.Hrq | None:
    try:
        return quota.read_hrq(obj)
    except quota.QuotaError:
        return None


def _used(obj: Mapping[str, Any]) -> dict[str, Quantity]:
    status = obj.get("status") or {}
    if not isinstance(status, Mapping):
        raise quota.QuotaError("status must be an object")
    return quota.read_resource_list(status.get("used"), "status.used")
