"""Connections to the API server through a proxy, as Go's transport makes them for client-go.

An https API server is reached through a CONNECT tunnel (RFC 9110, section 9.3.6), over TCP to
an ``http://`` proxy or over TLS to an ``https://`` one, with the proxy URL's user info sent as
``Proxy-Authorization: Basic``; TLS to the API server then runs inside the tunnel, its
certificate checked for the same name as without a proxy. A plain-http API server is not
tunnelled: its requests go to the proxy in absolute form (``http_connection``). The proxy's
own certificate is checked with the API server's TLS settings, as client-go gives Go's
transport one TLS configuration for both. A CONNECT is given a minute when the request has no
timeout of its own, as Go gives it. Every failure before the tunnel stands is a ``ProxyError``
that names the proxy and what it did: refused, timed out, answered 407.
"""

from __future__ import annotations

import io
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, TypeVar

from libaccurate.network.http_connection import (
    ProtocolError,
    Socket,
    open_socket,
    read_head,
    secure,
)

if TYPE_CHECKING:
    import socket

    from libaccurate.network.proxies import Proxy

CONNECT_TIMEOUT = 60.0
_CHUNK = 65536
T = TypeVar("T")


class ProxyError(OSError):
    """The proxy could not be reached or would not open the tunnel; the message says which."""


def through(
    proxy: Proxy,
    address: tuple[str, int],
    timeout: float | None,
    tls: ssl.SSLContext | None,
    server_name: str | None,
) -> Socket:
    """A connection to ``address`` through ``proxy``: a tunnel with TLS to the server inside
    when ``tls`` is given, else a connection to the proxy itself."""
    limit = timeout or CONNECT_TIMEOUT
    try:
        sock = open_socket(proxy.host, proxy.port, limit)
    except OSError as error:
        raise ProxyError(f"cannot connect to {proxy.describe()}: {error}") from error
    try:
        if proxy.scheme == "https":
            sock = _to_proxy(sock, proxy, tls)
        if tls is None:
            return sock
        _connect(sock, proxy, address, limit)
        if isinstance(sock, ssl.SSLSocket):
            return TlsInTls(sock, tls, server_name)
        return secure(sock, tls, server_name)
    except BaseException:
        sock.close()
        raise


def _to_proxy(sock: socket.socket, proxy: Proxy, tls: ssl.SSLContext | None) -> socket.socket:
    context = tls or ssl.create_default_context()
    try:
        return secure(sock, context, proxy.host)
    except ssl.SSLError as error:
        raise ProxyError(f"TLS with {proxy.describe()} failed: {error}") from error


def _connect(sock: socket.socket, proxy: Proxy, address: tuple[str, int], limit: float) -> None:
    """Ask the proxy for a tunnel to ``address`` and read its answer, which must be 200."""
    host, port = address
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
    if proxy.authorization:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    reader = sock.makefile("rb")
    try:
        sock.sendall("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n")
        status, reason, _, _ = read_head(reader)
    except TimeoutError as error:
        message = f"{proxy.describe()} did not answer the CONNECT to {target} within {limit:g} s"
        raise ProxyError(message) from error
    except ProtocolError as error:
        raise ProxyError(f"{proxy.describe()} did not answer as an HTTP proxy: {error}") from error
    finally:
        reader.close()
    if status != 200:
        hint = ""
        if status == 407:
            hint = (
                ": the credentials in the proxy URL were refused"
                if proxy.authorization
                else ": it asks for credentials; give them in the proxy URL "
                "(http://user:password@host:port)"
            )
        raise ProxyError(f"{proxy.describe()} answered {status} {reason} to CONNECT {target}{hint}")


class TlsInTls:
    """TLS to the API server inside a TLS connection to an https proxy. The ssl module wraps
    only real sockets, so this TLS runs on memory buffers (``ssl.SSLObject``) that the outer
    connection fills and empties."""

    def __init__(self, outer: ssl.SSLSocket, tls: ssl.SSLContext, server_name: str | None) -> None:
        self._outer = outer
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._tls = tls.wrap_bio(self._incoming, self._outgoing, server_hostname=server_name)
        self._call(self._tls.do_handshake)

    def sendall(self, data: bytes, /) -> None:
        view = memoryview(data)
        while view:
            view = view[self._call(self._tls.write, view) :]

    def recv_into(self, buffer: memoryview) -> int:
        try:
            data = self._call(self._tls.read, len(buffer))
        except ssl.SSLZeroReturnError:  # the server closed its TLS cleanly
            return 0
        buffer[: len(data)] = data
        return len(data)

    def settimeout(self, timeout: float | None, /) -> None:
        self._outer.settimeout(timeout)

    def makefile(self, mode: Literal["rb"]) -> io.BufferedReader:
        return io.BufferedReader(_Raw(self))

    def fileno(self) -> int:
        return self._outer.fileno()

    def close(self) -> None:
        self._outer.close()

    def _call(self, operation: Callable[..., T], *args: object) -> T:
        """Run a TLS operation, moving records between the buffers and the outer connection
        until it can complete."""
        while True:
            try:
                result = operation(*args)
            except ssl.SSLWantReadError:
                self._flush()
                data = self._outer.recv(_CHUNK)
                if data:
                    self._incoming.write(data)
                else:
                    self._incoming.write_eof()
                continue
            self._flush()
            return result

    def _flush(self) -> None:
        data = self._outgoing.read()
        if data:
            self._outer.sendall(data)


class _Raw(io.RawIOBase):
    """The inner TLS stream as a file, for a buffered reader over it."""

    def __init__(self, tunnel: TlsInTls) -> None:
        self._tunnel = tunnel

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        return self._tunnel.recv_into(buffer)
