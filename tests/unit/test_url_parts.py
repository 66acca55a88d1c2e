"""The adapter reads a server URL and quotes names without urllib.parse when they are in the
plain form kubeconfigs and Kubernetes names use (its import was 5 % of a ``list``), and must then
give exactly what urllib.parse gives; any other form goes to urllib.parse itself."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from libaccurate.network.kube import KubeError, _server_parts
from libaccurate.paths import resource_path

SERVERS = [
    "https://127.0.0.1:6443",
    "https://kubernetes.default.svc",
    "https://api.example.com:443/prefix/",
    "http://localhost:8080",
    "127.0.0.1:8080",
    "https://10.0.0.1:0",
    "https://host:00080",
    "https://host:65535",
    "https://host:65536",
    "https://host:99999",
    "https://host:",
    "https://host:abc",
    "https://Upper.Example.com",
    "HTTPS://host",
    "https://[::1]:6443",
    "https://user:pass@host:6443",
    "https://host/a b",
    "https://host/p?q=1#f",
    "https://host\t:6443",
    " https://host",
    "https://a..b",
    "socks5://host:1080",
]


def _expected(host: str) -> tuple[str, str | None, int | None, str, str] | str:
    """What the adapter read from urlsplit before: the parts, or the error's message."""
    parts = urlsplit(host if "://" in host else f"http://{host}")
    try:
        port = parts.port
    except ValueError as error:
        return f"invalid API server address {host}: {error}"
    return parts.scheme, parts.hostname, port, parts.path, parts.netloc.rpartition("@")[2]


def _read(host: str) -> tuple[str, str | None, int | None, str, str] | str:
    try:
        return _server_parts(host)
    except KubeError as error:
        return str(error)


@pytest.mark.parametrize("host", SERVERS)
def test_a_server_url_reads_as_urlsplit_reads_it(host: str) -> None:
    assert _read(host) == _expected(host)


@given(st.from_regex(r"\A(https?|HTTP)://[a-zA-Z0-9.\-]{0,12}(:[0-9]{0,6})?(/[a-z/ ?#%]{0,8})?\Z"))
@example("https://host:65536/x")
def test_any_url_near_the_plain_form_reads_as_urlsplit_reads_it(host: str) -> None:
    assert _read(host) == _expected(host)


@given(st.text(max_size=12))
@example("team-a.dev_~x")
@example("a/b")
@example("ü")
def test_a_name_in_a_path_is_quoted_as_urllib_quotes_it(name: str) -> None:
    path = resource_path("", "v1", "configmaps", namespace=name or None, name=name or None)
    quoted = quote(name, safe="")
    expected = f"/api/v1/namespaces/{quoted}/configmaps/{quoted}" if name else "/api/v1/configmaps"
    assert path == expected
