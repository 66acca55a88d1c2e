"""A slow network link between a client and a server, for tests and benchmarks: a TCP forwarder
on 127.0.0.1 that adds, in each direction, a one-way delay and a bandwidth cap, and counts the
bytes it carried each way.

Each direction is a wire that every connection over the link shares, as they share a real one:
a byte read from one side leaves once the bytes before it have (at ``rate`` bytes a second,
whichever connection they belong to) and arrives ``delay`` seconds after that, with many bytes
in flight at once; a round trip costs twice the delay. It is an ideal link: no loss, no jitter,
no slow start, and it queues without bound. ``splice`` carries one connection both ways and is
what the CONNECT proxy (``accurate_testbed.proxy``) tunnels with.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

_CHUNK = 16384
L = TypeVar("L", bound="Listener")


@dataclass
class Shape:
    """One direction of a link: its one-way ``delay`` in seconds and its ``rate`` in bytes a
    second (None: as fast as loopback)."""

    delay: float = 0.0
    rate: float | None = None

    @classmethod
    def of(cls, round_trip_ms: float, megabits: float | None) -> Shape:
        """A direction of a link of ``round_trip_ms`` and ``megabits`` per second."""
        return cls(round_trip_ms / 2000, megabits * 125_000 if megabits else None)


class Wire:
    """One direction of a link, shared by every connection over it: bytes leave it one after the
    other at its rate, then take its delay to arrive. ``carried`` counts them."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.carried = 0
        self._free_at = 0.0
        self._lock = threading.Lock()

    def send(self, count: int) -> float:
        """When ``count`` bytes read now arrive at the far end (a ``time.monotonic`` time)."""
        rate, delay = self.shape.rate, self.shape.delay
        with self._lock:
            self._free_at = max(time.monotonic(), self._free_at) + (count / rate if rate else 0.0)
            self.carried += count
            return self._free_at + delay

    def reset(self) -> None:
        with self._lock:
            self.carried = 0


class Wires(NamedTuple):
    """Both directions of a link: ``down`` from the server to the client, ``up`` the other way."""

    down: Wire
    up: Wire

    @classmethod
    def of(cls, shape: Shape | None) -> Wires:
        return cls(Wire(shape or Shape()), Wire(shape or Shape()))

    def reset(self) -> None:
        """Count from zero again."""
        self.down.reset()
        self.up.reset()


def splice(client: socket.socket, server: socket.socket, wires: Wires) -> None:
    """Carry bytes both ways between two connected sockets until both sides are done, over
    ``wires``; closes both sockets at the end. Returns at once (daemon threads)."""
    ends = threading.Barrier(2, action=lambda: _close(client, server))
    for source, sink, wire in ((server, client, wires.down), (client, server, wires.up)):
        threading.Thread(target=_direction, args=(source, sink, wire, ends), daemon=True).start()


def _direction(
    source: socket.socket, sink: socket.socket, wire: Wire, ends: threading.Barrier
) -> None:
    """One direction: a reader stamps each chunk with when it arrives, a writer sends it then.
    End of input is passed on as a half-close; an error ends both ways."""
    in_flight: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()
    writer = threading.Thread(target=_deliver, args=(in_flight, sink, source), daemon=True)
    writer.start()
    try:
        while data := source.recv(_CHUNK):
            in_flight.put((wire.send(len(data)), data))
    except OSError:
        pass
    in_flight.put((0.0, b""))
    writer.join()
    with contextlib.suppress(threading.BrokenBarrierError):
        ends.wait()


def _deliver(
    in_flight: queue.SimpleQueue[tuple[float, bytes]], sink: socket.socket, source: socket.socket
) -> None:
    try:
        while True:
            due, data = in_flight.get()
            if not data:
                sink.shutdown(socket.SHUT_WR)
                return
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            sink.sendall(data)
    except OSError:
        _close(source, sink)  # the other side is gone: stop reading this one too


def stop_listening(listener: socket.socket) -> None:
    """Close a listening socket and wake the thread waiting in its ``accept`` (on Linux, closing
    alone leaves it waiting)."""
    with contextlib.suppress(OSError):
        listener.shutdown(socket.SHUT_RDWR)
    listener.close()


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.close()


class Listener:
    """A TCP server on 127.0.0.1 (``address``) that hands each connection it accepts to
    ``accepted``; ``start`` and ``stop`` it, or use it as a context manager."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def start(self: L) -> L:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop taking connections (those under way end with their peers)."""
        stop_listening(self._listener)
        self._thread.join(5)

    def __enter__(self: L) -> L:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def accepted(self, client: socket.socket) -> None:
        raise NotImplementedError

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.accepted(client)


class Link(Listener):
    """A link to ``target`` (host, port): connect to ``address`` instead, and every connection
    is carried over the same ``wires``, of ``shape`` each way, which count the bytes."""

    def __init__(self, target: tuple[str, int], shape: Shape | None = None) -> None:
        super().__init__()
        self.target = target
        self.wires = Wires.of(shape)

    def accepted(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self.target)
        except OSError:
            client.close()
            return
        for sock in (client, server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        splice(client, server, self.wires)
