"""The adapter through a proxy (accurate_testbed.proxy): a CONNECT tunnel to the API server's
name, credentials from the proxy URL, TLS to the API server inside the tunnel (inside the
proxy's own TLS for an https proxy) with its certificate checked as without a proxy; and each
way it fails, named: the proxy asks for credentials (407), refuses them, cannot be connected
to, or never answers. The API server is named by a name only the proxy knows, so a request
that did not go through it could not have succeeded."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.processes import free_port
from accurate_testbed.proxy import ConnectProxy
from accurate_testbed.rerouting import rerouted, server_address
from libaccurate.network.http_connection import Connection
from libaccurate.network.kube import ConnectionOptions, Kube, KubeError
from libaccurate.network.proxies import parse_proxy_url

PRIVATE = "api.private.accurate.test"
NAMESPACES = "/api/v1/namespaces"


@pytest.fixture
def proxy(kubeconfig: Path) -> Iterator[ConnectProxy]:
    host, _ = server_address(kubeconfig)
    with ConnectProxy(credentials=("ops", "s3cret pass"), hosts={PRIVATE: host}) as running:
        yield running


def through(kubeconfig: Path, folder: Path, proxy_url: str, **options: str) -> Kube:
    """The cluster, named PRIVATE, through ``proxy_url``."""
    _, port = server_address(kubeconfig)
    config = rerouted(
        kubeconfig, folder / "kubeconfig", f"https://{PRIVATE}:{port}", proxy_url=proxy_url
    )
    return Kube.connect(ConnectionOptions(kubeconfig=str(config), **options))  # type: ignore[arg-type]


def test_requests_go_through_the_tunnel_with_the_proxy_url_credentials(
    kubeconfig: Path, proxy: ConnectProxy, tmp_path: Path
) -> None:
    kube = through(kubeconfig, tmp_path, proxy.url(("ops", "s3cret%20pass")))
    assert "default" in {ns["metadata"]["name"] for ns in kube.list_objects(NAMESPACES)["items"]}
    kube.get(f"{NAMESPACES}/default")
    _, port = server_address(kubeconfig)
    # Kept alive: both requests went through one tunnel.
    assert [(t.target, t.user, t.status) for t in proxy.tunnels] == [
        (f"{PRIVATE}:{port}", "ops", 200)
    ]


def test_a_proxy_asking_for_credentials_is_named_with_its_407(
    kubeconfig: Path, proxy: ConnectProxy, tmp_path: Path
) -> None:
    for given, advice in (
        (None, "give them in the proxy URL"),
        (("ops", "wrong"), "the credentials in the proxy URL were refused"),
    ):
        kube = through(kubeconfig, tmp_path, proxy.url(given))
        with pytest.raises(KubeError) as raised:
            kube.get(f"{NAMESPACES}/default")
        message = str(raised.value)
        assert f"127.0.0.1:{proxy.port}" in message
        assert "proxy-url of cluster" in message
        assert "407 Proxy Authentication Required" in message
        assert advice in message
        assert "wrong" not in message


def test_a_proxy_that_refuses_connections_is_named(kubeconfig: Path, tmp_path: Path) -> None:
    unused = free_port()
    kube = through(kubeconfig, tmp_path, f"http://127.0.0.1:{unused}")
    with pytest.raises(KubeError, match=f"cannot connect to the proxy http://127.0.0.1:{unused} "):
        kube.get(f"{NAMESPACES}/default")


def test_a_proxy_that_never_answers_times_out_with_its_name(
    kubeconfig: Path, tmp_path: Path
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # connections wait, unanswered
        port = silent.getsockname()[1]
        kube = through(kubeconfig, tmp_path, f"http://127.0.0.1:{port}", request_timeout="1s")
        with pytest.raises(KubeError) as raised:
            kube.get(f"{NAMESPACES}/default")
    assert f"the proxy http://127.0.0.1:{port} (from proxy-url" in str(raised.value)
    assert "did not answer the CONNECT" in str(raised.value)
    assert "within 1 s" in str(raised.value)


def test_the_api_server_certificate_is_still_checked_inside_the_tunnel(
    kubeconfig: Path, proxy: ConnectProxy, tmp_path: Path
) -> None:
    _, port = server_address(kubeconfig)
    config = rerouted(
        kubeconfig,
        tmp_path / "kubeconfig",
        f"https://{PRIVATE}:{port}",
        proxy_url=proxy.url(("ops", "s3cret pass")),
        tls_server_name="not-the-api-server.example",
    )
    kube = Kube.connect(ConnectionOptions(kubeconfig=str(config)))
    with pytest.raises(KubeError) as raised:
        kube.get(f"{NAMESPACES}/default")
    assert "CERTIFICATE_VERIFY_FAILED" in str(raised.value)
    assert f"through the proxy http://***@127.0.0.1:{proxy.port}" in str(raised.value)


def test_an_https_proxy_carries_tls_inside_its_own_tls(
    kubeconfig: Path, apiserver: ApiServer, tmp_path: Path
) -> None:
    """As client-go, the proxy's certificate is checked with the cluster's CA: the proxy's
    certificate here comes from the test server's CA."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    apiserver.ca.issue_cert("127.0.0.1").configure_cert(context)
    with ConnectProxy(tls=context, hosts={PRIVATE: "127.0.0.1"}) as secure_proxy:
        kube = through(kubeconfig, tmp_path, secure_proxy.url())
        assert kube.get(f"{NAMESPACES}/default")["metadata"]["name"] == "default"
        assert [t.status for t in secure_proxy.tunnels] == [200]


def test_a_plain_http_server_gets_requests_in_absolute_form_with_the_credentials() -> None:
    """Go's transport tunnels only TLS; a request to an http server goes to the proxy whole."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        proxy = parse_proxy_url(f"http://ops:pw@127.0.0.1:{port}", "a test")
        connection = Connection("api.example", 8080, "api.example:8080", proxy=proxy)
        accepted: list[bytes] = []

        def serve() -> None:
            peer, _ = listener.accept()
            with peer:
                accepted.append(peer.recv(65536))
                peer.sendall(answer)

        server = threading.Thread(target=serve)
        server.start()
        response = connection.request("GET", "/api", [], None, 10.0)
        assert response.read() == b"{}"
        server.join(10)
        connection.close()
    head = accepted[0].decode()
    assert head.startswith("GET http://api.example:8080/api HTTP/1.1\r\n")
    assert "Host: api.example:8080\r\n" in head
    assert "Proxy-Authorization: Basic b3BzOnB3\r\n" in head
