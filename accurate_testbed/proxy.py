"""An HTTP proxy that opens CONNECT tunnels, as corporate proxies and cloud egress proxies do, for
tests and benchmarks: optionally asking for credentials (``Proxy-Authorization: Basic``, 407
without them), optionally over TLS (an ``https://`` proxy), and knowing names of its own
(``hosts``): a name only the proxy can resolve is how a test shows that a client went through
it, as with a private API endpoint. It records each tunnel it was asked for.

It speaks only CONNECT (other methods get 405) and one request a connection, which is all a
client of an https API server sends it. A tunnel is carried through ``accurate_testbed.link``,
so the proxy may also stand behind a slow link.
"""

from __future__ import annotations

import base64
import socket
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from accurate_testbed.link import Listener, Shape, Wires, splice

_TIMEOUT = 10.0


@dataclass
class Tunnel:
    """A CONNECT the proxy was asked for: the target as asked, and the user it came as."""

    target: str
    user: str | None
    status: int


class ConnectProxy(Listener):
    """The proxy on 127.0.0.1. ``credentials`` (user, password) makes it ask for them; ``tls``
    makes it an https proxy; ``hosts`` maps names to the addresses it connects to; ``shape``
    puts its tunnels over one link of that shape. ``tunnels`` lists what it was asked for,
    ``wires`` count the bytes its tunnels carried."""

    def __init__(
        self,
        credentials: tuple[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
        hosts: Mapping[str, str] | None = None,
        shape: Shape | None = None,
    ) -> None:
        super().__init__()
        self.credentials, self.tls = credentials, tls
        self.hosts = dict(hosts or {})
        self.port = self.address[1]
        self.tunnels: list[Tunnel] = []
        self.wires = Wires.of(shape)

    def url(self, credentials: tuple[str, str] | None = None) -> str:
        """The proxy's URL, with ``credentials`` as its user info when given."""
        scheme = "https" if self.tls else "http"
        user = f"{credentials[0]}:{credentials[1]}@" if credentials else ""
        return f"{scheme}://{user}127.0.0.1:{self.port}"

    def accepted(self, client: socket.socket) -> None:
        threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            client.settimeout(_TIMEOUT)
            if self.tls is not None:
                client = self.tls.wrap_socket(client, server_side=True)
            self._tunnel(client)
        except OSError:
            client.close()

    def _tunnel(self, client: socket.socket) -> None:
        reader = client.makefile("rb")
        head = [line.decode("latin-1").rstrip("\r\n") for line in iter(reader.readline, b"\r\n")]
        reader.close()
        method, _, rest = head[0].partition(" ") if head else ("", "", "")
        target = rest.partition(" ")[0]
        fields = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in head[1:])
        }
        user = _user(fields.get("proxy-authorization", ""))
        if method != "CONNECT":
            return self._answer(client, target, user, 405, "Method Not Allowed")
        if self.credentials is not None and user != ":".join(self.credentials):
            return self._answer(client, target, user, 407, "Proxy Authentication Required")
        host, _, port = target.rpartition(":")
        try:
            server = socket.create_connection((self.hosts.get(host, host), int(port)), _TIMEOUT)
        except (OSError, ValueError):
            return self._answer(client, target, user, 502, "Bad Gateway")
        self._answer(client, target, user, 200, "Connection established", close=False)
        client.settimeout(None)
        splice(client, server, self.wires)

    def _answer(
        self,
        client: socket.socket,
        target: str,
        user: str | None,
        status: int,
        reason: str,
        close: bool = True,
    ) -> None:
        self.tunnels.append(Tunnel(target, user.partition(":")[0] if user else None, status))
        extra = 'Proxy-Authenticate: Basic realm="accurate-testbed"\r\n' if status == 407 else ""
        ending = "Content-Length: 0\r\nConnection: close\r\n" if close else ""
        client.sendall(f"HTTP/1.1 {status} {reason}\r\n{extra}{ending}\r\n".encode())
        if close:
            client.close()


def _user(authorization: str) -> str | None:
    """``user:password`` from a Basic Proxy-Authorization, None without one."""
    scheme, _, encoded = authorization.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        return base64.b64decode(encoded, validate=True).decode()
    except ValueError:
        return None
