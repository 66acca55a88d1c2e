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
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any, NamedTuple

from controller.cache import HRQ_QUOTAS, HRQS, NAMESPACES, Cache, Feed
from controller.quota_sums import SubtreeSums
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


class ParsedHrqs:
    """The cached HRQs, each parsed once per spec, and their index by namespace.

    The keeper writes HRQ statuses after counted writes, and a status write does not move
    ``metadata.generation``. So ``current`` reads the cache's HRQs once, then follows its
    changes (a feed beside the one the reconcile loop or the reviews take theirs from) and
    looks only at the HRQs that changed: one is parsed again only when its uid or generation
    moved, and the index is built again only when an HRQ's spec changed, or an HRQ came or
    went. ``parsed`` is every cached HRQ as last looked at, by namespace and name (read only;
    the quota keeper plans from it).
    """

    def __init__(self) -> None:
        self.index = quota.HrqIndex(())
        self._by_key: dict[quota.QuotaKey, Parsed] = {}
        self.parsed: Mapping[quota.QuotaKey, Parsed] = MappingProxyType(self._by_key)
        # The cache's changes of HRQs since the last look; None before the first.
        self._changes: Feed | None = None

    def current(self, cache: Cache) -> quota.HrqIndex:
        """The HRQs ``cache`` holds: the first call reads them all, later ones only those
        that changed since (one cache per instance)."""
        if self._changes is None:
            self._changes = cache.follow_beside([HRQS])
            self.update(cache.items(HRQS))
            return self.index
        keys = self._changes.take().get(HRQS, ())
        if any([self._take(key, cache.get(HRQS, *key)) for key in keys]):
            self._reindex()
        return self.index

    def update(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """Hold exactly ``objects``."""
        held = {_spec_of(obj)[0]: obj for obj in objects}
        gone = [key for key in self._by_key if key not in held]
        changed = [self._take(key, obj) for key, obj in held.items()]
        changed += [self._take(key, None) for key in gone]
        if any(changed):
            self._reindex()

    def _take(self, key: quota.QuotaKey, obj: Mapping[str, Any] | None) -> bool:
        """Hold ``obj`` as HRQ ``key`` (None: it is gone); whether that changed its spec."""
        before = self._by_key.get(key)
        if obj is None:
            return self._by_key.pop(key, None) is not None
        spec = _spec_of(obj)[1]
        same = before is not None and before.spec == spec
        hrq = before.hrq if before is not None and same else _parsed(obj)
        self._by_key[key] = Parsed(key, obj, spec, hrq)
        return not same

    def _reindex(self) -> None:
        self.index = quota.HrqIndex(p.hrq for p in self._by_key.values() if p.hrq)


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
        # What the cache saw change since the last decision; the HRQs as last parsed; each
        # HRQ's subtree sum, kept from those changes (a review reads it).
        self._changes = cache.follow([NAMESPACES, HRQ_QUOTAS])
        self._hrqs = ParsedHrqs()
        self._sums = SubtreeSums(cache)

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
        if quota.hrq_of_quota(new) is None:
            return ALLOWED
        try:
            after = _used(new)
            before = _used(old)
        except quota.QuotaError as error:
            return Verdict(False, f"status.used cannot be read: {error}")
        metadata = new["metadata"]
        namespace, name = str(metadata.get("namespace") or ""), str(metadata["name"])
        scope = quota.quota_scope(new)
        with self._lock:
            now = self._clock()
            self._ledger.sync(self._seen, self._sums.names_in)
            try:
                self._confirm_expired(now)
            except KubeError as error:
                message = f"cannot check the hierarchical quota against the cluster: {error}"
                return Verdict(False, message)
            with self._cache.reading() as forest:
                hrqs = self._catch_up(forest)
                subtree_used = self._sums.reader(self._ledger.differing)
                denial = quota.review_usage(
                    forest, hrqs, self._ledger, namespace, scope, before, after, subtree_used
                )
            if denial is not None:
                return Verdict(False, denial)
            version = str(metadata.get("resourceVersion") or "")
            if any(q > before.get(r, ZERO) for r, q in after.items()):
                self._ledger.reserve((namespace, name), version, after, now, scope)
        return ALLOWED

    @contextmanager
    def deciding(self) -> Iterator[MoveCheck]:
        """Hold the decisions still while a namespace review runs, and give it the check of a
        move. Enter this before the cache's forest: decisions take the two in that order."""
        with self._lock:
            self._ledger.sync(self._seen, self._sums.names_in)
            yield self._move_denial

    def _move_denial(self, name: str, parent: str | None, forest: Forest) -> str | None:
        """Why namespace ``name`` may not move under ``parent`` (``forest`` as it is, without
        the move), or None."""
        return quota.review_move(
            forest, self._hrqs.current(self._cache), self._ledger, name, parent
        )

    def _catch_up(self, forest: Forest) -> quota.HrqIndex:
        """Take in what the cache saw change since the last decision, ``forest`` being the
        cache's, held still: the HRQs (looked at only where they changed), then the subtree
        sums."""
        changes = self._changes.take()
        hrqs = self._hrqs.current(self._cache)
        self._sums.catch_up(forest, hrqs, changes, self._seen)
        return hrqs

    def _seen(self, key: quota.QuotaKey) -> Seen | None:
        """A cached quota's version and usage, parsed once per version."""
        obj = self._cache.get(HRQ_QUOTAS, *key)
        if obj is None:
            self._parsed.pop(key, None)
            return None
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        known = self._parsed.get(key)
        if known is None or known.version != version:
            counted = quota.counted_quota(obj)
            known = Seen(version, counted.used, counted.scope)
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
            counted = quota.counted_quota(obj)
            self._ledger.confirm((namespace, name), Seen(version, counted.used, counted.scope), now)


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
