"""16: what the quota keeper adds to a scoped reconcile pass (issue 28), in process.

Scenario 12's cluster without the API server: trees of 50 namespaces (depth up to 4), an HRQ
in the root of every tree but four and in random namespaces of them, 1,000 in all, every
ResourceQuota kept for them made and counted, every HRQ status written. Then, again and again,
a pod is counted in a random namespace under HRQs (its ResourceQuotas' ``status.used`` grows)
and the keeper's part of the pass that change starts is timed: ``Quotas.keep`` (the real
keeper, controller/quotas.py) with the pass's scope as the controller computes it (the
namespace counted: controller.passes.scope_of), over ``QuotaWorld``, an in-memory stand-in for the
controller's cache and the API that takes the keeper's writes. The same for a whole pass,
and for the planner's hold check (``quota.awaiting``, from the keeper's parsed HRQs and its
view of the kept ResourceQuotas, as the controller's snapshot carries them) of the same scope,
which every pass also makes. No API server and no controller process: the figures are the
CPU time of the thread that runs them (the stand-in's share, copying the objects the keeper
writes, included), so that the load of a shared machine moves them little.
"""

from __future__ import annotations

import copy
import functools
import itertools
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from accurate_testbed.apiserver.patching import json_merge_patch
from bench.quota import FREE_TREES, HARD, NAMESPACES_PER_ROOT, hrq_homes
from bench.report import Row, percentile, timed
from bench.target import Target
from controller.cache import HRQ_QUOTAS, HRQS
from controller.passes import scope_of
from controller.quotas import Quotas
from libaccurate import quota
from libaccurate.constants import LABEL_PARENT, LABEL_TYPE
from libaccurate.forest import Forest, Node

Key = tuple[str, str]
Obj = dict[str, Any]
DEEPEST = 4
# The keeper's own CPU time: on a shared machine, wall time mostly measures the neighbours.
CPU = time.thread_time


def node(name: str, parent: str | None, terminating: bool = False) -> Node:
    labels = {LABEL_PARENT: parent} if parent else {LABEL_TYPE: "root"}
    return Node(name, labels, terminating)


def key_of(obj: Mapping[str, Any]) -> Key:
    return (obj["metadata"]["namespace"], obj["metadata"]["name"])


def hrq_object(namespace: str, name: str, hard: Mapping[str, str]) -> Obj:
    return {
        "apiVersion": quota.API_VERSION,
        "kind": quota.KIND,
        "metadata": {"namespace": namespace, "name": name, "generation": 1},
        "spec": {"hard": dict(hard)},
    }


class Followed:
    """The changes of some kinds not taken yet, as a cache Feed hands them over."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self.kinds = frozenset(kinds)
        self.touched: dict[str, set[Key]] = {}

    def add(self, resource: str, key: Key) -> None:
        if resource in self.kinds:
            self.touched.setdefault(resource, set()).add(key)

    def take(self) -> dict[str, set[Key]]:
        taken, self.touched = self.touched, {}
        return taken


class QuotaWorld:
    """Namespaces, HRQs and the ResourceQuotas kept for them: the keeper's cache and API at
    once, in memory.

    Every write replaces the object (as a watch event does in the cache, so that the keeper's
    parse-once-per-spec sees what a cache shows) and is recorded in ``changes``, by kind and
    key, as the cache's feed records it; the status patch is applied as the in-memory API server
    applies a merge patch."""

    def __init__(self, parents: Mapping[str, str | None], hrqs: Iterable[Obj]) -> None:
        self.nodes = {name: node(name, parent) for name, parent in parents.items()}
        self.objects: dict[str, dict[Key, Obj]] = {HRQS: {}, HRQ_QUOTAS: {}}
        self.changes: dict[str, set[Key]] = {}
        self.followers: list[Followed] = []
        self.serial = itertools.count(1)
        for obj in hrqs:
            self.put(HRQS, obj)

    def forest(self) -> Forest:
        return Forest.build(self.nodes.values())

    def changed(self, resource: str, key: Key) -> None:
        self.changes.setdefault(resource, set()).add(key)
        for followed in self.followers:
            followed.add(resource, key)

    def put(self, resource: str, obj: Obj) -> None:
        metadata = obj["metadata"]
        metadata["resourceVersion"] = str(next(self.serial))
        metadata.setdefault("uid", f"uid-{next(self.serial)}")
        self.objects[resource][key_of(obj)] = obj
        self.changed(resource, key_of(obj))

    def drop(self, resource: str, key: Key) -> None:
        if self.objects[resource].pop(key, None) is not None:
            self.changed(resource, key)

    # What the keeper reads from its cache.
    def items(self, resource: str) -> list[Obj]:
        return list(self.objects[resource].values())

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        return self.objects[resource].get((namespace, name))

    def follow_beside(self, kinds: Iterable[str]) -> Followed:
        followed = Followed(kinds)
        self.followers.append(followed)
        return followed

    # What the keeper writes through the API.
    def create(self, path: str, body: Obj) -> Obj:
        self.put(HRQ_QUOTAS, copy.deepcopy(body))
        return body

    def replace(self, path: str, body: Obj) -> Obj:
        current = self.objects[HRQ_QUOTAS][key_of(body)]
        self.put(HRQ_QUOTAS, {**copy.deepcopy(body), "status": current.get("status")})
        return body

    def delete(self, path: str, body: Obj) -> None:
        parts = path.split("/")
        self.drop(HRQ_QUOTAS, (parts[parts.index("namespaces") + 1], parts[-1]))

    def patch(self, path: str, body: Obj) -> Obj:
        parts = path.split("/")
        key = (parts[parts.index("namespaces") + 1], parts[-2])
        self.put(HRQS, json_merge_patch(self.objects[HRQS][key], body))
        return body

    def count(self, used: Callable[[str], int]) -> None:
        """kube-controller-manager counts every kept ResourceQuota not counted yet: ``pods``
        at ``used(namespace)``, anything else at 0."""
        for key, obj in list(self.objects[HRQ_QUOTAS].items()):
            hard = obj["spec"]["hard"]
            if (obj.get("status") or {}).get("hard") != hard:
                pods = str(used(key[0]))
                status = {"hard": hard, "used": {r: pods if r == "pods" else "0" for r in hard}}
                self.put(HRQ_QUOTAS, {**copy.deepcopy(obj), "status": status})

    def grow(self, namespace: str) -> None:
        """A pod counted in ``namespace``: each of its ResourceQuotas counts one more."""
        for key, obj in list(self.objects[HRQ_QUOTAS].items()):
            if key[0] == namespace and "pods" in (obj.get("status") or {}).get("used", {}):
                counted = copy.deepcopy(obj)
                counted["status"]["used"]["pods"] = str(int(counted["status"]["used"]["pods"]) + 1)
                self.put(HRQ_QUOTAS, counted)

    def full_plan(self) -> quota.QuotaPlan:
        return quota.plan_quotas(self.forest(), self.items(HRQS), self.items(HRQ_QUOTAS))


def trees(size: int, chooser: random.Random) -> dict[str, str | None]:
    """``size`` namespaces in trees of 50, each sub-namespace under a random earlier one of
    its tree no deeper than ``DEEPEST``."""
    parents: dict[str, str | None] = {}
    depth: dict[str, int] = {}
    for tree in range(max(FREE_TREES + 1, size // NAMESPACES_PER_ROOT)):
        root = f"t{tree:03d}"
        parents[root], depth[root] = None, 0
        members = [root]
        for index in range(1, NAMESPACES_PER_ROOT):
            parent = chooser.choice([m for m in members if depth[m] < DEEPEST])
            name = f"{root}-{index:02d}"
            parents[name], depth[name] = parent, depth[parent] + 1
            members.append(name)
    return parents


def keeper_passes(target: Target, size: int, hrqs: int, passes: int) -> list[Row]:
    """The keeper's time in ``passes`` scoped passes and a few whole ones at ``size``
    namespaces with ``hrqs`` HRQs (``target`` is not used: nothing here talks to a server)."""
    chooser = random.Random(28)
    parents = trees(size, chooser)
    roots = sorted(name for name, parent in parents.items() if parent is None)
    limited = [n for n in parents if (n.split("-")[0]) not in roots[:FREE_TREES]]
    others = [n for n in limited if parents[n] is not None]
    homes = hrq_homes(roots, others, hrqs, chooser)
    world = QuotaWorld(parents, (hrq_object(home, "compute", HARD) for home in homes))
    keeper = Quotas(world, world)  # type: ignore[arg-type]
    forest = world.forest()
    keeper.keep(forest)
    world.count(lambda namespace: len(namespace) % 3)
    keeper.keep(forest)
    kept = len(world.objects[HRQ_QUOTAS])

    scoped, held = [], []
    for _ in range(passes):
        world.grow(chooser.choice(limited))
        scope = scope_of(forest, world.changes)
        world.changes = {}
        scoped.append(timed(functools.partial(keeper.keep, forest, scope), CPU))
        held.append(timed(functools.partial(hold_check, keeper, forest, scope), CPU))
    whole = [timed(lambda: keeper.keep(forest), CPU) for _ in range(max(3, passes // 20))]
    settled = not (world.full_plan().create or world.full_plan().statuses)
    name = f"16 quota keeper, {size} ns, {len(homes)} HRQs, {kept} ResourceQuotas"
    return [
        *_spread(name, f"keeper, scoped pass (a pod counted), {passes} passes", scoped),
        *_spread(name, "keeper, whole pass", whole),
        *_spread(name, "planner's hold check (quota.awaiting), scoped pass", held),
        Row(
            name,
            "nothing left for a whole plan after the passes",
            str(settled),
            "True",
            settled,
            checked=True,
        ),
    ]


def hold_check(keeper: Quotas, forest: Forest, scope: frozenset[str]) -> dict[str, str]:
    """The planner's hold check as a pass makes it: the keeper's parsed HRQs and its view of
    the kept ResourceQuotas, taken for the snapshot, then ``quota.awaiting`` over the scope."""
    return quota.awaiting(forest, keeper.parsed(), keeper.held(), scope)


def _spread(name: str, figure: str, samples: list[float]) -> list[Row]:
    return [
        Row(name, f"{figure} p50", f"{percentile(samples, 0.5) * 1000:.2f} ms"),
        Row(name, f"{figure} p99", f"{percentile(samples, 0.99) * 1000:.2f} ms"),
    ]
