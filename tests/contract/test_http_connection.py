"""The adapter's HTTP/1.1 connection against a peer that answers with exactly the bytes a test
gives it: each framing RFC 9112 allows (a length, chunks, until close), keep-alive and its
end, informational responses, and answers that break off or break the protocol, which must
fail as an OSError (the adapter then closes the connection) and never hang or pass as a body.
The whole suite drives the same connection against the in-memory API server over TLS."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator, Sequence

import pytest

from accurate_testbed.waiting import wait_for
from libaccurate.network.http_connection import Connection, ProtocolError

TIMEOUT = 10.0


class Peer:
    """A TCP server on 127.0.0.1 that, for each request it reads, sends the next answer of
    ``answers`` on the same connection; a None after an answer closes the connection once that
    answer is sent. It records each request's head, and on which accepted connection it came.
    The connections made through it are closed with it."""

    def __init__(self, answers: Sequence[bytes | None]) -> None:
        self.answers = list(answers)
        self.requests: list[tuple[int, bytes]] = []
        self.made: list[Connection] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        accepted = 0
        while self.answers:
            try:
                sock, _ = self._listener.accept()
            except OSError:  # closed by the test's end
                return
            accepted += 1
            with sock:
                sock.settimeout(TIMEOUT)
                self._answer(sock, accepted)

    def _answer(self, sock: socket.socket, accepted: int) -> None:
        reader = sock.makefile("rb")
        while self.answers:
            head = b"".join(iter(reader.readline, b"\r\n"))
            if not head:
                return
            self.requests.append((accepted, head))
            answer = self.answers.pop(0) or b""
            sock.sendall(answer)
            if self.answers and self.answers[0] is None:
                self.answers.pop(0)
                return
            if b"connection: close" in answer.lower() or answer.startswith(b"HTTP/1.0"):
                return

    def connection(self) -> Connection:
        made = Connection("127.0.0.1", self.port, f"127.0.0.1:{self.port}")
        self.made.append(made)
        return made

    def close(self) -> None:
        for connection in self.made:
            connection.close()
        self.answers.clear()
        with socket.create_connection(("127.0.0.1", self.port)):  # ends a waiting accept()
            pass
        self._listener.close()
        self._thread.join(TIMEOUT)


@pytest.fixture
def peer(request: pytest.FixtureRequest) -> Iterator[Peer]:
    server = Peer(request.param)
    yield server
    server.close()


def answers(*given: bytes | None) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("peer", [given], indirect=True)


def get(connection: Connection, path: str = "/") -> tuple[int, bytes]:
    response = connection.request("GET", path, [("Accept", "application/json")], None, TIMEOUT)
    return response.status, response.read()


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"


@answers(OK, b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno")
def test_a_sized_body_and_keep_alive_reuse_one_connection(peer: Peer) -> None:
    connection = peer.connection()
    assert get(connection, "/a") == (200, b"hello")
    assert connection.reusable
    assert get(connection, "/b") == (404, b"no")
    assert [accepted for accepted, _ in peer.requests] == [1, 1]
    first = peer.requests[0][1].decode()
    assert first.startswith("GET /a HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{peer.port}\r\n" in first
    assert "Accept: application/json\r\n" in first


@answers(
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"4;name=value\r\nwatc\r\n9\r\nh events\n\r\n0\r\nTrailer: x\r\n\r\n",
    OK,
)
def test_a_chunked_body_with_extensions_and_trailers_then_the_next_request(peer: Peer) -> None:
    connection = peer.connection()
    assert get(connection) == (200, b"watch events\n")
    assert connection.reusable
    assert get(connection) == (200, b"hello")


@answers(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
def test_a_stream_gives_each_chunk_as_it_arrives_without_waiting_for_more(peer: Peer) -> None:
    response = peer.connection().request("GET", "/watch", [], None, TIMEOUT)
    assert response.read1(65536) == b"first"  # the rest never comes: this must not block


@answers(b"HTTP/1.1 200 OK\r\n\r\nall until the end", None)
def test_a_body_without_length_lasts_until_the_server_closes(peer: Peer) -> None:
    connection = peer.connection()
    status, body = get(connection)
    assert (status, body) == (200, b"all until the end")
    assert not connection.reusable


@answers(
    b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
)
def test_a_server_that_closes_after_its_answer_leaves_the_connection_unusable(
    peer: Peer,
) -> None:
    for _ in range(2):
        connection = peer.connection()
        assert get(connection) == (200, b"ok")
        assert not connection.reusable
        connection.close()


@answers(
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + OK,
    b"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n",
    OK,
)
def test_informational_answers_are_read_past_and_a_204_has_no_body(peer: Peer) -> None:
    connection = peer.connection()
    assert get(connection) == (200, b"hello")
    assert get(connection) == (204, b"")
    assert get(connection) == (200, b"hello")


@answers(
    b"HTTP/1.1 200 OK\r\nWarning: a\r\nCONTENT-type: x\r\nwarning: b\r\nContent-Length: 0\r\n\r\n"
)
def test_header_names_ignore_case_and_repeated_headers_are_joined(peer: Peer) -> None:
    response = peer.connection().request("GET", "/", [], None, TIMEOUT)
    assert response.headers["warning"] == "a, b"
    assert response.headers["content-type"] == "x"


@pytest.mark.parametrize(
    "peer",
    [
        [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", None],
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nshort", None],
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nlonger\r\n0\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"],
        [b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nok"],
        [b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nok"],
        [b"SSH-2.0-OpenSSH\r\n\r\n"],
        [b"HTTP/1.1 abc\r\n\r\n"],
        [b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n"],
        [b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70000 + b"\r\n\r\n"],
        [b"", None],
    ],
    indirect=True,
    ids=[
        "body-short",
        "chunk-short",
        "chunk-long",
        "chunk-size",
        "two-lengths",
        "negative-length",
        "not-http",
        "bad-status",
        "four-digit-status",
        "bad-header",
        "too-many-headers",
        "long-line",
        "no-answer",
    ],
)
def test_an_answer_that_breaks_off_or_breaks_http_fails_as_an_os_error(peer: Peer) -> None:
    with pytest.raises(ProtocolError) as raised:
        get(peer.connection())
    assert isinstance(raised.value, OSError)


@answers(OK)
def test_a_header_value_with_a_line_break_is_refused_before_anything_is_sent(peer: Peer) -> None:
    connection = peer.connection()
    with pytest.raises(ValueError, match="Impersonate-User header holds a line break"):
        connection.request("GET", "/", [("Impersonate-User", "me\r\nX-Evil: 1")], None, TIMEOUT)
    assert connection.sock is None
    assert get(connection) == (200, b"hello")
    assert b"X-Evil" not in peer.requests[0][1]


@answers(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}")
def test_a_body_goes_after_the_head(peer: Peer) -> None:
    connection = peer.connection()
    headers = [("Content-Type", "application/json"), ("Content-Length", "7")]
    response = connection.request("POST", "/x", headers, b'{"a":1}', TIMEOUT)
    assert (response.status, response.read()) == (201, b"{}")


def _gzipped(text: bytes) -> bytes:
    import gzip

    return gzip.compress(text, 1)


GZIP_HEAD = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n"
ZIPPED = _gzipped(b'{"items":[' + b'{"a":1},' * 5000 + b'{"a":1}]}')


@answers(
    GZIP_HEAD + b"Content-Length: %d\r\n\r\n" % len(ZIPPED) + ZIPPED,
    GZIP_HEAD
    + b"Transfer-Encoding: chunked\r\n\r\n"
    + b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (ZIPPED[:7], ZIPPED[7:]))
    + b"0\r\n\r\n",
    OK,
)
def test_a_gzip_body_is_inflated_whatever_its_framing_and_the_connection_stays_usable(
    peer: Peer,
) -> None:
    connection = peer.connection()
    expected = b'{"items":[' + b'{"a":1},' * 5000 + b'{"a":1}]}'
    assert get(connection) == (200, expected)
    assert get(connection) == (200, expected)
    assert connection.reusable
    assert get(connection) == (200, b"hello")


STREAM = _gzipped(b'{"type":"ADDED"}\n')


@answers(GZIP_HEAD + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (len(STREAM), STREAM))
def test_a_gzip_stream_gives_what_has_arrived_inflated_without_waiting(peer: Peer) -> None:
    response = peer.connection().request("GET", "/watch", [], None, TIMEOUT)
    assert response.read1(65536) == b'{"type":"ADDED"}\n'  # the stream goes on: no block


@pytest.mark.parametrize(
    "peer",
    [
        [GZIP_HEAD + b"Content-Length: 20\r\n\r\n" + ZIPPED[:20], None],
        [GZIP_HEAD + b"Content-Length: 9\r\n\r\nnot gzip!"],
        [GZIP_HEAD + b"Content-Length: %d\r\n\r\n" % (len(ZIPPED) + 3) + ZIPPED + b"xyz"],
        [b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 2\r\n\r\nab"],
    ],
    indirect=True,
    ids=["gzip-short", "not-gzip", "after-the-end", "unasked-coding"],
)
def test_a_compressed_body_that_is_broken_fails_as_an_os_error(peer: Peer) -> None:
    with pytest.raises(ProtocolError):
        get(peer.connection())


@answers(OK)
def test_a_connection_opened_ahead_is_open_before_its_first_request_and_carries_it(
    peer: Peer,
) -> None:
    connection = peer.connection()
    connection.open_ahead(TIMEOUT)
    wait_for(lambda: connection.sock is not None, TIMEOUT, "the connection opened ahead")
    assert get(connection) == (200, b"hello")
    assert [accepted for accepted, _ in peer.requests] == [1]


def test_a_connection_that_failed_to_open_ahead_fails_its_first_request_as_opening_would() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once the probe is closed
    connection = Connection("127.0.0.1", port, f"127.0.0.1:{port}")
    connection.open_ahead(TIMEOUT)
    with pytest.raises(ConnectionRefusedError):
        get(connection)
    with pytest.raises(ConnectionRefusedError):  # the next request opens again, and is refused
        get(connection)
