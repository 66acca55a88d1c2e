"""Waiting on the cluster's state without polling it: a LIST, then its watch, until done."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from libaccurate.network.kube import Kube

Predicate = Callable[[Mapping[str, Any]], bool]


def watch_until(
    kube: Kube,
    path: str,
    holds: Predicate,
    wanted: int,
    timeout: float,
    **query: str,
) -> float:
    """Follow the objects at ``path`` (with ``query`` selectors) until ``wanted`` of them
    satisfy ``holds``; the time that took. Polling would load the server the benchmark
    measures; a watch does not. Each event costs O(1) here, because the in-memory server
    shares this process: a re-count per event would slow down what is measured."""
    started = time.monotonic()
    listed = kube.list_objects(path, **query)
    satisfied = {_key(obj) for obj in listed.get("items") or [] if holds(obj)}
    version = str(listed["metadata"]["resourceVersion"])
    while len(satisfied) < wanted:
        left = started + timeout - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{path}: {len(satisfied)} of {wanted} after {timeout:.0f} s")
        for event in kube.watch(path, version, timeout_seconds=max(1, int(left)), **query):
            obj = event["object"]
            version = str(obj["metadata"].get("resourceVersion") or version)
            if event["type"] == "BOOKMARK":
                continue
            if event["type"] != "DELETED" and holds(obj):
                satisfied.add(_key(obj))
            else:
                satisfied.discard(_key(obj))
            if len(satisfied) >= wanted:
                break
    return time.monotonic() - started


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return str(meta.get("namespace") or ""), str(meta["name"])
