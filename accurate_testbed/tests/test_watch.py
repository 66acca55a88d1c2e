"""Contract: watch semantics through the kubernetes Python client's Watch helper."""

from __future__ import annotations

import json
import queue
import threading
from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s_client
from kubernetes import watch as k8s_watch

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.cluster import Cluster


@pytest.fixture
def core(cluster: Cluster) -> Any:
    return k8s_client.CoreV1Api(cluster.api_client)


class Watcher:
    """Runs a watch on a thread so the test can wait for events with a deadline."""

    def __init__(self, list_call: Any, **kwargs: Any) -> None:
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._watch = k8s_watch.Watch()
        self._thread = threading.Thread(target=self._run, args=(list_call, kwargs), daemon=True)
        self._thread.start()

    def _run(self, list_call: Any, kwargs: dict[str, Any]) -> None:
        try:
            for event in self._watch.stream(list_call, **kwargs):
                self.events.put(event)
        finally:
            self.events.put(None)

    def next(self, timeout: float = 5.0) -> dict[str, Any] | None:
        """The next event, or None when the stream ended (watches end by their timeout, or
        when the in-memory server is reset for the next test)."""
        return self.events.get(timeout=timeout)


def summary(event: dict[str, Any] | None) -> tuple[str, str] | None:
    if event is None:
        return None
    obj = event["raw_object"]
    return event["type"], obj["metadata"].get("name", "")


def test_watch_from_list_version_sees_changes_in_order(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    core.create_namespaced_config_map(ns, {"metadata": {"name": "before"}})
    listed = core.list_namespaced_config_map(ns)
    watcher = Watcher(
        core.list_namespaced_config_map,
        namespace=ns,
        resource_version=listed.metadata.resource_version,
        timeout_seconds=10,
    )
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    core.patch_namespaced_config_map("a", ns, {"data": {"k": "v"}})
    core.delete_namespaced_config_map("a", ns)
    assert [summary(watcher.next()) for _ in range(3)] == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "a"),
    ]


def test_watch_without_version_starts_with_current_objects(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    watcher = Watcher(core.list_namespaced_config_map, namespace=ns, timeout_seconds=10)
    assert summary(watcher.next()) == ("ADDED", "a")


def test_watch_label_selector_reports_objects_leaving_it(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a", "labels": {"team": "x"}}})
    watcher = Watcher(
        core.list_namespaced_config_map, namespace=ns, label_selector="team=x", timeout_seconds=10
    )
    assert summary(watcher.next()) == ("ADDED", "a")
    core.create_namespaced_config_map(ns, {"metadata": {"name": "other"}})
    core.patch_namespaced_config_map("a", ns, {"metadata": {"labels": {"team": "y"}}})
    assert summary(watcher.next()) == ("DELETED", "a")


def test_watch_timeout_ends_the_stream(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    watcher = Watcher(core.list_namespaced_config_map, namespace=ns, timeout_seconds=1)
    assert watcher.next(timeout=10) is None


def raw_watch(server: ApiServer, cluster: Cluster, path: str, **query: str) -> list[dict]:
    """Read a whole watch stream (it must end by itself) as decoded events."""
    serialized = cluster.api_client.param_serialize(
        method="GET",
        resource_path=path,
        query_params=[("watch", "true"), *query.items()],
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    response = cluster.api_client.call_api(*serialized)
    response.read()
    return [json.loads(line) for line in response.data.decode().splitlines() if line]


@pytest.mark.fault_injection
def test_watch_from_compacted_version_is_gone(cluster: Cluster, apiserver: ApiServer, core) -> None:
    ns = cluster.namespace()
    start = core.list_namespaced_config_map(ns).metadata.resource_version
    apiserver.set_watch_history(2)
    try:
        for index in range(5):
            core.create_namespaced_config_map(ns, {"metadata": {"name": f"c{index}"}})
        events = raw_watch(
            apiserver,
            cluster,
            f"/api/v1/namespaces/{ns}/configmaps",
            resourceVersion=start,
            timeoutSeconds="5",
        )
    finally:
        apiserver.set_watch_history(10000)
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["code"], status["reason"]) == (410, "Expired")
    assert status["message"].startswith(f"too old resource version: {start} (")


@pytest.mark.fault_injection
def test_bookmarks_carry_a_resumable_version(cluster: Cluster, apiserver: ApiServer, core) -> None:
    ns = cluster.namespace()
    listed = core.list_namespaced_config_map(ns).metadata.resource_version
    apiserver.bookmark_interval = 0.1
    try:
        events = raw_watch(
            apiserver,
            cluster,
            f"/api/v1/namespaces/{ns}/configmaps",
            resourceVersion=listed,
            allowWatchBookmarks="true",
            timeoutSeconds="1",
        )
    finally:
        apiserver.bookmark_interval = 1.0
    bookmarks = [event for event in events if event["type"] == "BOOKMARK"]
    assert bookmarks
    assert int(bookmarks[-1]["object"]["metadata"]["resourceVersion"]) >= int(listed)
    assert bookmarks[-1]["object"]["kind"] == "ConfigMap"


@pytest.mark.fault_injection
def test_dropped_watch_ends_the_stream(cluster: Cluster, apiserver: ApiServer, core) -> None:
    ns = cluster.namespace()
    watcher = Watcher(core.list_namespaced_config_map, namespace=ns, timeout_seconds=30)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    assert summary(watcher.next()) == ("ADDED", "a")
    apiserver.drop_watches()
    assert watcher.next() is None


def test_a_watch_resumed_from_a_version_reports_updates_as_modified(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    created = core.create_namespaced_config_map(ns, {"metadata": {"name": "old", "labels": {}}})
    core.patch_namespaced_config_map("old", ns, {"data": {"a": "1"}})
    core.patch_namespaced_config_map("old", ns, {"metadata": {"labels": {"watched": "yes"}}})
    core.patch_namespaced_config_map("old", ns, {"metadata": {"labels": {"watched": None}}})
    core.delete_namespaced_config_map("old", ns)
    watcher = Watcher(
        core.list_namespaced_config_map,
        namespace=ns,
        resource_version=created.metadata.resource_version,
        timeout_seconds=10,
    )
    assert [summary(watcher.next()) for _ in range(4)] == [
        ("MODIFIED", "old"),
        ("MODIFIED", "old"),
        ("MODIFIED", "old"),
        ("DELETED", "old"),
    ]
    selected = Watcher(
        core.list_namespaced_config_map,
        namespace=ns,
        resource_version=created.metadata.resource_version,
        label_selector="watched=yes",
        timeout_seconds=10,
    )
    # Selector semantics: starting to match is ADDED, stopping is DELETED, the delete of an
    # object that no longer matches is not reported.
    assert [summary(selected.next()) for _ in range(2)] == [("ADDED", "old"), ("DELETED", "old")]
    core.create_namespaced_config_map(
        ns, {"metadata": {"name": "marker", "labels": {"watched": "yes"}}}
    )
    assert summary(selected.next()) == ("ADDED", "marker")


def test_a_watch_ended_by_its_timeout_leaves_its_connection_for_the_next_request(
    cluster: Cluster,
) -> None:
    """Go's net/http keeps a connection alive once a chunked answer is complete, so a client
    sends its next request on the connection of a watch that timed out. A server that closed it
    instead made that next request fail now and then ("Remote end closed connection without
    response"), when the close crossed the request."""
    api = cluster.api_client
    pool = urllib3.PoolManager(**api.rest_client.pool_manager.connection_pool_kw)
    settings = api.configuration.auth_settings().values()
    headers = {s["key"]: s["value"] for s in settings if s["in"] == "header"}
    path = f"/api/v1/namespaces/{cluster.namespace()}/configmaps"
    watched = pool.request(
        "GET",
        f"{api.configuration.host}{path}?watch=true&timeoutSeconds=1",
        headers=headers,
        preload_content=False,
        release_conn=False,
    )
    assert watched.status == 200
    connection = watched.connection
    assert connection is not None
    watched.read()
    connection.request("GET", path, headers=headers)
    assert connection.getresponse().status == 200
