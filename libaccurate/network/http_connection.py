"""One HTTP/1.1 connection to the API server: a request out, its response in, framed as RFC 9112
says (a length, chunks, or until the server closes).

Why not ``http.client``: it parses response headers with the ``email`` package, whose import was
12 % of a ``kubectl accurate list`` once PyYAML was gone (issue 18, bench/RESULTS.md), while the
API server's responses need none of it: a status line, ``Name: value`` lines, and one of three
framings. What this connection does is what the adapter used of ``http.client``: keep-alive,
TLS with the server name of our choice, a timeout on the connect and on each read, whole bodies
and streamed ones (watches), and bodies in gzip (``Content-Encoding: gzip``, which
kube-apiserver sends for responses over 128 KiB to a client that asks), inflated as they arrive.
Header names are compared without case; a header sent twice is joined with commas, as RFC 9110
allows for the headers read here.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    import ssl
    from io import BufferedReader

    from libaccurate.network.proxies import Proxy

# Limits on what the server may send before its body, as http.client has.
MAX_LINE = 65536
MAX_HEADERS = 100
# Statuses whose responses have no body whatever their headers say.
_NO_BODY = frozenset({204, 304})


class Socket(Protocol):
    """What a connection uses of its socket: a real one, or TLS inside a proxy's TLS tunnel
    (``libaccurate.network.tunnels``)."""

    def sendall(self, data: bytes, /) -> None: ...
    def settimeout(self, timeout: float | None, /) -> None: ...
    def makefile(self, mode: Literal["rb"]) -> BufferedReader: ...
    def fileno(self) -> int: ...
    def close(self) -> None: ...


class ProtocolError(OSError):
    """The server's answer broke HTTP/1.1 or stopped short: an OSError, as a connection reset
    is, because the caller treats both alike (the connection is closed, not reused)."""


class Response:
    """A response whose body is read once, whole (``read``) or as it arrives (``read1``), decoded
    from its content coding: the caller sees the representation, never gzip."""

    def __init__(self, status: int, headers: dict[str, str], body: _Body) -> None:
        self.status = status
        self.headers = headers
        self._framed = body
        self._body = _decoded(body, headers.get("content-encoding", ""))

    def read(self) -> bytes:
        """The rest of the body."""
        return self._body.read()

    def read1(self, size: int) -> bytes:
        """What has arrived of the body, at most ``size`` bytes; b"" at its end."""
        return self._body.read1(size)

    @property
    def done(self) -> bool:
        """The body has been read to its end on the wire, so the connection may carry another."""
        return self._framed.left == 0


class Connection:
    """A keep-alive connection to ``host``:``port``, opened on the first request; over TLS when
    a context is given, checking the certificate for ``server_name``; through ``proxy`` when one
    is given (a CONNECT tunnel for TLS, else requests in absolute form, as Go's transport).
    ``sock`` is None while closed. One request at a time, each response read to its end before
    the next request."""

    def __init__(
        self,
        host: str,
        port: int,
        authority: str,
        tls: ssl.SSLContext | None = None,
        server_name: str | None = None,
        proxy: Proxy | None = None,
    ) -> None:
        self.host, self.port, self.authority = host, port, authority
        self._tls, self._server_name = tls, server_name
        self._proxy = proxy
        self.sock: Socket | None = None
        self._reader: BufferedReader | None = None
        self._keep = False
        self._response: Response | None = None
        self._opening: threading.Thread | None = None
        self._failed: Exception | None = None

    @property
    def reusable(self) -> bool:
        """Open, and its last response read to the end without the server asking to close."""
        done = self._response is None or self._response.done
        return self.sock is not None and self._keep and done

    def request(
        self,
        method: str,
        target: str,
        headers: Sequence[tuple[str, str]],
        body: bytes | None,
        timeout: float | None,
    ) -> Response:
        """Send one request and read the response's status and headers; its body is left to
        read. ``timeout`` bounds the connect and each read."""
        forwarded = self._proxy is not None and self._tls is None
        if forwarded:
            target = f"http://{self.authority}{target}"
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.authority}"]
        if forwarded and self._proxy and self._proxy.authorization:
            lines.append(f"Proxy-Authorization: {self._proxy.authorization}")
        for name, value in headers:
            if "\r" in value or "\n" in value:  # it would end the header and start another
                raise ValueError(f"the {name} header holds a line break")
            lines.append(f"{name}: {value}")
        head = "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n"
        self._opened()
        if self.sock is None:
            self._open(timeout)
        assert self.sock is not None and self._reader is not None
        self.sock.settimeout(timeout)
        self.sock.sendall(head + (body or b""))
        status, _, fields, keep = read_head(self._reader)
        framed = _body(self._reader, method, status, fields)
        self._keep = keep and not isinstance(framed, _UntilClose)
        self._response = Response(status, fields, framed)
        return self._response

    def close(self) -> None:
        if self._opening is not None:
            self._opening.join()  # it would set a socket after this closed it
            self._opening = self._failed = None
        sock, reader = self.sock, self._reader
        self.sock = self._reader = None
        if reader is not None:
            reader.close()
        if sock is not None:
            sock.close()

    def open_ahead(self, timeout: float | None) -> None:
        """Start connecting now, in a thread of its own (TCP, the proxy's tunnel, the TLS
        handshake), so that the round trips pass while the caller does something else; the
        first request waits for it, and fails as it would have failed opening it itself."""
        self._opening = threading.Thread(target=self._open_or_keep_error, args=(timeout,))
        self._opening.daemon = True
        self._opening.start()

    def _open_or_keep_error(self, timeout: float | None) -> None:
        try:
            self._open(timeout)
        except Exception as error:  # raised by the request that takes the connection
            self._failed = error

    def _opened(self) -> None:
        """Wait for a connection opened ahead; its failure is raised here, once."""
        if self._opening is None:
            return
        self._opening.join()
        self._opening = None
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed

    def _open(self, timeout: float | None) -> None:
        if self._proxy is not None:
            from libaccurate.network.tunnels import through

            opened = through(
                self._proxy, (self.host, self.port), timeout, self._tls, self._server_name
            )
        else:
            opened = open_socket(self.host, self.port, timeout)
            if self._tls is not None:
                opened = secure(opened, self._tls, self._server_name)
        self.sock = opened
        self._reader = opened.makefile("rb")


def open_socket(host: str, port: int, timeout: float | None) -> socket.socket:
    """A TCP connection, each write sent at once (no wait for the peer's delayed ACK)."""
    # getaddrinfo takes bytes as well, which typeshed's create_connection does not say.
    sock = socket.create_connection((_encoded(host), port), timeout)  # type: ignore[arg-type]
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except BaseException:
        sock.close()
        raise
    return sock


def secure(sock: socket.socket, tls: ssl.SSLContext, server_name: str | None) -> socket.socket:
    """TLS over ``sock``, its certificate checked for ``server_name``; ``sock`` closed on
    failure."""
    try:
        hostname = None if server_name is None else _encoded(server_name)
        return tls.wrap_socket(sock, server_hostname=hostname)
    except BaseException:
        sock.close()
        raise


def _encoded(name: str) -> str | bytes:
    """``name`` as the ``idna`` codec encodes it, when that is its ASCII bytes unchanged (an
    address, or a name of ASCII labels of 1 to 63 characters: the codec's own shortcut), else
    ``name`` for the codec. ``socket`` and ``ssl`` encode a str host with that codec, and
    importing it (with ``unicodedata`` and ``stringprep``) was 2 % of a ``list``'s instructions;
    given bytes, they take them as they are."""
    if name.isascii():
        *labels, last = name.split(".")
        if all(0 < len(label) < 64 for label in labels) and len(last) < 64:
            return name.encode("ascii")
    return name


def _line(reader: BufferedReader) -> bytes:
    line = reader.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise ProtocolError("a response line longer than 64 KiB")
    return line


def read_head(reader: BufferedReader) -> tuple[int, str, dict[str, str], bool]:
    """Status, reason phrase, headers and whether the connection stays open, of the first final
    response (informational ones, such as 100 Continue, are read past)."""
    while True:
        line = _line(reader)
        if not line:
            raise ProtocolError("the server closed the connection without answering")
        version, _, rest = line.decode("latin-1").rstrip("\r\n").partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise ProtocolError(f"not an HTTP/1.1 status line: {line[:80]!r}")
        status = int(code)
        fields = _fields(reader)
        if not 100 <= status < 200:
            break
    tokens = {token.strip().lower() for token in fields.get("connection", "").split(",")}
    keep = "keep-alive" in tokens if version == "HTTP/1.0" else "close" not in tokens
    return status, reason, fields, keep


def _fields(reader: BufferedReader) -> dict[str, str]:
    fields: dict[str, str] = {}
    for _ in range(MAX_HEADERS + 1):
        line = _line(reader)
        if line in (b"\r\n", b"\n"):
            return fields
        if not line:
            raise ProtocolError("the server closed the connection in the headers")
        name, colon, value = line.decode("latin-1").partition(":")
        if not colon or not name or name != name.strip():
            raise ProtocolError(f"not a header line: {line[:80]!r}")
        key, value = name.lower(), value.strip()
        fields[key] = f"{fields[key]}, {value}" if key in fields else value
    raise ProtocolError(f"more than {MAX_HEADERS} headers")


def _body(reader: BufferedReader, method: str, status: int, fields: dict[str, str]) -> _Body:
    """The body's framing (RFC 9112, section 6.3)."""
    if method == "HEAD" or status in _NO_BODY:
        return _Sized(reader, 0)
    codings = fields.get("transfer-encoding")
    if codings is not None:
        if codings.rsplit(",", 1)[-1].strip().lower() == "chunked":
            return _Chunked(reader)
        return _UntilClose(reader)
    length = fields.get("content-length")
    if length is None:
        return _UntilClose(reader)
    lengths = {part.strip() for part in length.split(",")}
    (only,) = lengths if len(lengths) == 1 else (None,)
    if only is None or not only.isdigit():
        raise ProtocolError(f"an invalid Content-Length: {length!r}")
    return _Sized(reader, int(only))


class _Body:
    """A body being read: ``left`` is what remains of it, 0 once read to its end, None while
    unknown."""

    def __init__(self, reader: BufferedReader, left: int | None = None) -> None:
        self.reader = reader
        self.left = left

    def read1(self, size: int) -> bytes:
        raise NotImplementedError

    def read(self) -> bytes:
        return b"".join(iter(lambda: self.read1(MAX_LINE), b""))


class _Sized(_Body):
    """A body of a Content-Length."""

    def read1(self, size: int) -> bytes:
        if not self.left:
            return b""
        data = self.reader.read1(min(size, self.left))
        if not data:
            raise ProtocolError(f"the body stopped {self.left} bytes short")
        self.left -= len(data)
        return data


class _Chunked(_Body):
    """A body sent in chunks, each after its size in hexadecimal, the last one empty."""

    def __init__(self, reader: BufferedReader) -> None:
        super().__init__(reader)
        self._chunk = 0

    def read1(self, size: int) -> bytes:
        if self.left == 0:
            return b""
        if self._chunk == 0:
            self._chunk = self._size()
            if self._chunk == 0:
                _fields(self.reader)  # the trailer section, unused
                self.left = 0
                return b""
        data = self.reader.read1(min(size, self._chunk))
        if not data:
            raise ProtocolError("the body stopped inside a chunk")
        self._chunk -= len(data)
        if self._chunk == 0 and _line(self.reader) not in (b"\r\n", b"\n"):
            raise ProtocolError("a chunk longer than its size")
        return data

    def _size(self) -> int:
        line = _line(self.reader)
        digits = line.split(b";", 1)[0].strip()
        if not digits or digits.strip(b"0123456789abcdefABCDEF"):
            raise ProtocolError(f"not a chunk size: {line[:80]!r}")
        return int(digits, 16)


class _UntilClose(_Body):
    """A body the server ends by closing the connection."""

    def read1(self, size: int) -> bytes:
        data = self.reader.read1(size) if self.left != 0 else b""
        if not data:
            self.left = 0
        return data


def _decoded(framed: _Body, codings: str) -> _Body:
    """The body as its content codings leave it: gzip is inflated, no coding is the body itself.
    Only gzip is ever asked for (``Accept-Encoding``), so any other coding is a broken answer."""
    coding = codings.strip().lower()
    if coding in ("", "identity"):
        return framed
    if coding in ("gzip", "x-gzip"):
        return _Gunzipped(framed)
    raise ProtocolError(f"a body in the {codings!r} coding, which was never asked for")


class _Gunzipped(_Body):
    """A gzip body inflated as it arrives. zlib is imported here, for the responses that need it:
    small ones (kube-apiserver compresses only past 128 KiB) cost no import."""

    def __init__(self, framed: _Body) -> None:
        import zlib

        super().__init__(framed.reader)
        self._framed = framed
        self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # 16: a gzip header and trailer
        self._broken = zlib.error

    def read1(self, size: int) -> bytes:
        while self.left != 0:
            pending = self._inflater.unconsumed_tail or self._framed.read1(max(size, MAX_LINE))
            if not pending:
                self._end()
                return b""
            try:
                inflated = self._inflater.decompress(pending, size)
            except self._broken as error:
                raise ProtocolError(f"a gzip body that does not inflate: {error}") from error
            if self._inflater.unused_data:
                raise ProtocolError("bytes after the end of a gzip body")
            if inflated:
                return inflated
        return b""

    def _end(self) -> None:
        if not self._inflater.eof:
            raise ProtocolError("the gzip body stopped before its end")
        self.left = 0
