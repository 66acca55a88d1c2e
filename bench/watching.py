"""Waiting on the cluster's state without polling it: a LIST, then its watch, until done."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from libaccurate.kube import Kube

Objects = Mapping[tuple[str, str], Mapping[str, Any]]


def watch_until(
    kube: Kube,
    path: str,
    done: Callable[[Objects], bool],
    timeout: float,
    **query: str,
) -> float:
    """Follow the objects at ``path`` (with ``query`` selectors) until ``done`` says so; the
    time that took. Polling would load the server the benchmark measures; a watch does not."""
    started = time.monotonic()
    listed = kube.list_objects(path, **query)
    objects = {_key(obj): obj for obj in listed.get("items") or []}
    version = str(listed["metadata"]["resourceVersion"])
    while not done(objects):
        left = started + timeout - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{path}: not done after {timeout:.0f} s")
        for event in kube.watch(path, version, timeout_seconds=max(1, int(left)), **query):
            obj = event["object"]
            version = str(obj["metadata"].get("resourceVersion") or version)
            if event["type"] == "DELETED":
                objects.pop(_key(obj), None)
            elif event["type"] != "BOOKMARK":
                objects[_key(obj)] = obj
            if done(objects):
                break
    return time.monotonic() - started


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return str(meta.get("namespace") or ""), str(meta["name"])
