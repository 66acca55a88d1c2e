"""Properties of hierarchical quotas over generated trees, moves, usage and interleavings.

1. After any trees and moves, every HRQ's status.used is the sum, over the namespaces whose
   chain of parents reaches the HRQ's namespace, of what the ResourceQuota counting for it
   there records (its own, or that of an HRQ that serves it there).
2. However reviews, writes landing, writes lost, cache refreshes and time interleave, the usage
   the API server has stored never takes any HRQ over its hard: the webhook's ledger counts
   what it admitted before the cache shows it. So too when the webhook reads each HRQ's sum
   kept from the cache's changes (libaccurate.quotasums) instead of adding up the subtree, and
   when a namespace still keeps a ResourceQuota that another serves (a write charges both).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from libaccurate import quotasums
from libaccurate.constants import LABEL_PARENT, LABEL_TYPE
from libaccurate.forest import Forest
from libaccurate.quantity import Quantity, parse
from libaccurate.quota import (
    API_VERSION,
    Counted,
    Hrq,
    HrqIndex,
    Usage,
    chain_of,
    covering,
    desired_quotas,
    plan_quotas,
    quota_name,
    read_hrq,
    review_usage,
    tree_used,
)
from libaccurate.quotaledger import Ledger, Seen

NAMES = tuple(f"n{i}" for i in range(7))


@st.composite
def parents(draw: st.DrawFn, names: tuple[str, ...] = NAMES) -> dict[str, str | None]:
    """Each namespace a root or the child of an earlier one (moves keep that, so no cycles)."""
    found: dict[str, str | None] = {}
    for index, name in enumerate(names):
        found[name] = draw(st.sampled_from([*names[:index], None])) if index else None
    return found


def forest_of(links: dict[str, str | None]) -> Forest:
    return Forest.build(
        {"metadata": {"name": n, "labels": {LABEL_PARENT: p} if p else {LABEL_TYPE: "root"}}}
        for n, p in links.items()
    )


def below(links: dict[str, str | None], name: str, top: str) -> bool:
    """Whether ``top`` is on ``name``'s chain of parents (itself included), by walking labels."""
    current: str | None = name
    while current is not None:
        if current == top:
            return True
        current = links[current]
    return False


def hrq_object(namespace: str, name: str, pods: int, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "HierarchicalResourceQuota",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"hard": {"pods": str(pods), "requests.cpu": cpu}},
    }


CPU = st.sampled_from(["0", "100m", "1.5", "2", "250m", "1"])


@settings(max_examples=150, deadline=None)
@given(
    links=parents(),
    moves=st.lists(st.tuples(st.integers(1, 6), st.integers(0, 6)), max_size=4),
    homes=st.lists(st.sampled_from(NAMES), min_size=1, max_size=3),
    used=st.dictionaries(st.sampled_from(NAMES), st.tuples(st.integers(0, 5), CPU)),
)
def test_status_used_is_the_sum_over_the_subtree(links, moves, homes, used) -> None:
    for child, parent in moves:
        name = NAMES[child]
        links[name] = NAMES[parent] if parent < child else None
    forest = forest_of(links)
    objects = [hrq_object(home, f"q{i}", 100, "100") for i, home in enumerate(homes)]
    hrqs = [read_hrq(o) for o in objects]
    quotas = []
    for (namespace, _), quota in desired_quotas(forest, hrqs).items():
        pods, cpu = used.get(namespace, (0, "0"))
        quota["status"] = {"used": {"pods": str(pods), "requests.cpu": cpu}}
        quotas.append(quota)
    planned = plan_quotas(forest, objects, quotas)
    assert planned.create == () and planned.delete == ()
    statuses = {(o["metadata"]["namespace"], o["metadata"]["name"]): s for o, s in planned.statuses}
    for hrq in hrqs:
        members = [n for n in NAMES if below(links, n, hrq.namespace)]
        pods = sum(used.get(n, (0, "0"))[0] for n in members)
        cpu = sum((parse(used.get(n, (0, "0"))[1]).value for n in members), Fraction(0))
        status = statuses[hrq.key]
        assert parse(status.used["pods"]).value == pods
        assert parse(status.used["requests.cpu"]).value == cpu


# -- admission under concurrency -----------------------------------------------------------


@dataclass
class Stored:
    """A ResourceQuota as the API server stores it."""

    version: int
    pods: int


@dataclass
class World:
    """The API server's stored quotas, the webhook's lagging cache and ledger, writes in flight."""

    forest: Forest
    hrqs: list[Hrq]
    stored: dict[tuple[str, str], Stored]
    cache: dict[tuple[str, str], Stored] = field(default_factory=dict)
    ledger: Ledger = field(default_factory=Ledger)
    flight: list[tuple[tuple[str, str], int, int, float]] = field(default_factory=list)
    now: float = 0.0
    revision: int = 10
    # Each HRQ's sum over the cache, kept change by change; None: the webhook adds up subtrees.
    sums: dict[tuple[str, str], dict[str, Quantity]] | None = None

    def keep_sums(self) -> None:
        """Sum each HRQ once, then keep the sums from the cache's changes (``refresh``)."""
        cached = self._cached()
        self.sums = {hrq.key: tree_used(self.forest, hrq, cached) for hrq in self.hrqs}

    def refresh(self, namespace: str) -> None:
        """The cache catches up with one namespace's quotas (watch events arrive in order)."""
        index = HrqIndex(self.hrqs)
        for key, stored in self.stored.items():
            if key[0] != namespace or self.cache.get(key) == stored:
                continue
            before = list(self._cached().counted_in(namespace))
            self.cache[key] = stored
            after = list(self._cached().counted_in(namespace))
            if self.sums is not None:
                self.sums.update(
                    quotasums.quota_changed(self.forest, index, namespace, before, after, self.sums)
                )

    def _cached(self) -> Table:
        return Table(self.cache)

    def subtree_used(
        self, forest: Forest, hrq: Hrq, usage: Usage, without: str | None = None
    ) -> dict[str, Quantity]:
        """What the webhook reads of an HRQ's subtree: the kept sum corrected by the ledger."""
        if self.sums is None:
            return tree_used(forest, hrq, usage, without)
        differing = {namespace for namespace, _ in self.ledger.differing}
        cached = self._cached()
        return quotasums.subtree_used(forest, hrq, self.sums, cached, usage, differing, without)

    def sync(self) -> None:
        """What the webhook does before deciding: take the cache, read expired quotas live."""
        seen = {k: _seen(s) for k, s in self.cache.items()}
        self.ledger.sync(seen.get, lambda namespace: [n for (ns, n) in seen if ns == namespace])
        for key in self.ledger.expired(self.now):
            self.ledger.confirm(key, _seen(self.stored[key]), self.now)

    def write(self, namespace: str) -> None:
        """One pod created in ``namespace``: its ResourceQuotas are updated one by one, each
        update reviewed by the webhook; those allowed are in flight until they land or fail."""
        for key in sorted(k for k in self.stored if k[0] == namespace):
            current = self.stored[key]
            self.sync()
            before, after = {"pods": _pods(current.pods)}, {"pods": _pods(current.pods + 1)}
            denial = review_usage(
                self.forest,
                self.hrqs,
                self.ledger,
                namespace,
                "",
                before,
                after,
                self.subtree_used,
            )
            if denial is None:
                self.ledger.reserve(key, str(current.version), after, self.now)
                self.flight.append((key, current.version, current.pods + 1, self.now))

    def land(self, index: int, lost: bool) -> None:
        """A write in flight lands (if its version still holds) or is refused later on."""
        key, version, pods, started = self.flight.pop(index % len(self.flight))
        if lost or self.now - started >= self.ledger.ttl:
            return
        if self.stored[key].version == version:
            self.revision += 1
            self.stored[key] = Stored(self.revision, pods)


class Table:
    """A quota.Usage over the cached quotas."""

    def __init__(self, cache: dict[tuple[str, str], Stored]) -> None:
        self._cache = cache

    def counted_in(self, namespace: str) -> list[Counted]:
        return [
            Counted("", {"pods": _pods(s.pods)})
            for (n, _), s in self._cache.items()
            if n == namespace
        ]


def _seen(stored: Stored) -> Seen:
    return Seen(str(stored.version), {"pods": _pods(stored.pods)})


def _pods(count: int) -> Quantity:
    return parse(str(count))


# Few namespaces, so that writes often meet under one HRQ.
FEW = NAMES[:4]
Step = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(FEW)),
    st.tuples(st.just("land"), st.integers(0, 50), st.sampled_from([False, False, False, True])),
    st.tuples(st.just("refresh"), st.sampled_from(FEW)),
    st.tuples(st.just("tick"), st.sampled_from([1.0, 30.0, 80.0])),
)


@settings(max_examples=300, deadline=None)
@given(
    links=parents(FEW),
    homes=st.lists(st.tuples(st.sampled_from(FEW), st.integers(0, 2)), min_size=1, max_size=3),
    steps=st.lists(Step, min_size=4, max_size=40),
    kept=st.booleans(),
    leftovers=st.booleans(),
)
def test_admission_never_takes_an_hrq_over_its_hard(links, homes, steps, kept, leftovers) -> None:
    forest = forest_of(links)
    hrqs = [
        read_hrq(hrq_object(home, f"q{i}", limit, "1")) for i, (home, limit) in enumerate(homes)
    ]
    # Each namespace keeps the ResourceQuota of every HRQ above it that none serves, and with
    # ``leftovers`` those of the others too (kept until the one serving them counts).
    stored = {}
    for namespace in FEW:
        chain = chain_of(covering(forest, hrqs, namespace))
        for hrq in chain.above:
            if leftovers or not chain.dominated[hrq.key]:
                stored[(namespace, quota_name(hrq.key))] = Stored(1, 0)
    world = World(forest, hrqs, stored, dict(stored))
    if kept:
        world.keep_sums()
    for step in steps:
        if step[0] == "write":
            world.write(step[1])
        elif step[0] == "land" and world.flight:
            world.land(step[1], step[2])
        elif step[0] == "refresh":
            world.refresh(step[1])
        elif step[0] == "tick":
            world.now += step[1]
        for hrq in hrqs:
            # A pod is in a namespace once every ResourceQuota there counted it, so what a
            # namespace uses is at most the least of them; the webhook holds the largest.
            total = sum(
                max(s.pods for (where, _), s in world.stored.items() if where == namespace)
                for namespace in FEW
                if below(links, namespace, hrq.namespace)
            )
            assert total <= hrq.hard["pods"].value, hrq.ref
