"""A small HTTP server for the probe and metrics endpoints (/healthz, /readyz, /metrics).

Each route is a callable returning (status, body, content type), so the server knows nothing
about what "healthy" means; the caller decides. Addresses are written as the Go controller's
flags take them (":8081" listens on every interface).
"""

from __future__ import annotations

import logging
import socket
import socketserver
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Route = Callable[[], tuple[int, bytes, str]]

log = logging.getLogger(__name__)


class Server:
    """A running server; ``port`` is the one bound (useful with port 0)."""

    def __init__(self, http: Listener) -> None:
        self._http = http
        self._thread = threading.Thread(
            target=http.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"http-{self.port}",
            daemon=True,
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return self._http.port

    def stop(self) -> None:
        """Stop answering and free the port; requests in progress are not waited for."""
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()


def serve(addr: str, routes: Mapping[str, Route]) -> Server:
    """Listen on ``addr`` ("host:port"; empty host = all interfaces, port 0 = any free one) and
    answer GET/HEAD on ``routes``; anything else is 404. Raises ValueError for a malformed
    address and OSError when it cannot listen there."""
    host, port = parse_addr(addr)
    try:
        http = Listener(host, port, _handler(dict(routes)))
    except OSError as error:
        raise OSError(error.errno, f"cannot listen on {addr}: {error.strerror or error}") from error
    return Server(http)


def parse_addr(addr: str) -> tuple[str, int]:
    """("", 8081) for ":8081", ("::1", 80) for "[::1]:80"."""
    host, colon, port = addr.rpartition(":")
    if not colon or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"invalid listen address {addr!r}: use HOST:PORT, such as :8081")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


class Listener(ThreadingHTTPServer):
    """A threaded HTTP server that listens where a Go controller would for the same flag:
    an empty host means every interface, IPv6 and IPv4; a host with a colon is IPv6. Shared by
    the probe, metrics and webhook servers."""

    def __init__(self, host: str, port: int, handler: type[BaseHTTPRequestHandler]) -> None:
        self.dual_stack = not host and socket.has_dualstack_ipv6()
        if self.dual_stack or ":" in host:
            self.address_family = socket.AF_INET6
        super().__init__((host, port), handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def server_bind(self) -> None:
        """Bind without the reverse DNS lookup http.server does, which can stall startup for
        seconds where DNS is slow; the name is never used."""
        if self.dual_stack:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), self.port


def _handler(routes: dict[str, Route]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer(send_body=True)

        def do_HEAD(self) -> None:
            self._answer(send_body=False)

        def _answer(self, send_body: bool) -> None:
            route = routes.get(self.path.split("?", 1)[0])
            if route is None:
                status, body, content_type = 404, b"404 page not found\n", "text/plain"
            else:
                status, body, content_type = _call(route, self.path)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if send_body:
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Probes arrive every few seconds; logging each would drown the useful lines."""

    return Handler


def _call(route: Route, path: str) -> tuple[int, bytes, str]:
    """A route that raises is a 500 naming the error, never a dropped connection."""
    try:
        status, body, content_type = route()
        return status, body, content_type
    except Exception as error:
        log.exception("handler for %s failed", path)
        return 500, f"internal error: {error}\n".encode(), "text/plain"
