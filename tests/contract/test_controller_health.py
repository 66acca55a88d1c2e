"""controller.health: the probe and metrics server, reached over real HTTP as the kubelet and
Prometheus reach it."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.health import Route, Server, serve
from controller.metrics import Metrics


def fetch(url: str, method: str = "GET") -> tuple[int, bytes, str]:
    """Status, body and content type, for error statuses too."""
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(), response.headers["Content-Type"]
    except urllib.error.HTTPError as error:
        return error.code, error.read(), error.headers["Content-Type"]


class Readiness:
    """A /readyz that turns ready when told, as the controller's after its first sync."""

    def __init__(self) -> None:
        self.ready = False

    def __call__(self) -> tuple[int, bytes, str]:
        if self.ready:
            return 200, b"ok\n", "text/plain"
        return 503, b"cache not synced\n", "text/plain"


@pytest.fixture
def started() -> Iterator[list[Server]]:
    servers: list[Server] = []
    yield servers
    for server in servers:
        server.stop()


def start(started: list[Server], addr: str, routes: dict[str, Route]) -> Server:
    server = serve(addr, routes)
    started.append(server)
    return server


def test_probes_answer_what_their_routes_say(started: list[Server]) -> None:
    readiness = Readiness()
    server = start(
        started,
        "127.0.0.1:0",
        {"/healthz": lambda: (200, b"ok\n", "text/plain"), "/readyz": readiness},
    )
    base = f"http://127.0.0.1:{server.port}"
    assert fetch(f"{base}/healthz") == (200, b"ok\n", "text/plain")
    assert fetch(f"{base}/readyz")[:2] == (503, b"cache not synced\n")
    readiness.ready = True
    assert fetch(f"{base}/readyz?verbose=1")[:2] == (200, b"ok\n")
    assert fetch(f"{base}/readyz", method="HEAD")[:2] == (200, b"")
    assert fetch(f"{base}/nothing-here")[0] == 404


def test_metrics_are_served_in_the_prometheus_text_format(started: list[Server]) -> None:
    metrics = Metrics()
    server = start(started, "127.0.0.1:0", {"/metrics": lambda: (200, *metrics.exposition())})
    metrics.count_action("CreateCopy", "ok")
    metrics.set_leader(True)
    status, body, content_type = fetch(f"http://127.0.0.1:{server.port}/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=")
    values = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }
    assert values[("accurate_actions_total", (("action", "CreateCopy"), ("result", "ok")))] == 1
    assert values[("accurate_leader", ())] == 1


def test_a_failing_route_is_a_500_naming_the_error(started: list[Server]) -> None:
    def broken() -> tuple[int, bytes, str]:
        raise RuntimeError("cache gone")

    server = start(started, "127.0.0.1:0", {"/readyz": broken})
    status, body, _ = fetch(f"http://127.0.0.1:{server.port}/readyz")
    assert status == 500 and b"cache gone" in body
    assert fetch(f"http://127.0.0.1:{server.port}/readyz")[0] == 500


def test_an_empty_host_listens_on_every_interface(started: list[Server]) -> None:
    server = start(started, ":0", {"/healthz": lambda: (200, b"ok\n", "text/plain")})
    assert fetch(f"http://127.0.0.1:{server.port}/healthz")[0] == 200
    if socket.has_dualstack_ipv6():
        assert fetch(f"http://[::1]:{server.port}/healthz")[0] == 200


def test_stop_frees_the_port(started: list[Server]) -> None:
    server = serve("127.0.0.1:0", {})
    port = server.port
    server.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
    start(started, f"127.0.0.1:{port}", {})


@pytest.mark.parametrize("addr", ["8081", "localhost:http", ":99999", ""])
def test_malformed_addresses_are_refused_by_name(addr: str) -> None:
    with pytest.raises(ValueError, match=f"invalid listen address '{addr}'"):
        serve(addr, {})


def test_a_taken_port_is_an_error_naming_the_address(started: list[Server]) -> None:
    taken = start(started, "127.0.0.1:0", {})
    addr = f"127.0.0.1:{taken.port}"
    with pytest.raises(OSError, match=f"cannot listen on {addr}"):
        serve(addr, {})
