"""Each HRQ's subtree sum kept current change by change, so that a review costs the HRQ's
chain, not its subtree.

``quota.tree_used`` adds up what every namespace of an HRQ's subtree records in its
ResourceQuota for that HRQ: as many lookups as the subtree has namespaces, at every review the
quota webhook makes. The webhook keeps the sums instead, and these rules say how each change
moves them: a ResourceQuota's recorded usage (``quota_changed``), namespaces that got another
parent, came or went (``namespaces_changed``), an HRQ that came or changed its spec (its sum is
``quota.tree_used`` once). Each rule reads the picture before and after one change and returns
the new sums of the HRQs it touches, in time that follows the change (the namespaces below a
moved one), not the cluster; the caller (controller.quota_sums) holds the picture and the sums.
Whatever the changes and their order, the sums are what ``quota.tree_used`` finds over the
same picture (tests/unit/test_quota_sums.py).

The sums are the cache's: ``subtree_used`` adds, for a review, what the webhook's ledger
admitted and the cache does not show yet, for the few ResourceQuotas where the two differ.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from libaccurate.forest import Forest
from libaccurate.quantity import ZERO, Quantity
from libaccurate.quota import Hrq, QuotaKey, ResourceList, Usage, nothing_used, quota_name

# Per HRQ, the sum over its subtree of each resource of its ``hard``.
Sums = Mapping[QuotaKey, Mapping[str, Quantity]]
# Per namespace, what each ResourceQuota kept there for an HRQ records, by the quota's name.
Counted = Mapping[str, Mapping[str, ResourceList]]
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


def quota_changed(
    forest: Forest,
    hrq: Hrq,
    namespace: str,
    before: ResourceList,
    after: ResourceList,
    sums: Sums,
) -> Changed:
    """``hrq``'s new sum once ``namespace``'s ResourceQuota for it records ``after`` instead of
    ``before`` (empty: it recorded nothing, or is gone); nothing when that namespace is not in
    its subtree."""
    if not counts_for(forest, hrq, namespace):
        return {}
    return {hrq.key: shifted(sums.get(hrq.key) or nothing_used(hrq), hrq, after, before)}


def namespaces_changed(
    before: Forest,
    after: Forest,
    names: Iterable[str],
    counted: Counted,
    hrqs: Mapping[str, Hrq],
    sums: Sums,
) -> Changed:
    """The new sums of the HRQs whose subtrees changed when the namespaces ``names`` got
    another parent, came or went, the forest going from ``before`` to ``after``. ``hrqs`` are
    the HRQs by the name of their ResourceQuotas (``quota.quota_name``).

    A namespace's chain of parents is the same in both forests up to the first namespace on it
    that changed, and the namespace is below that one in ``after`` (a forest lists a
    namespace's children even once it is gone): so only those below a changed one may have
    entered or left a subtree. For each of their ResourceQuotas, whether it counts for its HRQ
    is asked of both forests.
    """
    moved = [name for name in names if _link(before, name) != _link(after, name)]
    below = {n for name in moved for n in after.subtree(name)}
    found: Changed = {}
    for namespace in sorted(below):
        for name, used in sorted(counted.get(namespace, {}).items()):
            hrq = hrqs.get(name)
            if hrq is None:
                continue
            was, now = counts_for(before, hrq, namespace), counts_for(after, hrq, namespace)
            if was == now:
                continue
            total = found.get(hrq.key) or sums.get(hrq.key) or nothing_used(hrq)
            found[hrq.key] = shifted(total, hrq, used, {}) if now else shifted(total, hrq, {}, used)
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
    differing: Iterable[QuotaKey],
    without: str | None = None,
) -> dict[str, Quantity]:
    """What ``quota.tree_used(forest, hrq, usage, without)`` finds, read from ``sums``, which
    hold what ``counted`` records: ``usage`` (the webhook's ledger) may differ from it only at
    the ResourceQuotas ``differing``. Costs those quotas, not the subtree."""
    name = quota_name(hrq.key)
    total = sums.get(hrq.key) or nothing_used(hrq)
    keys = {key for key in differing if key[1] == name}
    if without is not None:
        keys.add((without, name))
    for key in sorted(keys):
        if counts_for(forest, hrq, key[0]):
            instead = {} if key[0] == without else usage.get(key) or {}
            total = shifted(total, hrq, instead, counted.get(key) or {})
    return dict(total)
