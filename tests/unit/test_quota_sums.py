"""Each HRQ's subtree sum, kept change by change (libaccurate.quotasums, held by
controller.quota_sums), is what adding up the subtree finds (quota.tree_used), whatever trees,
usage, moves, deletions and HRQ changes came before and in whatever order: applied one by one
to the rules, and taken in batches by the webhook's keeper of the sums. Parent labels here may
name a missing namespace or make a cycle: the cache can show what the webhooks would refuse."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.cache import HRQ_QUOTAS, NAMESPACES
from controller.quota_sums import SubtreeSums
from libaccurate import quotasums
from libaccurate.constants import LABEL_PARENT, LABEL_TYPE
from libaccurate.forest import Forest, Node
from libaccurate.quantity import Quantity, parse
from libaccurate.quota import (
    Counted,
    Hrq,
    HrqIndex,
    QuotaKey,
    QuotaTable,
    counted_quota,
    desired_quota,
    hrq_scope,
    quota_name,
    tree_used,
)
from libaccurate.quotaledger import Seen

NAMES = tuple(f"n{i}" for i in range(6))
# A parent label may name a namespace that does not exist.
PARENTS = st.sampled_from([*NAMES, "missing", None])
HOMES = st.sampled_from(NAMES)
RESOURCES = st.sampled_from([("pods",), ("requests.cpu",), ("pods", "requests.cpu")])
HIGH = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["hi"]}]}
SCOPES = st.sampled_from([None, HIGH])
CPU = st.sampled_from(["0", "100m", "1.5", "2", "250m"])
USED = st.one_of(st.none(), st.tuples(st.integers(0, 5), CPU))

Step = st.one_of(
    st.tuples(st.just("quota"), HOMES, st.integers(0, 2), USED),
    st.tuples(st.just("namespace"), HOMES, PARENTS, st.booleans()),
    st.tuples(st.just("hrq"), st.integers(0, 2), HOMES, st.one_of(st.none(), RESOURCES), SCOPES),
)


def node(name: str, parent: str | None) -> Node:
    return Node(name, {LABEL_PARENT: parent} if parent else {LABEL_TYPE: "root"})


def hrq_of(
    index: int, home: str, resources: tuple[str, ...], scope: dict[str, Any] | None = None
) -> Hrq:
    return Hrq(home, f"q{index}", {r: parse("100") for r in resources}, scope)


def usage(pods: int, cpu: str) -> dict[str, Quantity]:
    return {"pods": parse(str(pods)), "requests.cpu": parse(cpu)}


def values(sums: dict[str, Quantity]) -> dict[str, Fraction]:
    return {resource: quantity.value for resource, quantity in sums.items()}


class Recount:
    """A quota.Usage over what each namespace's ResourceQuotas count."""

    def __init__(self, counted: dict[str, dict[str, Counted]]) -> None:
        self.counted = counted

    def counted_in(self, namespace: str) -> list[Counted]:
        return list(self.counted.get(namespace, {}).values())


@settings(max_examples=300, deadline=None)
@given(
    links=st.dictionaries(HOMES, PARENTS, min_size=3),
    steps=st.lists(Step, min_size=1, max_size=30),
)
def test_each_change_applied_by_the_rules_keeps_every_sum_a_recount(links, steps) -> None:
    forest = Forest.build(node(name, parent) for name, parent in links.items())
    counted: dict[str, dict[str, Counted]] = {}
    hrqs: dict[int, Hrq] = {}
    sums: dict[QuotaKey, dict[str, Quantity]] = {}
    for step in steps:
        index = HrqIndex(hrqs.values())
        if step[0] == "quota":
            _, namespace, number, used = step
            hrq = hrqs.get(number) or hrq_of(number, NAMES[0], ())
            name = quota_name(hrq.key)
            here = counted.setdefault(namespace, {})
            before = list(here.values())
            here.pop(name, None)
            if used is not None:
                here[name] = Counted(hrq_scope(hrq), usage(*used))
            after = list(here.values())
            sums.update(quotasums.quota_changed(forest, index, namespace, before, after, sums))
        elif step[0] == "namespace":
            _, name, parent, present = step
            moved = forest.copy()
            if present:
                moved.upsert(node(name, parent))
            else:
                moved.remove(name)
            sums.update(quotasums.namespaces_changed(forest, moved, [name], counted, index, sums))
            forest = moved
        else:
            _, number, home, resources, scope = step
            old = hrqs.pop(number, None)
            if old is not None:
                del sums[old.key]
            if resources is not None:
                hrqs[number] = hrq_of(number, home, resources, scope)
                sums[hrqs[number].key] = tree_used(forest, hrqs[number], Recount(counted))
        for hrq in hrqs.values():
            assert values(sums[hrq.key]) == values(tree_used(forest, hrq, Recount(counted)))


class Cached:
    """What the webhook process's cache shows, with the changes its feed hands over."""

    def __init__(self, forest: Forest) -> None:
        self.forest = forest
        self.quotas: dict[QuotaKey, dict[str, Any]] = {}
        self.touched: dict[str, set[tuple[str, str]]] = {}
        self.version = 1

    def take(self) -> dict[str, set[tuple[str, str]]]:
        taken, self.touched = self.touched, {}
        return taken

    def touch(self, resource: str, key: tuple[str, str]) -> None:
        self.touched.setdefault(resource, set()).add(key)

    def items(self, resource: str) -> list[dict[str, Any]]:
        assert resource == HRQ_QUOTAS
        return list(self.quotas.values())

    def seen(self, key: QuotaKey) -> Seen | None:
        obj = self.quotas.get(key)
        if obj is None:
            return None
        counted = counted_quota(obj)
        return Seen("", counted.used, counted.scope)

    @contextmanager
    def reading(self) -> Iterator[Forest]:
        yield self.forest


@settings(max_examples=300, deadline=None)
@given(
    links=st.dictionaries(HOMES, PARENTS, min_size=3),
    steps=st.lists(st.one_of(Step, st.just(("catch up",))), min_size=1, max_size=40),
)
def test_the_webhook_catching_up_on_a_batch_of_changes_has_every_sum_a_recount(
    links, steps
) -> None:
    cache = Cached(Forest.build(node(name, parent) for name, parent in links.items()))
    kept = SubtreeSums(cache)  # type: ignore[arg-type]
    hrqs: dict[int, Hrq] = {}
    index = HrqIndex(())
    for step in [*steps, ("catch up",)]:
        if step[0] == "quota":
            _, namespace, number, used = step
            hrq = hrqs.get(number) or hrq_of(number, NAMES[0], ())
            key = (namespace, quota_name(hrq.key))
            if used is None:
                cache.quotas.pop(key, None)
            else:
                obj = desired_quota(hrq, namespace)
                pods, cpu = used
                obj["status"] = {"used": {"pods": str(pods), "requests.cpu": cpu}}
                cache.quotas[key] = obj
            cache.touch(HRQ_QUOTAS, key)
        elif step[0] == "namespace":
            _, name, parent, present = step
            if present:
                cache.forest.upsert(node(name, parent))
            else:
                cache.forest.remove(name)
            cache.touch(NAMESPACES, ("", name))
        elif step[0] == "hrq":
            _, number, home, resources, scope = step
            hrqs.pop(number, None)
            if resources is not None:
                hrqs[number] = hrq_of(number, home, resources, scope)
            index = HrqIndex(hrqs.values())
        else:
            with cache.reading() as forest:
                kept.catch_up(forest, index, cache.take(), cache.seen)
                recount = QuotaTable(cache.quotas.values())
                for hrq in index:
                    expected = tree_used(forest, hrq, recount)
                    assert values(dict(kept.sums[hrq.key])) == values(expected)
                assert set(kept.sums) == {hrq.key for hrq in index}
