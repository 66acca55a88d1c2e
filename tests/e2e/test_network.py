"""The real ``kubectl accurate`` and the controller as a process, behind a proxy, as users behind a
corporate proxy or in front of a private API endpoint meet them (issue 29): the API server is
named by a name only the proxy knows (accurate_testbed.proxy), so nothing reaches it but
through the proxy. The proxy is chosen as kubectl chooses it: the cluster's ``proxy-url``, else
``HTTPS_PROXY`` unless ``NO_PROXY`` names the server. Errors name the proxy and its answer.
The same tests run against a real cluster: the proxy then forwards to its API server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from accurate_testbed.apiserver.api import Caller
from accurate_testbed.apiserver.authentication import ADMIN
from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.link import Link
from accurate_testbed.processes import environment, launch
from accurate_testbed.proxy import ConnectProxy
from accurate_testbed.rerouting import rerouted, server_address
from libaccurate.constants import LABEL_PARENT
from tests.e2e.cli import failed, run_plugin, succeeded
from tests.e2e.controller import (
    FAST,
    PROGRAM,
    READY_TIMEOUT,
    Controllers,
    Scene,
    passing_on_suite_labels,
)

PRIVATE = "api.private.accurate.test"
CREDENTIALS = ("ops", "s3cret")


@pytest.fixture
def proxy(kubeconfig: Path) -> Iterator[ConnectProxy]:
    host, _ = server_address(kubeconfig)
    with ConnectProxy(credentials=CREDENTIALS, hosts={PRIVATE: host}) as running:
        yield running


@pytest.fixture
def private(kubeconfig: Path, tmp_path: Path) -> Path:
    """A kubeconfig naming the API server by the name only the proxy knows."""
    _, port = server_address(kubeconfig)
    return rerouted(kubeconfig, tmp_path / "private", f"https://{PRIVATE}:{port}")


@pytest.fixture
def tree(subnamespace_crd: None, scene: Scene) -> tuple[str, str]:
    root = scene.root()
    return root, scene.namespace("child", {LABEL_PARENT: root})


def plugin(*args: str, kubeconfig: Path, proxy: str = "") -> str:
    """``kubectl accurate ARGS --no-markers``, with ``proxy`` as HTTPS_PROXY."""
    listed = run_plugin(*args, "--no-markers", kubeconfig=kubeconfig, HTTPS_PROXY=proxy)
    return succeeded(listed)


def test_list_through_the_proxy_of_https_proxy_is_the_list_without_it(
    kubeconfig: Path, private: Path, proxy: ConnectProxy, tree: tuple[str, str]
) -> None:
    root, child = tree
    direct = plugin("list", root, kubeconfig=kubeconfig)
    assert direct == f"{root}\n└── {child}\n"
    assert plugin("list", root, kubeconfig=private, proxy=proxy.url(CREDENTIALS)) == direct
    assert {tunnel.status for tunnel in proxy.tunnels} == {200}
    assert {tunnel.user for tunnel in proxy.tunnels} == {"ops"}


def test_a_drawn_list_through_the_proxy_connects_ahead_on_as_many_tunnels_as_it_has_lists(
    kubeconfig: Path, private: Path, proxy: ConnectProxy, tree: tuple[str, str]
) -> None:
    """``list ROOT`` with no flag opens its connections while the plugin loads
    (kubectl_accurate.preconnect): its two LISTs, namespaces and SubNamespaces, go over the
    two tunnels opened ahead, and no more are opened."""
    root, child = tree
    direct = succeeded(run_plugin("list", root, kubeconfig=kubeconfig))
    assert direct.startswith(f"{root} [r]\n└── {child} [g]\n")
    through = run_plugin("list", root, kubeconfig=private, HTTPS_PROXY=proxy.url(CREDENTIALS))
    assert succeeded(through) == direct
    assert [tunnel.status for tunnel in proxy.tunnels] == [200, 200]


def test_proxy_url_wins_over_the_environment(
    kubeconfig: Path, proxy: ConnectProxy, tree: tuple[str, str], tmp_path: Path
) -> None:
    root, child = tree
    _, port = server_address(kubeconfig)
    config = rerouted(
        kubeconfig,
        tmp_path / "proxied",
        f"https://{PRIVATE}:{port}",
        proxy_url=proxy.url(CREDENTIALS),
    )
    output = plugin("list", root, kubeconfig=config, proxy="http://127.0.0.1:9")
    assert output == f"{root}\n└── {child}\n"


def test_no_proxy_naming_the_server_goes_direct(
    private: Path, proxy: ConnectProxy, tree: tuple[str, str]
) -> None:
    error = failed(
        run_plugin(
            "list",
            tree[0],
            kubeconfig=private,
            HTTPS_PROXY=proxy.url(CREDENTIALS),
            NO_PROXY="localhost,.accurate.test",
        )
    )
    assert f"cannot reach the API server at https://{PRIVATE}:" in error
    assert "proxy" not in error
    assert proxy.tunnels == []


def test_a_proxy_asking_for_credentials_is_named_with_its_answer(
    private: Path, proxy: ConnectProxy, tree: tuple[str, str]
) -> None:
    error = failed(run_plugin("list", tree[0], kubeconfig=private, HTTPS_PROXY=proxy.url()))
    assert f"the proxy http://127.0.0.1:{proxy.port} (from HTTPS_PROXY)" in error
    assert "answered 407 Proxy Authentication Required" in error
    assert "user:password" in error  # where the credentials go


def test_a_socks5_proxy_is_refused_naming_the_setting(private: Path) -> None:
    error = failed(run_plugin("list", kubeconfig=private, HTTPS_PROXY="socks5://127.0.0.1:1080"))
    assert "the proxy socks5://127.0.0.1:1080 (from HTTPS_PROXY) is a SOCKS5 proxy" in error


def test_disable_compression_reads_the_whole_list_uncompressed(
    kubeconfig: Path, apiserver: ApiServer, tmp_path: Path
) -> None:
    """kubectl's flag: the same output, the bytes of the JSON on the wire instead of gzip's."""
    namespaces = apiserver.registry.find("", "v1", "namespaces")
    assert namespaces is not None
    for number in range(600):  # a LIST well past kube-apiserver's 128 KiB threshold
        manifest = {"metadata": {"name": f"many-{number}", "labels": {"team": "a" * 40}}}
        apiserver.api.create(namespaces, "", manifest, Caller(ADMIN))
    received: dict[tuple[str, ...], int] = {}
    outputs = set()
    with Link(server_address(kubeconfig)) as link:
        config = rerouted(kubeconfig, tmp_path / "linked", f"https://127.0.0.1:{link.address[1]}")
        for flags in ((), ("--disable-compression",)):
            link.wires.reset()
            outputs.add(plugin("list", *flags, kubeconfig=config))
            received[flags] = link.wires.down.carried
    assert len(outputs) == 1
    assert received[()] * 5 < received[("--disable-compression",)]


def test_the_controller_works_through_the_proxy_of_https_proxy(
    controllers: Controllers, private: Path, proxy: ConnectProxy, scene: Scene
) -> None:
    """As client-go in a pod with proxy variables: its lists, watches and writes all go through
    the tunnel, and a SubNamespace asked for meanwhile is made."""
    if controllers.pool is not None:
        controllers.pool.stop()  # two controllers would fight
    config = controllers.config_file(passing_on_suite_labels(""))
    running = launch(
        [str(PROGRAM), "--kubeconfig", str(private), "--config-file", str(config)],
        [*FAST, "--no-leader-election"],
        controllers.folder / "controller-proxied.log",
        environment(HTTPS_PROXY=proxy.url(CREDENTIALS), NO_PROXY="localhost"),
    )
    controllers.started.append(running)
    scene.wait(running.ready, "the controller to be ready", READY_TIMEOUT)
    root = scene.root()
    made = scene.subnamespace(root, "made")
    scene.wait(lambda: scene.ns(made), "the sub-namespace made through the proxy")
    assert len(proxy.tunnels) >= 2  # its LISTs and watches, over connections of their own
    assert {tunnel.status for tunnel in proxy.tunnels} == {200}
