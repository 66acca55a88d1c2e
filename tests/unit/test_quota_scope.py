"""The quota keeper's scoped passes leave nothing for a whole pass to do.

A pass prompted by changes makes the keeper plan only the HRQs whose subtree meets the
namespaces those changes affect (libaccurate.quotascope), a kept ResourceQuota's change its own
namespace alone (controller.passes.scope_of). For random forests, HRQs, usage and
changes (moves, deleted, terminating and new namespaces, HRQs made, changed and deleted,
ResourceQuotas counted, edited and deleted), the keeper (controller.quotas, the real code, over
bench.keeper's in-memory stand-in for the cache and the API) runs one pass scoped as the
controller scopes it; then a plan of everything (``quota.plan_quotas``) must find nothing left
to write. Several rounds follow one another, so what the keeper remembers of earlier passes is
tested too.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from bench.keeper import QuotaWorld, key_of, node
from bench.keeper import hrq_object as bench_hrq
from controller.cache import HRQ_QUOTAS, HRQS, NAMESPACES
from controller.passes import scope_of
from controller.quotas import Quotas
from libaccurate import quota

Key = tuple[str, str]
Obj = dict[str, Any]
NAMES = tuple(f"n{i}" for i in range(7))
HRQ_NAMES = ("q0", "q1", "q2")
KINDS = (
    "move",
    "delete-namespace",
    "terminate",
    "new-namespace",
    "set-hrq",
    "delete-hrq",
    "use",
    "delete-quota",
    "edit-quota",
)


def hrq_object(namespace: str, name: str, pods: int, valid: bool = True) -> Obj:
    hard = {"pods": str(pods) if valid else "-1", "requests.cpu": "2"}
    return bench_hrq(namespace, name, hard)


def writes(plan: quota.QuotaPlan) -> list[Any]:
    return [*plan.create, *plan.replace, *plan.delete, *(key_of(o) for o, _ in plan.statuses)]


def change(cluster: QuotaWorld, kind: str, a: int, b: int, serial: int) -> set[str]:
    """Make one change; the namespaces created by it (the keeper makes their quotas at once)."""
    name, other = NAMES[a], NAMES[b]
    if kind == "move" and name in cluster.nodes:
        # Only under an earlier namespace (or to a root), so that no cycle forms.
        cluster.nodes[name] = node(name, other if b < a else None)
        cluster.changed(NAMESPACES, ("", name))
    elif kind == "delete-namespace" and name in cluster.nodes:
        del cluster.nodes[name]
        cluster.changed(NAMESPACES, ("", name))
        if b % 2:
            # The namespace's own objects go with it, or (b even) are still cached.
            for key in [k for k in cluster.objects[HRQ_QUOTAS] if k[0] == name]:
                cluster.drop(HRQ_QUOTAS, key)
    elif kind == "terminate" and name in cluster.nodes:
        current = cluster.nodes[name]
        cluster.nodes[name] = current._replace(terminating=True)
        cluster.changed(NAMESPACES, ("", name))
    elif kind == "new-namespace":
        made = f"m{serial}"
        cluster.nodes[made] = node(made, other if other in cluster.nodes else None)
        cluster.changed(NAMESPACES, ("", made))
        return {made}
    elif kind == "set-hrq":
        key = (other, HRQ_NAMES[a % len(HRQ_NAMES)])
        obj = hrq_object(*key, pods=a, valid=a != 6)
        before = cluster.objects[HRQS].get(key)
        if before is not None:
            obj["metadata"] = {
                **before["metadata"],
                "generation": before["metadata"]["generation"] + 1,
            }
            obj["status"] = before.get("status")
        cluster.put(HRQS, obj)
    elif kind == "delete-hrq":
        cluster.drop(HRQS, (other, HRQ_NAMES[a % len(HRQ_NAMES)]))
    else:
        kept = sorted(k for k in cluster.objects[HRQ_QUOTAS] if k[0] == name)
        if not kept:
            return set()
        key = kept[b % len(kept)]
        obj = copy.deepcopy(cluster.objects[HRQ_QUOTAS][key])
        if kind == "delete-quota":
            cluster.drop(HRQ_QUOTAS, key)
        elif kind == "use" and obj.get("status"):
            obj["status"]["used"] = {r: str(b) for r in obj["status"]["used"]}
            cluster.put(HRQ_QUOTAS, obj)
        elif kind == "edit-quota":
            obj["spec"]["hard"] = {"pods": "1"}
            cluster.put(HRQ_QUOTAS, obj)
    return set()


@st.composite
def parents(draw: st.DrawFn) -> dict[str, str | None]:
    """Each namespace a root or the child of an earlier one."""
    return {
        name: draw(st.sampled_from([*NAMES[:index], None])) if index else None
        for index, name in enumerate(NAMES)
    }


CHANGE = st.tuples(st.sampled_from(KINDS), st.integers(0, 6), st.integers(0, 6))


@settings(max_examples=300, deadline=None)
@given(
    links=parents(),
    homes=st.lists(
        st.tuples(st.sampled_from(NAMES), st.sampled_from(HRQ_NAMES), st.integers(0, 9)),
        min_size=1,
        max_size=4,
    ),
    used=st.dictionaries(st.sampled_from(NAMES), st.integers(0, 5)),
    rounds=st.lists(st.tuples(st.lists(CHANGE, min_size=1, max_size=3), st.booleans()), max_size=4),
)
# A nearer HRQ takes over n1, whose old quota records a pod the new one's count does not: the
# pass that deletes the old one sums without it (found by a clean-clone run).
@example(
    links={"n0": None, **{name: "n0" for name in NAMES[1:]}},
    homes=[("n0", "q0", 0)],
    used={},
    rounds=[([("set-hrq", 0, 1), ("use", 1, 1)], False), ([("move", 0, 0)], True)],
)
def test_a_scoped_pass_leaves_nothing_for_a_whole_one(
    links: dict[str, str | None],
    homes: list[tuple[str, str, int]],
    used: dict[str, int],
    rounds: list[tuple[list[tuple[str, int, int]], bool]],
) -> None:
    hrqs = {(home, name): hrq_object(home, name, pods, pods != 9) for home, name, pods in homes}
    cluster = QuotaWorld(links, hrqs.values())
    keeper = Quotas(cluster, cluster)  # type: ignore[arg-type]
    # Settled: every quota made and counted, every status written.
    for _ in range(3):
        keeper.keep(cluster.forest())
        cluster.count(lambda namespace: used.get(namespace, 0))
    keeper.keep(cluster.forest())
    assert writes(cluster.full_plan()) == []
    serial = itertools.count()
    for changes, counted in rounds:
        cluster.changes = {}
        if counted:
            cluster.count(lambda namespace: used.get(namespace, 0))
        made: set[str] = set()
        for kind, a, b in changes:
            made |= change(cluster, kind, a, b, next(serial))
        forest = cluster.forest()
        if made:
            # What the pass that created them does right after (controller.passes).
            expected = [q for q in cluster.full_plan().create if q["metadata"]["namespace"] in made]
            before = set(cluster.objects[HRQ_QUOTAS])
            keeper.keep_new(forest, made)
            assert set(cluster.objects[HRQ_QUOTAS]) - before == {key_of(q) for q in expected}
        scope = scope_of(forest, cluster.changes)
        keeper.keep(forest, scope)
        assert writes(cluster.full_plan()) == []
