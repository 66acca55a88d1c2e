"""Which HRQs a pass of part of the cluster must plan: those whose subtree meets the pass's
scope, as the forest is now or as it was when each was last planned.

A pass prompted by changes plans the namespaces they affect (``libaccurate.planner.affected``:
each changed namespace and everything below it; a kept ResourceQuota's namespace alone). What
an HRQ needs (its ResourceQuotas, its sums, whether each namespace counts yet) depends only on
the namespaces of its subtree and on the HRQs above it. So a change in namespace N concerns the
HRQs on N's chain of parents (N's own included: N is in their subtrees now, or the HRQ itself
changed) and the HRQs whose subtree held N when they were last planned (N moved out or was
deleted: their ResourceQuota there goes, and their sums drop N). An HRQ whose chain above
changed is inside the scope, since the scope holds everything below a change. A plan of
everything plans every HRQ and records every subtree afresh, so what this remembers can lag a
change only until the next such pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from libaccurate.forest import Forest
from libaccurate.quota import HrqIndex, QuotaKey, covering, quota_name


class Coverage:
    """The namespaces each HRQ's subtree held when it was last planned, and the other way
    round: which HRQs' recorded subtrees hold a namespace."""

    def __init__(self) -> None:
        self._subtrees: dict[QuotaKey, tuple[str, ...]] = {}
        self._limiting: dict[str, set[QuotaKey]] = {}

    def record(self, subtrees: Mapping[QuotaKey, Sequence[str]], whole: bool = False) -> None:
        """Take what a plan found (``QuotaPlan.subtrees``); ``whole``: it planned every HRQ,
        so one it did not plan is gone."""
        if whole:
            self._subtrees, self._limiting = {}, {}
        for key, namespaces in subtrees.items():
            for namespace in self._subtrees.pop(key, ()):
                limiting = self._limiting[namespace]
                limiting.discard(key)
                if not limiting:
                    del self._limiting[namespace]
            if namespaces:
                self._subtrees[key] = tuple(namespaces)
                for namespace in namespaces:
                    self._limiting.setdefault(namespace, set()).add(key)

    def concerned(
        self,
        forest: Forest,
        hrqs: HrqIndex,
        problems: Iterable[QuotaKey],
        scope: Iterable[str],
    ) -> set[QuotaKey]:
        """The HRQs a change in the namespaces of ``scope`` may concern: those on their chains
        in ``forest`` (usable ones from ``hrqs``, and those in ``problems`` in a namespace of
        the scope), and those whose recorded subtree holds one of them."""
        names = frozenset(scope)
        found = {key for key in problems if key[0] in names}
        for namespace in names:
            found.update(self._limiting.get(namespace, ()))
            found.update(hrq.key for hrq in covering(forest, hrqs, namespace))
        return found

    def former(self, keys: Iterable[QuotaKey]) -> list[QuotaKey]:
        """The ResourceQuotas the HRQs ``keys`` were kept in when last planned, by namespace
        and name: those a plan of them must delete if no longer wanted."""
        return [
            (namespace, quota_name(key))
            for key in keys
            for namespace in self._subtrees.get(key, ())
        ]
