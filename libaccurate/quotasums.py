"""Each HRQ's subtree sum kept current change by change, so that a review costs the HRQ's
chain, not its subtree.

``quota.tree_used`` adds up what every namespace of an HRQ's subtree records in the
ResourceQuotas counting for that HRQ: as many lookups as the subtree has namespaces, at every
review the quota webhook makes. The webhook keeps the sums instead, and these rules say how
each change moves them: a ResourceQuota's recorded usage (``quota_changed``), namespaces that
got another parent, came or went (``namespaces_changed``), an HRQ that came or changed its spec
(its sum is ``quota.tree_used`` once; an HRQ's share of a namespace depends on nothing but its
own spec and the ResourceQuotas there, so no other HRQ's sum moves). Each rule reads the
picture before and after one change and returns the new sums of the HRQs it touches, in time
that follows the change (the namespaces below a moved one), not the cluster; the caller
(controller.quota_sums) holds the picture and the sums. Whatever the changes and their order,
the sums are what ``quota.tree_used`` finds over the same picture
(tests/unit/test_quota_sums.py).

The sums are the cache's: ``subtree_used`` adds, for a review, what the webhook's ledger
admitted and the cache does not show yet, in the few namespaces where the two differ.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from libaccurate.forest import Forest
from libaccurate.quantity import ZERO, Quantity
from libaccurate.quota import (
    Counted,
    Hrq,
    HrqIndex,
    QuotaKey,
    ResourceList,
    Usage,
    covering,
    namespace_used,
    nothing_used,
)

# Per HRQ, the sum over its subtree of each resource of its ``hard``.
Sums = Mapping[QuotaKey, Mapping[str, Quantity]]
# Per namespace, what each ResourceQuota kept there counts, by the quota's name.
Kept = Mapping[str, Mapping[str, Counted]]
Changed = dict[QuotaKey, dict[str, Quantity]]


def counts_for(forest: Forest, hrq: Hrq, namespace: str) -> bool:
    """Whether ``namespace`` is in ``hrq``'s subtree (``quota.subtree``), found by walking up
    from it: as many steps as it is deep."""
    if hrq.namespace not in forest or namespace not in forest:
        return False
    return namespace == hrq.namespace or hrq.namespace in forest.ancestors(namespace)


def shifted(
    total: Mapping[str, Quantity], hrq: Hrq, gained: ResourceList, lost: ResourceList
) -> dict[str, Quantity]:
    """``total`` with ``gained`` added and ``lost`` taken away, for the resources ``hrq``
    limits."""
    moved = dict(total)
    for resource in hrq.hard:
        amount = moved.get(resource, ZERO)
        if resource in gained:
            amount = amount + gained[resource]
        if resource in lost:
            amount = amount - lost[resource]
        moved[resource] = amount
    return moved


class Listed:
    """A Usage of one namespace's ResourceQuotas, as given."""

    def __init__(self, counted: Iterable[Counted]) -> None:
        self._counted = tuple(counted)

    def counted_in(self, namespace: str, /) -> Iterable[Counted]:
        return self._counted


def limiting(forest: Forest, hrqs: HrqIndex, namespace: str) -> list[Hrq]:
    """The HRQs whose subtree holds ``namespace`` in ``forest``, nearest first."""
    if namespace not in forest:
        return []
    # Those of covering() are in namespaces on its chain: in the subtree of each that exists.
    return [hrq for hrq in covering(forest, hrqs, namespace) if hrq.namespace in forest]


def quota_changed(
    forest: Forest,
    hrqs: HrqIndex,
    namespace: str,
    before: Iterable[Counted],
    after: Iterable[Counted],
    sums: Sums,
) -> Changed:
    """The new sums of the HRQs above ``namespace`` once the ResourceQuotas kept there count
    ``after`` instead of ``before`` (one of them changed, came or went): each HRQ's share is
    what those counting its objects record (``quota.namespace_used``)."""
    was, now = Listed(before), Listed(after)
    found: Changed = {}
    for hrq in limiting(forest, hrqs, namespace):
        old = namespace_used(was, hrq, namespace)
        new = namespace_used(now, hrq, namespace)
        if old != new:  # Quantities compare by amount
            found[hrq.key] = shifted(sums.get(hrq.key) or nothing_used(hrq), hrq, new, old)
    return found


def namespaces_changed(
    before: Forest,
    after: Forest,
    names: Iterable[str],
    kept: Kept,
    hrqs: HrqIndex,
    sums: Sums,
) -> Changed:
    """The new sums of the HRQs whose subtrees changed when the namespaces ``names`` got
    another parent, came or went, the forest going from ``before`` to ``after``.

    A namespace's chain of parents is the same in both forests up to the first namespace on it
    that changed, and the namespace is below that one in ``after`` (a forest lists a
    namespace's children even once it is gone): so only those below a changed one may have
    entered or left a subtree. Each of them moves the sums of the HRQs it entered or left by
    what its ResourceQuotas count for them.
    """
    moved = [name for name in names if _link(before, name) != _link(after, name)]
    below = {n for name in moved for n in after.subtree(name)}
    found: Changed = {}
    for namespace in sorted(below):
        listed = Listed(kept.get(namespace, {}).values())
        was = {hrq.key: hrq for hrq in limiting(before, hrqs, namespace)}
        now = {hrq.key: hrq for hrq in limiting(after, hrqs, namespace)}
        for key in sorted(was.keys() ^ now.keys()):
            hrq = now.get(key) or was[key]
            used = namespace_used(listed, hrq, namespace)
            total = found.get(key) or sums.get(key) or nothing_used(hrq)
            found[key] = (
                shifted(total, hrq, used, {}) if key in now else shifted(total, hrq, {}, used)
            )
    return found


def _link(forest: Forest, name: str) -> tuple[bool, str | None]:
    """What a namespace's place in subtrees depends on: whether it exists, and its parent."""
    node = forest.get(name)
    return (node is not None, None if node is None else node.parent)


def subtree_used(
    forest: Forest,
    hrq: Hrq,
    sums: Sums,
    counted: Usage,
    usage: Usage,
    differing: Iterable[str],
    without: str | None = None,
) -> dict[str, Quantity]:
    """What ``quota.tree_used(forest, hrq, usage, without)`` finds, read from ``sums``, which
    hold what ``counted`` records: ``usage`` (the webhook's ledger) may differ from it only in
    the namespaces ``differing``. Costs those namespaces, not the subtree."""
    total = sums.get(hrq.key) or nothing_used(hrq)
    namespaces = {*differing, *([without] if without is not None else [])}
    for namespace in sorted(namespaces):
        if counts_for(forest, hrq, namespace):
            instead = {} if namespace == without else namespace_used(usage, hrq, namespace)
            total = shifted(total, hrq, instead, namespace_used(counted, hrq, namespace))
    return dict(total)
