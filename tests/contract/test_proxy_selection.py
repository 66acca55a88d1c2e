"""Which proxy the adapter goes through, against a table of cases taken from the rules kubectl
follows: client-go's ``proxy-url`` (used for every request, loopback included) and Go's
``http.ProxyFromEnvironment`` as golang.org/x/net/http/httpproxy documents and implements it
(``Config.NoProxy``, ``useProxy``, ``parseProxy``): the scheme's variable, the upper-case name
first, an empty value as unset, ``host:port`` meaning http, localhost and loopback never
proxied, and NO_PROXY's ``*``, addresses, CIDR blocks, names matching their subdomains, leading
dots and ``*.`` matching subdomains only, and ports. Where we refuse what Go would go on with (a
socks5 proxy, an unparsable value), the error names the setting."""

from __future__ import annotations

import base64

import pytest

from libaccurate.network.kubeconfig import KubeError
from libaccurate.network.proxies import choose_proxy

PROXY = "http://proxy.corp:3128"
NO_PROXY_LIST = (
    "example.com, .dot.net, *.star.io, 192.168.1.1, 192.168.1.2:6443, 10.0.0.0/30, "
    "2001:db8::1, [2001:db8::3]:443, 2002:db8:a::/64, named.org:8443"
)


def chosen(server: str, environ: dict[str, str], proxy_url: str | None = None) -> str | None:
    proxy = choose_proxy(server, proxy_url, "prod", environ)
    return None if proxy is None else f"{proxy.scheme}://{proxy.host}:{proxy.port}"


@pytest.mark.parametrize(
    ("server", "environ", "expected"),
    [
        ("https://api.example", {}, None),
        ("https://api.example", {"HTTPS_PROXY": PROXY}, "http://proxy.corp:3128"),
        ("https://api.example", {"https_proxy": PROXY}, "http://proxy.corp:3128"),
        (
            "https://api.example",
            {"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:2"},
            "http://upper:1",
        ),
        (
            "https://api.example",
            {"HTTPS_PROXY": "", "https_proxy": "http://lower:2"},
            "http://lower:2",
        ),
        # Each scheme has its variable: HTTP_PROXY is for http servers only.
        ("https://api.example", {"HTTP_PROXY": PROXY}, None),
        ("http://api.example", {"HTTP_PROXY": PROXY}, "http://proxy.corp:3128"),
        ("http://api.example", {"HTTPS_PROXY": PROXY}, None),
        # A value without a scheme is http; default ports by scheme.
        ("https://api.example", {"HTTPS_PROXY": "proxy.corp:3128"}, "http://proxy.corp:3128"),
        ("https://api.example", {"HTTPS_PROXY": "proxy.corp"}, "http://proxy.corp:80"),
        ("https://api.example", {"HTTPS_PROXY": "https://secure.corp"}, "https://secure.corp:443"),
        # localhost and loopback are never proxied, whatever NO_PROXY says.
        ("https://localhost:6443", {"HTTPS_PROXY": PROXY}, None),
        ("https://127.0.0.1:6443", {"HTTPS_PROXY": PROXY}, None),
        ("https://127.3.2.1:6443", {"HTTPS_PROXY": PROXY}, None),
        ("https://[::1]:6443", {"HTTPS_PROXY": PROXY}, None),
        ("https://[::2]:6443", {"HTTPS_PROXY": PROXY}, "http://proxy.corp:3128"),
        ("https://localhost.example", {"HTTPS_PROXY": PROXY}, "http://proxy.corp:3128"),
        # NO_PROXY "*" turns the proxy off; no_proxy is read when NO_PROXY is unset.
        ("https://api.example", {"HTTPS_PROXY": PROXY, "NO_PROXY": "*"}, None),
        ("https://api.example", {"HTTPS_PROXY": PROXY, "no_proxy": "api.example"}, None),
    ],
)
def test_the_environment_chooses_by_scheme_and_never_for_loopback(
    server: str, environ: dict[str, str], expected: str | None
) -> None:
    assert chosen(server, environ) == expected


@pytest.mark.parametrize(
    ("server", "proxied"),
    [
        # A name matches itself and its subdomains, not names that merely end the same.
        ("https://example.com", False),
        ("https://api.example.com", False),
        ("https://API.Example.COM", False),
        ("https://notexample.com", True),
        # A leading dot, or "*.", matches subdomains only.
        ("https://dot.net", True),
        ("https://api.dot.net", False),
        ("https://star.io", True),
        ("https://deep.api.star.io", False),
        # Addresses: exact, with a port, in a CIDR block; IPv6 alike.
        ("https://192.168.1.1:6443", False),
        ("https://192.168.1.2:6443", False),
        ("https://192.168.1.2", True),
        ("https://192.168.1.3", True),
        ("https://10.0.0.3", False),
        ("https://10.0.0.4", True),
        ("https://[2001:db8::1]:6443", False),
        ("https://[2001:db8::2]", True),
        ("https://[2001:db8::3]", False),
        ("https://[2001:db8::3]:6443", True),
        ("https://[2002:db8:a::123]", False),
        # A name with a port matches that port only (443 when the URL names none).
        ("https://named.org:8443", False),
        ("https://api.named.org:8443", False),
        ("https://named.org", True),
        # An address entry never matches a name, nor a name entry an address.
        ("https://api.internal", True),
    ],
)
def test_no_proxy_entries_match_as_go_matches_them(server: str, proxied: bool) -> None:
    environ = {"HTTPS_PROXY": PROXY, "NO_PROXY": NO_PROXY_LIST}
    assert (chosen(server, environ) is not None) == proxied


def test_proxy_url_wins_over_the_environment_for_every_server_loopback_included() -> None:
    environ = {"HTTPS_PROXY": PROXY, "NO_PROXY": "*"}
    for server in ("https://api.example", "https://127.0.0.1:6443", "http://localhost:8080"):
        assert chosen(server, environ, "https://kube.proxy:8443") == "https://kube.proxy:8443"


def test_credentials_come_from_the_user_info_and_are_never_shown() -> None:
    proxy = choose_proxy("https://api.example", "http://me%40corp:p%3Ass@proxy:3128", "prod", {})
    assert proxy is not None
    assert proxy.authorization == "Basic " + base64.b64encode(b"me@corp:p:ss").decode()
    assert proxy.describe() == 'the proxy http://***@proxy:3128 (from proxy-url of cluster "prod")'
    from_environment = choose_proxy(
        "https://api.example", None, "prod", {"HTTPS_PROXY": "http://me:secret@proxy:3128"}
    )
    assert from_environment is not None
    assert from_environment.describe() == "the proxy http://***@proxy:3128 (from HTTPS_PROXY)"


@pytest.mark.parametrize(
    ("proxy_url", "environ", "message"),
    [
        (
            "ftp://proxy:21",
            {},
            'invalid proxy-url of cluster "prod" "ftp://proxy:21": unsupported scheme "ftp", '
            "must be http, https, or socks5",
        ),
        (
            "http://proxy:port",
            {},
            'invalid proxy-url of cluster "prod" "http://proxy:port": Port could not be cast',
        ),
        ("http://[::1", {}, 'invalid proxy-url of cluster "prod" "http://[::1": Invalid IPv6'),
        (
            "socks5://user:secret@socks:1080",
            {},
            'the proxy socks5://***@socks:1080 (from proxy-url of cluster "prod") is a SOCKS5 '
            "proxy, which Accurate does not speak",
        ),
        (
            None,
            {"HTTPS_PROXY": "socks5://socks:1080"},
            "the proxy socks5://socks:1080 (from HTTPS_PROXY) is a SOCKS5 proxy",
        ),
        (None, {"HTTPS_PROXY": "http://[::1"}, 'invalid HTTPS_PROXY "http://[::1": Invalid IPv6'),
        (None, {"HTTPS_PROXY": "http://:3128"}, "it names no host"),
    ],
)
def test_a_proxy_that_cannot_be_used_is_an_error_naming_the_setting(
    proxy_url: str | None, environ: dict[str, str], message: str
) -> None:
    with pytest.raises(KubeError) as raised:
        choose_proxy("https://api.example", proxy_url, "prod", environ)
    assert message in str(raised.value)
    assert "secret" not in str(raised.value)
