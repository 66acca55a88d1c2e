"""libaccurate.network.kube, the one adapter to the API: credentials as kubectl finds them, JSON
calls, watches and discovery, against the test cluster (or a real one)."""

from __future__ import annotations

import base64
import re
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.cluster import Cluster
from accurate_testbed.link import Link
from accurate_testbed.rerouting import rerouted, server_address
from accurate_testbed.waiting import wait_for
from libaccurate.network.kube import (
    ApiError,
    ConnectionOptions,
    Kube,
    KubeError,
    parse_duration,
    resource_path,
)
from libaccurate.network.kubeconfig import load_credentials


@pytest.fixture
def kube(kubeconfig: Path) -> Kube:
    return Kube.connect(ConnectionOptions(kubeconfig=str(kubeconfig)))


def split_kubeconfig(kubeconfig: Path, folder: Path) -> tuple[Path, Path, dict[str, Any]]:
    """Write the cluster and the user/context into two files, as people keep them."""
    document = yaml.safe_load(kubeconfig.read_text())
    clusters = {"apiVersion": "v1", "kind": "Config", "clusters": document["clusters"]}
    rest = {key: value for key, value in document.items() if key != "clusters"}
    first, second = folder / "contexts.yaml", folder / "clusters.yaml"
    first.write_text(yaml.safe_dump(rest))
    second.write_text(yaml.safe_dump(clusters))
    return first, second, document


def test_calls_return_plain_json_and_errors_carry_the_status(kube: Kube, cluster: Cluster) -> None:
    name = cluster.namespace("adapter")
    listed = kube.list_objects("/api/v1/namespaces", fieldSelector=f"metadata.name={name}")
    assert [item["metadata"]["name"] for item in listed["items"]] == [name]
    with pytest.raises(ApiError) as caught:
        kube.get(resource_path("", "v1", "namespaces", name=cluster.unique("missing")))
    assert caught.value.not_found
    assert caught.value.reason == "NotFound"
    assert "not found" in str(caught.value)


def test_writes_patches_and_server_side_apply(kube: Kube, cluster: Cluster) -> None:
    namespace = cluster.namespace("adapter")
    path = resource_path("", "v1", "configmaps", namespace)
    created = kube.create(path, {"metadata": {"name": "c"}, "data": {"a": "1"}})
    item = resource_path("", "v1", "configmaps", namespace, "c")
    kube.patch(item, {"data": {"b": "2"}})
    applied = kube.apply(
        item,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "y"}},
        "accurate-test",
    )
    assert applied["data"] == {"a": "1", "b": "2", "x": "y"}
    assert "accurate-test" in {entry["manager"] for entry in applied["metadata"]["managedFields"]}
    stale = {**created, "data": {"a": "stale"}}
    with pytest.raises(ApiError) as caught:
        kube.replace(item, stale)
    assert caught.value.conflict and caught.value.retriable
    with pytest.raises(ApiError) as exists:
        kube.create(path, {"metadata": {"name": "c"}})
    assert exists.value.already_exists and not exists.value.conflict
    kube.delete(item)
    with pytest.raises(ApiError):
        kube.get(item)


def test_watch_yields_events_after_the_version(kube: Kube, cluster: Cluster) -> None:
    namespace = cluster.namespace("adapter")
    path = resource_path("", "v1", "configmaps", namespace)
    start = kube.list_objects(path)["metadata"]["resourceVersion"]
    kube.create(path, {"metadata": {"name": "w"}})
    kube.patch(resource_path("", "v1", "configmaps", namespace, "w"), {"data": {"k": "v"}})
    events = kube.watch(path, start, timeout_seconds=5)
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in events if e["type"] != "BOOKMARK"]
    assert seen[:2] == [("ADDED", "w"), ("MODIFIED", "w")]


@pytest.mark.fault_injection
def test_an_expired_watch_is_an_api_error_410(
    kube: Kube, cluster: Cluster, apiserver: ApiServer
) -> None:
    namespace = cluster.namespace("adapter")
    path = resource_path("", "v1", "configmaps", namespace)
    start = kube.list_objects(path)["metadata"]["resourceVersion"]
    apiserver.set_watch_history(1)
    try:
        for name in ("a", "b", "c"):
            kube.create(path, {"metadata": {"name": name}})
        with pytest.raises(ApiError) as caught:
            list(kube.watch(path, start, timeout_seconds=5))
    finally:
        apiserver.set_watch_history(10000)
    assert caught.value.code == 410


def test_discovery_lists_namespaced_kinds(kube: Kube) -> None:
    resources = {
        (group_list["groupVersion"], resource["kind"]): resource["namespaced"]
        for group_list in kube.server_resources()
        for resource in group_list["resources"]
    }
    assert resources[("rbac.authorization.k8s.io/v1", "Role")] is True
    assert resources[("rbac.authorization.k8s.io/v1", "ClusterRole")] is False
    assert resources[("v1", "Secret")] is True


def test_kubeconfig_files_merge_from_the_environment_like_kubectl(
    kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second, _ = split_kubeconfig(kubeconfig, tmp_path)
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'absent.yaml'}:{second}")
    kube = Kube.connect(ConnectionOptions())
    assert kube.get("/api/v1/namespaces/default")["metadata"]["name"] == "default"


def test_context_cluster_and_user_flags_pick_entries(kubeconfig: Path, tmp_path: Path) -> None:
    document = yaml.safe_load(kubeconfig.read_text())
    cluster_entry, user_entry = document["clusters"][0], document["users"][0]
    broken = {"name": "broken", "cluster": {"server": "https://127.0.0.1:1"}}
    document["clusters"].append(broken)
    document["contexts"].append(
        {"name": "elsewhere", "context": {"cluster": "broken", "user": user_entry["name"]}}
    )
    document["current-context"] = "elsewhere"
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(document))

    with pytest.raises(
        KubeError, match=re.escape("cannot reach the API server at https://127.0.0.1:1")
    ):
        Kube.connect(ConnectionOptions(kubeconfig=str(path))).get("/api/v1/namespaces")
    by_context = Kube.connect(ConnectionOptions(kubeconfig=str(path), context="accurate-test"))
    by_cluster = Kube.connect(
        ConnectionOptions(kubeconfig=str(path), cluster=cluster_entry["name"])
    )
    for kube in (by_context, by_cluster):
        assert kube.get("/api/v1/namespaces/default")["metadata"]["name"] == "default"


def test_server_token_and_ca_flags_work_without_a_kubeconfig(
    kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document = yaml.safe_load(kubeconfig.read_text())
    ca = tmp_path / "ca.crt"
    ca.write_bytes(
        base64.b64decode(document["clusters"][0]["cluster"]["certificate-authority-data"])
    )
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    options = ConnectionOptions(
        server=document["clusters"][0]["cluster"]["server"],
        token=document["users"][0]["user"]["token"],
        certificate_authority=str(ca),
    )
    assert Kube.connect(options).get("/api/v1/namespaces/default")["metadata"]["name"]
    with pytest.raises(ApiError) as caught:
        Kube.connect(options._replace(token="wrong")).get("/api/v1")
    assert caught.value.code == 401


@pytest.mark.fault_injection
def test_impersonation_headers_reach_the_server(kubeconfig: Path, apiserver: ApiServer) -> None:
    options = ConnectionOptions(
        kubeconfig=str(kubeconfig), impersonate="alice", impersonate_groups=("team-a", "devs")
    )
    apiserver.clear_requests()
    Kube.connect(options).get("/version")  # every authenticated user may read it
    (logged,) = [r for r in apiserver.requests if r.path == "/version"]
    assert logged.user == "alice"
    assert logged.groups[:2] == ("team-a", "devs")


def test_configuration_errors_name_what_to_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(KubeError, match=r"kubeconfig .*missing does not exist"):
        load_credentials(ConnectionOptions(kubeconfig=str(tmp_path / "missing")))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeError, match=r"no kubeconfig found .* pass --kubeconfig or --server"):
        load_credentials(ConnectionOptions())
    bad = tmp_path / "bad"
    bad.write_text("apiVersion: v1\nkind: Config\ncurrent-context: nope\ncontexts: []\n")
    with pytest.raises(KubeError, match="invalid kubeconfig"):
        load_credentials(ConnectionOptions(kubeconfig=str(bad)))


def test_unreachable_servers_are_reported_with_their_address() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    options = ConnectionOptions(server=f"http://127.0.0.1:{port}", request_timeout="2s")
    reached = re.escape(f"cannot reach the API server at http://127.0.0.1:{port}")
    with pytest.raises(KubeError, match=reached):
        Kube.connect(options).get("/api/v1")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", None), ("5", 5.0), ("1.5", 1.5), ("30s", 30.0), ("2m", 120.0), ("1h2m3s", 3723.0)],
)
def test_request_timeouts_read_like_kubectls(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "1d", "-1s"])
def test_bad_request_timeouts_are_refused(text: str) -> None:
    with pytest.raises(KubeError, match="invalid --request-timeout"):
        parse_duration(text)


@pytest.mark.fault_injection
def test_a_bounded_copy_gives_up_on_a_slow_server(kube: Kube, apiserver: ApiServer) -> None:
    apiserver.delay(1.0, path="^/api/v1/namespaces/default$")
    bounded = kube.with_timeout(0.2)
    assert bounded.with_timeout(5).timeout == 0.2
    with pytest.raises(KubeError, match="cannot reach the API server"):
        bounded.get("/api/v1/namespaces/default")
    assert kube.timeout is None
    assert kube.get("/api/v1/namespaces/default")["metadata"]["name"] == "default"


@pytest.mark.fault_injection
def test_requests_after_watches_never_get_a_connection_the_watch_left_closed(
    kubeconfig: Path, cluster: Cluster, apiserver: ApiServer
) -> None:
    kube = Kube(load_credentials(ConnectionOptions(kubeconfig=str(kubeconfig))), pool_size=1)
    namespace = cluster.namespace("adapter")
    path = resource_path("", "v1", "configmaps", namespace)
    start = kube.list_objects(path)["metadata"]["resourceVersion"]
    apiserver.set_watch_history(1)
    try:
        for name in ("a", "b"):
            kube.create(path, {"metadata": {"name": name}})
        for _ in range(50):
            # The server ends each of these watches at once (410) and closes its connection.
            with pytest.raises(ApiError):
                list(kube.watch(path, start, timeout_seconds=5))
            assert kube.get(path)["items"]
    finally:
        apiserver.set_watch_history(10000)


def test_a_watch_cut_off_mid_stream_is_a_kube_error() -> None:
    """A server that dies in the middle of a chunk: the caller must learn the stream broke."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]

        def serve_half_an_event() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.recv(65536)
                head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                whole = b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n'
                half = b'{"type":"MOD'
                connection.sendall(
                    head
                    + f"{len(whole):x}\r\n".encode()
                    + whole
                    + b"\r\n"
                    + f"{len(half) + 20:x}\r\n".encode()
                    + half
                )

        server = threading.Thread(target=serve_half_an_event, daemon=True)
        server.start()
        kube = Kube.connect(ConnectionOptions(server=f"http://127.0.0.1:{port}"))
        seen = []
        with pytest.raises(KubeError, match="broke off"):
            for event in kube.watch("/api/v1/namespaces", "1"):
                seen.append(event["type"])
        server.join(5)
    assert seen == ["ADDED"]


def test_a_connection_the_server_closed_while_idle_is_not_used_again() -> None:
    """Servers close idle keep-alive connections when they like; the next request must not fail
    for being sent on one."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    closed = threading.Event()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(2)
        port = listener.getsockname()[1]

        def answer_then_close() -> None:
            for _ in range(2):
                connection, _ = listener.accept()
                with connection:
                    connection.recv(65536)
                    connection.sendall(answer)
                closed.set()

        server = threading.Thread(target=answer_then_close, daemon=True)
        server.start()
        kube = Kube.connect(ConnectionOptions(server=f"http://127.0.0.1:{port}"))
        assert kube.get("/api/v1") == {}
        assert closed.wait(5)
        assert kube.get("/api/v1") == {}
        server.join(5)


class CountingLink(Link):
    """A link that counts the connections made through it."""

    def __init__(self, target: tuple[str, int]) -> None:
        super().__init__(target)
        self.connections = 0

    def accepted(self, client: socket.socket) -> None:
        self.connections += 1
        super().accepted(client)


def test_requests_take_the_connections_opened_ahead_and_open_no_more(
    kubeconfig: Path, tmp_path: Path
) -> None:
    with CountingLink(server_address(kubeconfig)) as link:
        linked = rerouted(kubeconfig, tmp_path / "linked", f"https://127.0.0.1:{link.address[1]}")
        kube = Kube.connect(ConnectionOptions(kubeconfig=str(linked)))
        kube.open_ahead(2)
        wait_for(lambda: link.connections == 2, 10, "two connections opened ahead")
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(kube.get, ["/api/v1", "/apis"]))
        assert answers[0]["kind"] == "APIResourceList"
        assert answers[1]["kind"] == "APIGroupList"
        assert kube.get("/version")["major"]
        assert link.connections == 2


def test_a_server_unreachable_ahead_is_reported_by_the_request_with_its_address() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kube = Kube.connect(ConnectionOptions(server=f"http://127.0.0.1:{port}", request_timeout="2s"))
    kube.open_ahead(2)
    reached = re.escape(f"cannot reach the API server at http://127.0.0.1:{port}")
    for _ in range(3):  # the two opened ahead, then one of its own
        with pytest.raises(KubeError, match=reached):
            kube.get("/api/v1")
