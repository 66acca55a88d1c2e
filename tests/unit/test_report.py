"""Report rows: a tree's namespaces in order, and where each billing value came from."""

from __future__ import annotations

from typing import Any

from libaccurate.report import billing_keys, flat_header, rows

KEY = "billing.example.com/team"


def ns(name: str, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels, "creationTimestamp": "2026-01-01T00:00:00Z"}
    }


def sub(name: str, parent: str, **labels: str) -> dict[str, Any]:
    return ns(name, **{"accurate.cybozu.com/parent": parent, **labels})


ROOT = {"accurate.cybozu.com/type": "root"}
TEMPLATE = {"accurate.cybozu.com/type": "template"}


def test_values_come_from_the_top_of_an_unbroken_chain() -> None:
    namespaces = [
        ns("base", **TEMPLATE, **{KEY: "a"}),
        ns("team", **ROOT, **{"accurate.cybozu.com/template": "base", KEY: "a"}),
        sub("team-dev", "team", **{KEY: "a"}),
        sub("team-lab", "team-dev", **{KEY: "b"}),
        sub("team-tmp", "team-lab", **{KEY: "b"}),
        sub("team-bare", "team"),
    ]
    found = {r.namespace: r for r in rows(namespaces, [KEY])}
    assert {n: r.billing[KEY].source for n, r in found.items() if KEY in r.billing} == {
        "team": "base",
        "team-dev": "base",
        "team-lab": "team-lab",
        "team-tmp": "team-lab",
    }
    assert KEY not in found["team-bare"].billing
    assert (found["team-tmp"].depth, found["team-tmp"].parent, found["team-tmp"].root) == (
        3,
        "team-lab",
        "team",
    )
    assert [r.namespace for r in rows(namespaces, [KEY], top="team-dev")] == [
        "team-dev",
        "team-lab",
        "team-tmp",
    ]


def test_only_trees_are_reported_and_keys_are_the_matching_ones_present() -> None:
    namespaces = [ns("alone", **{KEY: "x"}), ns("team", **ROOT, **{KEY: "a", "other": "1"})]
    keys = billing_keys(["billing.example.com/*"], namespaces)
    assert keys == [KEY]
    assert [r.namespace for r in rows(namespaces, keys)] == ["team"]
    assert flat_header(keys)[-2:] == [KEY, f"{KEY} from"]
