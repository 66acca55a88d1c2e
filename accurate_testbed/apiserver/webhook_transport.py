"""HTTP/1.1 POSTs to webhooks over TLS connections kept alive between calls.

kube-apiserver keeps one client per webhook (its ClientManager caches them) over a transport that
keeps connections alive, so a webhook pays for a TLS handshake once, not per call. Webhook
answers are small JSON bodies, so a call is one write and a few buffered reads; this reads them
itself rather than with http.client, whose header parsing (the email package) cost a call more
CPU than its TLS did, on every quota status update and every admitted write.
"""

from __future__ import annotations

import socket
import ssl
import threading

_MAX_LINE = 65536  # longer status or header lines are a broken answer, not a reason to wait


class ProtocolError(Exception):
    """An answer that is not HTTP/1.x; ``str()`` says what was wrong, as Go's transport does."""


class Closed(ProtocolError):
    """The webhook closed the connection without answering (Go: ``EOF``)."""

    def __init__(self) -> None:
        super().__init__("EOF")


class Connection:
    """One connection to a webhook; ``timeout`` bounds the connect and each read or write."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext, timeout: float) -> None:
        raw = socket.create_connection((host, port), timeout)
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = context.wrap_socket(raw, server_hostname=host)
        except BaseException:
            raw.close()
            raise
        self._reader = self._sock.makefile("rb")
        self._host = f"{host}:{port}"
        self.open = True

    def set_timeout(self, timeout: float) -> None:
        if self._sock.gettimeout() != timeout:  # setting it costs system calls
            self._sock.settimeout(timeout)

    def post(self, target: str, body: bytes) -> tuple[int, bytes]:
        """Send the body in one write and read the whole answer: its status code and body.
        ``open`` turns false when the answer says the connection ends with it."""
        head = (
            f"POST {target} HTTP/1.1\r\nHost: {self._host}\r\n"
            "Content-Type: application/json\r\nAccept: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        self._sock.sendall(head.encode("latin-1") + body)
        version, code = self._status()
        headers = self._headers()
        payload = self._body(headers)
        if not _keeps_alive(version, headers):
            self.close()
        return code, payload

    def close(self) -> None:
        self.open = False
        self._reader.close()
        self._sock.close()

    def _line(self) -> bytes:
        line = self._reader.readline(_MAX_LINE + 1)
        if len(line) > _MAX_LINE:
            raise ProtocolError("net/http: response header line too long")
        return line

    def _status(self) -> tuple[str, int]:
        line = self._line()
        if not line:
            raise Closed()
        version, _, rest = line.decode("latin-1").rstrip("\r\n").partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise ProtocolError(f"malformed HTTP response {line.decode('latin-1').strip()!r}")
        return version, int(code)

    def _headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        while (line := self._line()) not in (b"\r\n", b"\n", b""):
            name, separator, value = line.decode("latin-1").partition(":")
            if not separator:
                raise ProtocolError(f"malformed MIME header line: {line.decode('latin-1').strip()}")
            headers[name.strip().lower()] = value.strip().lower()
        return headers

    def _body(self, headers: dict[str, str]) -> bytes:
        if "chunked" in headers.get("transfer-encoding", ""):
            return self._chunks()
        length = headers.get("content-length")
        if length is None:
            return self._reader.read()  # the body runs to the end of the connection
        if not length.isdigit():
            raise ProtocolError(f"bad Content-Length {length!r}")
        return self._exactly(int(length))

    def _chunks(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = self._line().split(b";")[0].strip()
            try:
                remaining = int(size, 16)
            except ValueError:
                raise ProtocolError("invalid byte in chunk length") from None
            if remaining == 0:
                while self._line() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(self._exactly(remaining))
            self._line()

    def _exactly(self, size: int) -> bytes:
        data = self._reader.read(size)
        if len(data) < size:
            raise ProtocolError("unexpected EOF")
        return data


def _keeps_alive(version: str, headers: dict[str, str]) -> bool:
    """Whether another request may follow on the connection: HTTP/1.1 without ``Connection:
    close``, and a body whose end was marked rather than being the end of the connection."""
    delimited = "content-length" in headers or "chunked" in headers.get("transfer-encoding", "")
    return version == "HTTP/1.1" and headers.get("connection", "").lower() != "close" and delimited


Address = tuple[str, int, str]  # host, port, CA bundle


class KeptConnections:
    """Idle connections to webhooks by address and CA bundle."""

    def __init__(self) -> None:
        self._idle: dict[Address, list[Connection]] = {}
        self._lock = threading.Lock()

    def take(self, key: Address, timeout: float) -> Connection | None:
        with self._lock:
            idle = self._idle.get(key)
            connection = idle.pop() if idle else None
        if connection is not None:
            connection.set_timeout(timeout)
        return connection

    def give_back(self, key: Address, connection: Connection) -> None:
        if not connection.open:
            return
        with self._lock:
            self._idle.setdefault(key, []).append(connection)
