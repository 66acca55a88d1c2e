"""Which cache changes settle (wait a moment for others, so that a stream of counted writes
starts one pass of the quota keeper rather than one each), which start a pass at once and
which start none (controller.cache: the module's docstring says why)."""

from __future__ import annotations

import copy
import threading
import time
from typing import Any, cast

from controller.cache import (
    HRQ_QUOTAS,
    HRQS,
    NAMESPACES,
    SETTLE_QUIET,
    Cache,
    Feed,
    namespaces_only,
    quota_resources,
)
from libaccurate import quota
from libaccurate.network.kube import Kube

Obj = dict[str, Any]
# Far longer than any change needs to settle.
DEADLINE = 30.0


def _cache() -> tuple[Cache, Feed]:
    cache = Cache(cast(Kube, None), namespaces_only() + quota_resources(), 600.0)
    return cache, cache.follow()


def _event(cache: Cache, resource: str, obj: Obj, kind: str = "MODIFIED") -> None:
    """One watch event, as the cache's watch hands it over."""
    keep = next(r.keep for r in cache.resources if r.name == resource)
    cache._observe(resource, {"type": kind, "object": obj}, keep)


def _written(obj: Obj, version: int, **status: Any) -> Obj:
    changed = copy.deepcopy(obj)
    changed["metadata"]["resourceVersion"] = str(version)
    changed["status"] = {**changed.get("status", {}), **status}
    return changed


def _kept_quota() -> Obj:
    return {
        "metadata": {
            "namespace": "team-a-dev",
            "name": "hrq.team-a.compute",
            "resourceVersion": "1",
            "labels": {quota.LABEL_HRQ_NAMESPACE: "team-a"},
        },
        "spec": {"hard": {"pods": "1P"}},
        "status": {"hard": {"pods": "1P"}, "used": {"pods": "0"}},
    }


def _hrq() -> Obj:
    return {
        "metadata": {"namespace": "team-a", "name": "compute", "resourceVersion": "1"},
        "spec": {"hard": {"pods": "10"}},
    }


def _settled(feed: Feed) -> float:
    """How long the feed took to be ready to take."""
    started = time.monotonic()
    assert feed.wait(DEADLINE)
    return time.monotonic() - started


def test_a_counted_write_settles_before_a_pass_takes_it() -> None:
    cache, feed = _cache()
    counted = _kept_quota()
    _event(cache, HRQ_QUOTAS, counted, "ADDED")
    feed.take()
    _event(cache, HRQ_QUOTAS, _written(counted, 2, used={"pods": "1"}))
    assert not feed.wait(0.0)
    assert _settled(feed) >= SETTLE_QUIET * 0.9
    assert feed.take() == {HRQ_QUOTAS: {("team-a-dev", "hrq.team-a.compute")}}


def test_whether_a_quota_counts_is_taken_at_once() -> None:
    """kube-controller-manager filling in a resource: the copies into its namespace wait for
    it, so it never settles; nor does a quota made, or its spec changed."""
    cache, feed = _cache()
    uncounted = _kept_quota()
    del uncounted["status"]
    _event(cache, HRQ_QUOTAS, uncounted, "ADDED")
    assert feed.wait(0.0)
    feed.take()
    counted = _written(uncounted, 2, hard={"pods": "1P"}, used={"pods": "0"})
    _event(cache, HRQ_QUOTAS, counted)
    assert feed.wait(0.0)
    feed.take()
    respecced = _written(counted, 3, used={"pods": "0", "requests.cpu": "0"})
    respecced["spec"]["hard"]["requests.cpu"] = "1P"
    _event(cache, HRQ_QUOTAS, respecced)
    assert feed.wait(0.0)


def test_an_hrqs_status_starts_no_pass_and_its_spec_does_at_once() -> None:
    """The keeper's own status write, echoed back, is no work for anyone."""
    cache, feed = _cache()
    hrq = _hrq()
    _event(cache, HRQS, hrq, "ADDED")
    feed.take()
    written = _written(hrq, 2, used={"pods": "3"})
    _event(cache, HRQS, written)
    assert not feed.wait(SETTLE_QUIET * 2)
    assert feed.take() == {}
    assert cache.get(HRQS, "team-a", "compute") == written
    raised = copy.deepcopy(written)
    raised["metadata"]["resourceVersion"] = "3"
    raised["spec"]["hard"]["pods"] = "20"
    _event(cache, HRQS, raised)
    assert feed.wait(0.0)
    assert feed.take() == {HRQS: {("team-a", "compute")}}


def test_any_other_change_takes_the_settling_ones_along_at_once() -> None:
    cache, feed = _cache()
    counted = _kept_quota()
    _event(cache, HRQ_QUOTAS, counted, "ADDED")
    feed.take()
    _event(cache, HRQ_QUOTAS, _written(counted, 2, used={"pods": "1"}))
    _event(cache, NAMESPACES, {"metadata": {"name": "team-b", "resourceVersion": "3"}}, "ADDED")
    assert feed.wait(0.0)
    assert feed.take() == {
        HRQ_QUOTAS: {("team-a-dev", "hrq.team-a.compute")},
        NAMESPACES: {("", "team-b")},
    }
    assert not feed.wait(0.0)


def test_a_deleted_quota_is_taken_at_once() -> None:
    cache, feed = _cache()
    counted = _kept_quota()
    _event(cache, HRQ_QUOTAS, counted, "ADDED")
    feed.take()
    _event(cache, HRQ_QUOTAS, _written(counted, 2), "DELETED")
    assert feed.wait(0.0)


def test_a_waiting_consumer_wakes_once_settled() -> None:
    """The bulk lane waits on its feed; a settling change wakes it without another change."""
    cache, feed = _cache()
    counted = _kept_quota()
    _event(cache, HRQ_QUOTAS, counted, "ADDED")
    feed.take()
    woke = threading.Event()

    def consumer() -> None:
        if feed.wait(DEADLINE):
            woke.set()

    thread = threading.Thread(target=consumer)
    thread.start()
    _event(cache, HRQ_QUOTAS, _written(counted, 2, used={"pods": "1"}))
    thread.join(DEADLINE)
    assert woke.is_set()


def test_a_feed_beside_hears_of_every_change_of_its_kinds_whoever_else_does() -> None:
    """What keeps a picture of its own current (the parsed HRQs) must see the keeper's own
    status writes too, which start no pass, and changes another feed takes."""
    cache, feed = _cache()
    beside = cache.follow_beside([HRQS])
    hrq = _hrq()
    _event(cache, HRQS, hrq, "ADDED")
    _event(cache, HRQS, _written(hrq, 2, used={"pods": "3"}))
    _event(cache, NAMESPACES, {"metadata": {"name": "team-b", "resourceVersion": "3"}}, "ADDED")
    assert beside.take() == {HRQS: {("team-a", "compute")}}
    assert feed.take() == {HRQS: {("team-a", "compute")}, NAMESPACES: {("", "team-b")}}
