"""A real admission webhook over HTTPS on 127.0.0.1 whose answers a test chooses.

The in-memory API server's webhook tests call it the way kube-apiserver calls webhooks.
"""

from __future__ import annotations

import base64
import functools
import json
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import trustme

EMPTY_REVIEW = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}


@dataclass
class Raw:
    """An answer sent byte for byte, for webhooks that misbehave."""

    code: int
    body: bytes


Answer = Callable[[dict[str, Any]], "dict[str, Any] | Raw"]


def allow(_: dict[str, Any]) -> dict[str, Any]:
    return {"allowed": True}


class WebhookServer:
    """A real admission webhook over HTTPS on 127.0.0.1; tests choose what it answers."""

    def __init__(self, ca: trustme.CA) -> None:
        self.answer: Answer = allow
        self.reviews: list[dict[str, Any]] = []
        self.paths: list[str] = []
        # The client's (address, port) of each call: one port for calls on one connection.
        self.clients: list[tuple[str, int]] = []
        self._dropping = False
        self.ca_bundle = base64.b64encode(ca.cert_pem.bytes()).decode()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("127.0.0.1").configure_cert(context)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
        serve = functools.partial(self._httpd.serve_forever, poll_interval=0.02)
        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()

    def url(self, path: str = "/validate") -> str:
        return f"https://127.0.0.1:{self._httpd.server_address[1]}{path}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def drop_connections(self) -> None:
        """Close every connection at its next request, as a webhook does with idle ones: the
        request on it gets no answer."""
        self._dropping = True

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                if server._dropping:
                    server._dropping = False
                    self.close_connection = True
                    return
                server.clients.append(self.client_address)
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.reviews.append(review)
                server.paths.append(self.path)
                answer = server.answer(review["request"])
                if isinstance(answer, Raw):
                    code, body = answer.code, answer.body
                else:
                    response = {"uid": review["request"]["uid"], **answer}
                    code, body = 200, json.dumps({**EMPTY_REVIEW, "response": response}).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                """Keep test output clean."""

        return Handler


def denied(message: str, **status: Any) -> dict[str, Any]:
    """A refusing answer with the given Status fields."""
    return {"allowed": False, "status": {"message": message, **status}}


def patched(*operations: dict) -> dict[str, Any]:
    """An allowing answer that carries a JSON patch."""
    encoded = base64.b64encode(json.dumps(list(operations)).encode()).decode()
    return {"allowed": True, "patchType": "JSONPatch", "patch": encoded}
