"""Which proxy, if any, the connections to the API server go through, chosen as kubectl does.

client-go's rules: the kubeconfig cluster's ``proxy-url`` wins, for every request, loopback
included; otherwise Go's ``http.ProxyFromEnvironment`` (golang.org/x/net/http/httpproxy):
``HTTPS_PROXY`` for an https server, ``HTTP_PROXY`` for an http one (the upper-case name first,
then the lower-case one, the first that is not empty), unless ``NO_PROXY`` (or ``no_proxy``)
names the server, and never for ``localhost`` or a loopback address. A ``NO_PROXY`` entry is
``*`` (no proxy at all), an IP address, a CIDR block, or a domain name, which matches itself and
its subdomains (``.example.com`` and ``*.example.com``: its subdomains only); an address or a
name may carry a port, and then only that port matches. An environment value without a scheme
means ``http://``. The server is named as its URL writes it: no name is resolved to decide.

Where we differ, we refuse where Go would go on: a proxy value Go cannot parse is an error
naming the variable (Go goes without a proxy, silently), and a ``socks5://`` proxy is refused,
naming where it was set, rather than spoken (DESIGN: no dependency for it; docs/design-notes.md).
Names are compared as written (no IDNA). Go's CGI rule (no ``HTTP_PROXY`` when
``REQUEST_METHOD`` is set) does not apply to a command-line tool and a controller.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, unquote, urlsplit

from libaccurate.network.kubeconfig import KubeError, Proxy

if TYPE_CHECKING:
    from ipaddress import IPv4Address, IPv6Address

    Address = IPv4Address | IPv6Address | None

DEFAULT_PORTS = {"http": 80, "https": 443, "socks5": 1080}
SPOKEN = ("http", "https")


def choose_proxy(
    server: str, proxy_url: str | None, cluster: str, environ: Mapping[str, str]
) -> Proxy | None:
    """The proxy for the API server at ``server`` (a URL), given the cluster's ``proxy-url`` and
    the environment; None to connect directly."""
    if proxy_url:
        return parse_proxy_url(proxy_url, f'proxy-url of cluster "{cluster}"')
    parts = urlsplit(server)
    scheme = "https" if parts.scheme == "https" else "http"
    name, value = _first_set(environ, f"{scheme.upper()}_PROXY", f"{scheme}_proxy")
    if not value:
        return None
    host = (parts.hostname or "").lower()
    port = parts.port or DEFAULT_PORTS[scheme]
    _, no_proxy = _first_set(environ, "NO_PROXY", "no_proxy")
    if not _use_proxy(host, str(port), no_proxy):
        return None
    return _proxy(_environment_url(value, name), name)


def parse_proxy_url(text: str, source: str) -> Proxy:
    """A kubeconfig ``proxy-url``: a URL whose scheme is http, https or socks5, as client-go's
    validation requires."""
    parts = _split(text, source)
    if parts.scheme not in DEFAULT_PORTS:
        raise KubeError(
            f'invalid {source} "{_without_credentials(text)}": unsupported scheme '
            f'"{parts.scheme}", must be http, https, or socks5'
        )
    return _proxy(parts, source)


def _first_set(environ: Mapping[str, str], *names: str) -> tuple[str, str]:
    for name in names:
        if environ.get(name):
            return name, environ[name]
    return names[0], ""


def _environment_url(value: str, name: str) -> SplitResult:
    """An environment value as Go reads it: a URL of a scheme it knows, else ``http://`` and
    the value (``proxy.example:3128``)."""
    parts = _split(value, name)
    if parts.scheme in DEFAULT_PORTS and parts.netloc:
        return parts
    return _split(f"http://{value}", name)


def _split(text: str, source: str) -> SplitResult:
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError as error:
        raise KubeError(f'invalid {source} "{_without_credentials(text)}": {error}') from None
    return parts


def _proxy(parts: SplitResult, source: str) -> Proxy:
    shown = _without_credentials(parts.geturl())
    if parts.scheme == "socks5":
        raise KubeError(
            f"the proxy {shown} (from {source}) is a SOCKS5 proxy, which Accurate does not "
            "speak: use an http:// or https:// proxy, or name the API server in NO_PROXY"
        )
    try:
        port = parts.port or DEFAULT_PORTS[parts.scheme]
    except ValueError as error:
        raise KubeError(f"invalid proxy {shown} (from {source}): {error}") from None
    if not parts.hostname:
        raise KubeError(f"invalid proxy {shown} (from {source}): it names no host")
    authorization = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        authorization = f"Basic {base64.b64encode(pair).decode()}"
    return Proxy(parts.scheme, parts.hostname, port, authorization, shown, source)


def _without_credentials(url: str) -> str:
    """The URL with its user info replaced, so no message or log shows a password."""
    scheme, separator, rest = url.rpartition("://")
    authority, slash, path = rest.partition("/")
    if "@" not in authority:
        return url
    return f"{scheme}{separator}***@{authority.rpartition('@')[2]}{slash}{path}"


def _use_proxy(host: str, port: str, no_proxy: str) -> bool:
    """Go's ``useProxy``: whether a request to ``host``:``port`` goes through the proxy."""
    if host == "localhost":
        return False
    address = _ip(host)
    if address is not None and address.is_loopback:
        return False
    for entry in (part.strip().lower() for part in no_proxy.split(",")):
        if entry and _matches(entry, host, port, address):
            return False
    return True


def _matches(entry: str, host: str, port: str, address: Address) -> bool:
    """Whether one NO_PROXY entry names ``host``:``port``."""
    import ipaddress

    if entry == "*":
        return True
    if "/" in entry:
        try:
            block = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return False
        return address is not None and address in block
    name, wanted = _split_host_port(entry)
    if not name:
        return False  # ":80", as Go: malformed, ignored
    if port != wanted and wanted:
        return False
    entry_address = _ip(name)
    if entry_address is not None:
        return address is not None and entry_address == address
    suffix = name[1:] if name.startswith("*.") else name
    if suffix.startswith("."):
        return host.endswith(suffix)
    return host == suffix or host.endswith(f".{suffix}")


def _split_host_port(entry: str) -> tuple[str, str]:
    """Go's ``net.SplitHostPort`` where it succeeds; the entry itself, with no port, where it
    fails (a bare name, address, or IPv6 address)."""
    if entry.startswith("["):
        end = entry.find("]")
        if end > 0 and entry[end + 1 : end + 2] == ":":
            return entry[1:end], entry[end + 2 :]
        return entry, ""
    host, colon, port = entry.rpartition(":")
    if not colon or ":" in host:
        return entry, ""
    return host, port


def _ip(text: str) -> Address:
    """The IP address ``text`` writes, or None for a name."""
    if not text or not (text[0].isdigit() or ":" in text):
        return None
    import ipaddress

    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None
