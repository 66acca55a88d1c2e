"""The quota webhook's ledger: usage as last seen, plus what it admitted that is not seen yet.

When the webhook allows a ResourceQuota status update, the API server writes it a moment later
and the webhook's cache shows it later still. A decision about a sibling namespace taken in
between must count it, or two writes that each fit alone would both pass. So every allowed
growth is kept as a reservation on that ResourceQuota until the cache shows the quota at a
newer resourceVersion than the one the update was made against: from then on the write has
either landed (the cache shows it) or lost the race to another write at that version (which
the webhook saw and reserved too), since the API server updates a ResourceQuota status only
with its resourceVersion as a precondition. A write refused later on in the admission chain
never lands, and nothing in the cache says so: after ``ttl``, longer than any request may take,
such a reservation is ``expired`` and the caller reads the quota from the API (``confirm``).
That read, not the clock alone, settles it, because a cache that lags by more than ``ttl``
(a watch that broke) would otherwise make a landed write vanish from the count.

While reservations are pending, each resource of a ResourceQuota counts at the largest of what
the cache shows and what any pending reservation would make it: the ledger may overstate use
for a moment, never understate it. Decisions must be taken one at a time (the caller holds a
lock across ``usage`` and ``reserve``). No clock here: the caller passes the time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from libaccurate.quantity import Quantity
from libaccurate.quota import Counted

QuotaKey = tuple[str, str]
ResourceList = Mapping[str, Quantity]
# kube-apiserver gives up on a request after 60 s; a reservation outlives it.
TTL = 75.0


@dataclass(frozen=True)
class Reservation:
    """Usage the webhook allowed a ResourceQuota to record, made against ``version``."""

    version: str
    used: ResourceList
    at: float
    scope: str = ""


@dataclass(frozen=True)
class Seen:
    """A ResourceQuota as the cache shows it: its resourceVersion, recorded usage and what it
    counts (``quota.scope_key``)."""

    version: str
    used: ResourceList
    scope: str = ""


Lookup = Callable[[QuotaKey], "Seen | None"]
# The names of the ResourceQuotas the cache holds in a namespace.
Listing = Callable[[str], Iterable[str]]


def _newer(seen: str, reserved: str) -> bool:
    """Whether the cache has gone past the version a reservation was made against.

    resourceVersions are etcd revisions on every API server in use, so they compare as
    numbers; one that is not a number is never taken as newer, and the reservation waits for
    its expiry instead.
    """
    return seen.isdigit() and reserved.isdigit() and int(seen) > int(reserved)


class Ledger:
    """Effective usage by ResourceQuota (namespace, name), for libaccurate.quota's rules."""

    def __init__(self, ttl: float = TTL) -> None:
        self.ttl = ttl
        self._cached: Lookup = _nothing
        self._listing: Listing = _none
        # Quotas read from the API because a reservation expired, until the cache catches up.
        self._live: dict[QuotaKey, Seen] = {}
        self._pending: dict[QuotaKey, list[Reservation]] = {}

    def sync(self, cached: Lookup, listing: Listing | None = None) -> None:
        """Take the cache's picture (lookups, as the cache is large and changes while the
        webhook runs: one by quota, ``listing`` by namespace) and drop the reservations it has
        made obsolete."""
        self._cached = cached
        self._listing = listing or _none
        for key, live in list(self._live.items()):
            shown = cached(key)
            if shown is not None and not _newer(live.version, shown.version):
                del self._live[key]
        for key in list(self._pending):
            self._settle(key, lambda r, shown: _newer(shown.version, r.version))

    def expired(self, now: float) -> list[QuotaKey]:
        """The quotas with a reservation older than ``ttl``: read them, then ``confirm``."""
        return sorted(
            key for key, kept in self._pending.items() if any(now - r.at >= self.ttl for r in kept)
        )

    def confirm(self, key: QuotaKey, live: Seen | None, now: float) -> None:
        """Take a quota as the API has it now (None: gone). A reservation made against an
        older version is settled; one past ``ttl`` made against this very version is a write
        that never landed and never will."""
        if live is None:
            self._pending.pop(key, None)
            return
        self._live[key] = live
        self._settle(
            key,
            lambda r, shown: (
                _newer(shown.version, r.version)
                or (now - r.at >= self.ttl and shown.version == r.version)
            ),
        )

    def reserve(
        self, key: QuotaKey, version: str, used: ResourceList, now: float, scope: str = ""
    ) -> None:
        """Count ``used`` for ``key`` (a quota counting what ``scope`` selects) until the cache
        shows a version newer than ``version``."""
        reservation = Reservation(version, dict(used), now, scope)
        self._pending.setdefault(key, []).append(reservation)

    @property
    def pending(self) -> int:
        return sum(len(r) for r in self._pending.values())

    @property
    def differing(self) -> frozenset[QuotaKey]:
        """The quotas for which ``get`` may say otherwise than the cache: those with pending
        reservations or read live. Few, whatever the cluster's size: the writes in flight."""
        return frozenset(self._pending.keys() | self._live.keys())

    def get(self, key: QuotaKey) -> ResourceList | None:
        """What ``key`` counts as using: per resource, the largest of what is seen and what
        any pending reservation would make it; None when nothing is known of it."""
        seen = self._seen(key)
        reservations = self._pending.get(key)
        if not reservations:
            return None if seen is None else seen.used
        candidates = [r.used for r in reservations]
        if seen is not None:
            candidates.append(seen.used)
        largest: dict[str, Quantity] = {}
        for used in candidates:
            for resource, quantity in used.items():
                if resource not in largest or quantity > largest[resource]:
                    largest[resource] = quantity
        return largest

    def counted_in(self, namespace: str, /) -> list[Counted]:
        """What each ResourceQuota of ``namespace`` counts as using (``get``), with what it
        counts: a quota.Usage."""
        names = dict.fromkeys(self._listing(namespace))
        names.update(
            dict.fromkeys(n for ns, n in self._pending.keys() | self._live if ns == namespace)
        )
        found = []
        for name in names:
            key = (namespace, name)
            used = self.get(key)
            if used is None:
                continue
            seen = self._seen(key)
            found.append(Counted(seen.scope if seen else self._pending[key][0].scope, used))
        return found

    def _settle(self, key: QuotaKey, settled: Callable[[Reservation, Seen], bool]) -> None:
        shown = self._seen(key)
        kept = [r for r in self._pending[key] if shown is None or not settled(r, shown)]
        if kept:
            self._pending[key] = kept
        else:
            del self._pending[key]

    def _seen(self, key: QuotaKey) -> Seen | None:
        """The freshest picture of a quota: the cache's, or a live read that is newer."""
        return self._live.get(key) or self._cached(key)


def _nothing(key: QuotaKey) -> Seen | None:
    return None


def _none(namespace: str) -> Iterable[str]:
    return ()
