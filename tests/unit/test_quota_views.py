"""What the plugin shows of hierarchical quotas: the tightest limit a namespace is under, and
the HRQs that limit it, readable or only known by name."""

from __future__ import annotations

from typing import Any

from kubectl_accurate.hrq_reads import HrqReading
from kubectl_accurate.quota_limits import Limits
from kubectl_accurate.trees import Tree, continued
from libaccurate.constants import LABEL_PARENT, LABEL_TYPE
from libaccurate.forest import Forest
from libaccurate.quantity import parse
from libaccurate.quota import API_VERSION, read_hrq, tightest


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def hrq(
    ns: str, name: str, hard: dict[str, str], used: dict[str, str] | None = None
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "HierarchicalResourceQuota",
        "metadata": {"namespace": ns, "name": name},
        "spec": {"hard": hard},
    }
    if used is not None:
        obj["status"] = {"used": used}
    return obj


def forest() -> Forest:
    """team (root) -> a -> a1; team -> b."""
    return Forest.build(
        [
            namespace("team", **{LABEL_TYPE: "root"}),
            namespace("a", **{LABEL_PARENT: "team"}),
            namespace("a1", **{LABEL_PARENT: "a"}),
            namespace("b", **{LABEL_PARENT: "team"}),
        ]
    )


def test_the_least_left_wins_not_the_lowest_hard() -> None:
    parent = read_hrq(hrq("team", "compute", {"pods": "20"}))
    child = read_hrq(hrq("a", "small", {"pods": "5"}))
    found = tightest([(child, {"pods": parse("1")}), (parent, {"pods": parse("19")})])
    assert (found["pods"].hrq, str(found["pods"].left)) == (parent, "1")
    found = tightest([(child, {"pods": parse("4")}), (parent, {"pods": parse("10")})])
    assert (found["pods"].hrq, str(found["pods"].left)) == (child, "1")


def test_scoped_and_uncounted_hrqs_take_no_part_and_a_tie_goes_to_the_nearest() -> None:
    scoped = hrq("team", "best-effort", {"pods": "1"})
    scoped["spec"]["scopeSelector"] = {"matchExpressions": [{"scopeName": "BestEffort"}]}
    near = read_hrq(hrq("a", "near", {"pods": "3", "requests.cpu": "1"}))
    far = read_hrq(hrq("team", "far", {"pods": "5"}))
    found = tightest(
        [
            (near, {"pods": parse("1")}),
            (far, {"pods": parse("3")}),
            (read_hrq(scoped), {"pods": parse("1")}),
        ]
    )
    assert list(found) == ["pods"]
    assert found["pods"].hrq == near


def test_an_hrq_over_its_limit_leaves_a_negative_amount() -> None:
    lowered = read_hrq(hrq("team", "compute", {"requests.cpu": "1"}))
    found = tightest([(lowered, {"requests.cpu": parse("1.5")})])
    assert str(found["requests.cpu"].left) == "-500m"


def test_each_namespace_holds_its_own_hrqs_and_sees_those_above() -> None:
    reading = HrqReading(
        [
            hrq("team", "compute", {"pods": "4"}, {"pods": "3"}),
            hrq("a", "small", {"pods": "5"}, {"pods": "1"}),
        ],
        hidden=frozenset({("org", "budget")}),
    )
    limits = Limits(forest(), reading)
    place = limits.place("a1")
    assert place.held == ()
    assert [s.ref for s in place.above] == ["a/small", "team/compute", "org/budget"]
    assert (
        place.tightest_text()
        == "pods: 1 left (team/compute), and org/budget, which you may not read"
    )
    assert limits.place("a").held[0].used_hard() == "pods: 1/5"
    assert [s.ref for s in limits.place("b").above] == ["team/compute", "org/budget"]
    assert limits.limited("team")


def test_an_hrq_without_status_shows_unknown_use_and_no_tightest() -> None:
    limits = Limits(forest(), HrqReading([hrq("b", "new", {"pods": "2"})]))
    place = limits.place("b")
    assert place.held[0].used_hard() == "pods: ?/2"
    assert place.tightest_text() == "-"
    assert not limits.limited("a")


def test_further_lines_about_a_namespace_carry_the_tree_guides_on() -> None:
    leaf, parent = Tree("x", ()), Tree("y", (Tree("z", ()),))
    assert continued("", parent) == "│"
    assert continued("", leaf) == ""
    assert continued("├── ", leaf) == "│   "
    assert continued("│   └── ", parent) == "│       │"


def test_an_hrq_that_cannot_be_enforced_says_why_once() -> None:
    broken = hrq("b", "broken", {"pods": "lots"})
    broken["status"] = {
        "conditions": [
            {"type": "Counted", "status": "False", "reason": "InvalidSpec", "message": "x"}
        ]
    }
    (shown,) = Limits(forest(), HrqReading([broken])).place("b").held
    assert shown.used_hard() == "pods: ?/lots"
    assert len(shown.notes) == 1
    assert shown.notes[0].startswith("not enforced: HierarchicalResourceQuota b/broken")
