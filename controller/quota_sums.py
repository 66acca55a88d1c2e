"""The quota webhook's per-HRQ subtree sums, kept current from its cache's changes, so that a
review reads an HRQ's sum instead of adding up its subtree (the rules: libaccurate.quotasums).

The sums are those of a picture held here: a forest of its own, what each kept ResourceQuota
counts, and the HRQs. ``catch_up``, called while the cache is held still,
takes what the cache has seen change since the last call: the ResourceQuotas, then the
namespaces, then the HRQs, each against the picture the step before left. Afterwards the
picture is the cache's and the sums are what a recount over it would find. The first call
counts everything once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from controller.cache import HRQ_QUOTAS, NAMESPACES, Cache, Key
from libaccurate import quota, quotasums
from libaccurate.forest import Forest
from libaccurate.quantity import Quantity
from libaccurate.quota import Counted, Hrq, HrqIndex, QuotaKey, SubtreeUsed, Usage
from libaccurate.quotaledger import Seen

Lookup = Callable[[QuotaKey], "Seen | None"]


class SubtreeSums:
    """Per HRQ, what its subtree's ResourceQuotas record, as of the last ``catch_up``."""

    def __init__(self, cache: Cache) -> None:
        self._cache = cache
        # None until everything is counted the first time.
        self._forest: Forest | None = None
        self._counted: dict[str, dict[str, Counted]] = {}
        self._index = HrqIndex(())
        self._by_key: dict[QuotaKey, Hrq] = {}
        self._sums: dict[QuotaKey, dict[str, Quantity]] = {}

    def catch_up(
        self,
        forest: Forest,
        hrqs: HrqIndex,
        changes: Mapping[str, Iterable[Key]],
        seen: Lookup,
    ) -> None:
        """Take in ``changes`` (the keys of what changed since the last call, by kind, as a
        cache Feed hands them over): ``forest`` and ``hrqs`` as cached, ``seen`` what a cached
        ResourceQuota records. Call it while the cache is held still (``reading``)."""
        if self._forest is None:
            self._count_all(forest, hrqs, seen)
            return
        for namespace, name in sorted(changes.get(HRQ_QUOTAS, ())):
            self._take_quota(namespace, name, seen)
        names = [name for _, name in changes.get(NAMESPACES, ())]
        if names:
            self._sums.update(
                quotasums.namespaces_changed(
                    self._forest, forest, names, self._counted, self._index, self._sums
                )
            )
            for name in names:
                node = forest.get(name)
                if node is None:
                    self._forest.remove(name)
                else:
                    self._forest.upsert(node)
        if hrqs is not self._index:
            self._take_hrqs(hrqs)

    def counted_in(self, namespace: str, /) -> Iterable[Counted]:
        """What the sums hold for the ResourceQuotas of one namespace (a quota.Usage)."""
        return self._counted.get(namespace, {}).values()

    def names_in(self, namespace: str) -> Iterable[str]:
        """The ResourceQuotas the sums hold in one namespace (the ledger's listing)."""
        return self._counted.get(namespace, {}).keys()

    def reader(self, differing: Iterable[QuotaKey]) -> SubtreeUsed:
        """What an HRQ's subtree uses by the ``usage`` given (the ledger), which differs from
        what the sums hold only at the quotas ``differing``: for quota.review_usage."""
        namespaces = tuple({namespace for namespace, _ in differing})

        def subtree_used(
            forest: Forest, hrq: Hrq, usage: Usage, without: str | None = None
        ) -> dict[str, Quantity]:
            return quotasums.subtree_used(forest, hrq, self._sums, self, usage, namespaces, without)

        return subtree_used

    def _count_all(self, forest: Forest, hrqs: HrqIndex, seen: Lookup) -> None:
        self._forest = forest.copy()
        self._counted = {}
        for item in self._cache.items(HRQ_QUOTAS):
            metadata = item.get("metadata") or {}
            key = (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
            found = seen(key)
            if found is not None:
                self._counted.setdefault(key[0], {})[key[1]] = Counted(found.scope, found.used)
        self._index, self._by_key, self._sums = HrqIndex(()), {}, {}
        self._take_hrqs(hrqs)

    def _take_quota(self, namespace: str, name: str, seen: Lookup) -> None:
        """One ResourceQuota that changed or went."""
        assert self._forest is not None
        found = seen((namespace, name))
        kept = self._counted.setdefault(namespace, {})
        before = list(kept.values())
        kept.pop(name, None)
        if found is not None:
            kept[name] = Counted(found.scope, found.used)
        after = list(kept.values())
        if not kept:
            del self._counted[namespace]
        self._sums.update(
            quotasums.quota_changed(self._forest, self._index, namespace, before, after, self._sums)
        )

    def _take_hrqs(self, hrqs: HrqIndex) -> None:
        """HRQs that came, went or changed their spec: each new one summed once."""
        assert self._forest is not None
        now = {hrq.key: hrq for hrq in hrqs}
        for key in self._by_key.keys() - now.keys():
            del self._sums[key]
        for key, hrq in now.items():
            if self._by_key.get(key) != hrq:
                self._sums[key] = quota.tree_used(self._forest, hrq, self)
        self._index, self._by_key = hrqs, now

    @property
    def sums(self) -> Mapping[QuotaKey, Mapping[str, Quantity]]:
        """Per HRQ, the sum over its subtree of each resource it limits."""
        return self._sums
