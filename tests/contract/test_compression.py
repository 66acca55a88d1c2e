"""Compressed responses. kube-apiserver's rule (APIResponseCompression, on by default since 1.16;
responsewriters/writers.go): a response over 128 KiB is gzipped for a client whose
Accept-Encoding lists gzip, with ``Vary: Accept-Encoding``; smaller ones, and watches, never
are. The in-memory server must follow it (pinned here through the ``kubernetes`` package's
client, so that the same tests run against a real cluster), and the adapter must ask for gzip,
as kubectl does, unless ``--disable-compression`` or the cluster's ``disable-compression: true``
says not to: bytes received, counted by a link in front of the server, show which it did."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accurate_testbed.cluster import Cluster
from accurate_testbed.link import Link
from accurate_testbed.rerouting import rerouted, server_address
from libaccurate.network.kube import ConnectionOptions, Kube

BIG = 200 * 1024  # past the 128 KiB threshold
SMALL = 100 * 1024


def _data(size: int) -> str:
    lines = (f"line {number} of a configuration file\n" for number in range(size))
    text = "".join(lines)
    return text[:size]


@pytest.fixture
def configmaps(cluster: Cluster) -> Iterator[tuple[str, str]]:
    """A namespace of the test's holding ConfigMaps ``big`` and ``small``; its path prefix."""
    namespace = cluster.namespace("compressed")
    kube = cluster.kube()
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    for name, size in (("big", BIG), ("small", SMALL)):
        kube.create(base, {"metadata": {"name": name}, "data": {"blob": _data(size)}})
    yield base, namespace


def _get(api_client: Any, path: str, headers: dict[str, str]) -> Any:
    """A response of the ``kubernetes`` package's client, its body unread."""
    method, url, sent, _, _ = api_client.param_serialize(
        "GET",
        path,
        header_params={"Accept": "application/json", **headers},
        auth_settings=["BearerToken"],
    )
    return api_client.call_api(method, url, sent)


def test_responses_over_128_kib_are_gzipped_for_a_client_that_asks(
    api_client: Any, configmaps: tuple[str, str]
) -> None:
    base, _ = configmaps
    gzip = {"Accept-Encoding": "gzip"}
    big = _get(api_client, f"{base}/big", gzip)
    assert big.headers.get("Content-Encoding") == "gzip"
    assert "Accept-Encoding" in big.headers.get("Vary", "")
    assert _get(api_client, f"{base}/small", gzip).headers.get("Content-Encoding") is None
    assert _get(api_client, f"{base}/big", {}).headers.get("Content-Encoding") is None
    assert _get(api_client, base, gzip).headers.get("Content-Encoding") == "gzip"


def test_a_watch_is_never_gzipped(api_client: Any, configmaps: tuple[str, str]) -> None:
    base, _ = configmaps
    watch = _get(api_client, f"{base}?watch=true&timeoutSeconds=1", {"Accept-Encoding": "gzip"})
    assert watch.headers.get("Content-Encoding") is None
    assert b"big" in watch.read()  # the initial ADDED events, plain


def _received(kubeconfig: Path, folder: Path, path: str, **given: Any) -> tuple[int, Any]:
    """Bytes the adapter received for GET ``path`` through a link counting them, and the
    object; ``disable_compression`` as a kubeconfig field or as the flag's option."""
    flag = given.pop("flag", False)
    with Link(server_address(kubeconfig)) as link:
        config = rerouted(
            kubeconfig, folder / "kubeconfig", f"https://127.0.0.1:{link.address[1]}", **given
        )
        kube = Kube.connect(ConnectionOptions(kubeconfig=str(config), disable_compression=flag))
        found = kube.get(path)
        return link.wires.down.carried, found


def test_the_adapter_asks_for_gzip_unless_told_not_to(
    kubeconfig: Path, configmaps: tuple[str, str], tmp_path: Path
) -> None:
    base, _ = configmaps
    compressed, found = _received(kubeconfig, tmp_path, f"{base}/big")
    assert found["data"]["blob"] == _data(BIG)
    assert compressed < BIG / 8
    for how in ({"flag": True}, {"disable_compression": True}):
        plain, same = _received(kubeconfig, tmp_path, f"{base}/big", **how)
        assert plain > BIG, how
        assert same["data"] == found["data"]
