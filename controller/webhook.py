"""The HTTPS server of accurate-controller's admission and conversion webhooks.

Every replica serves them, leader or not, because kube-apiserver calls whichever pod the Service
picks. This module routes each path to its handler (controller.admission, controller.conversion)
and turns what they say into HTTP: a request that is not a well-formed review gets a 400 naming
what is wrong, and the server keeps serving: one bad caller must not take admission down for
everyone. Paths registered by earlier Go releases are served by the same handlers, so that the
webhook configurations of an older install keep working after the swap.
"""

from __future__ import annotations

import email.utils
import functools
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from controller.admission import AdmissionWebhooks, Answer
from controller.certs import ServingCertificate
from controller.conversion import convert
from controller.health import Listener, parse_addr
from controller.live import LiveReads, NamespaceSource
from controller.quota_admission import QuotaReviews
from controller.reviews import (
    MAX_BODY,
    BadRequest,
    admission_request,
    admission_response,
    decode,
    status,
)
from libaccurate.admission import ALLOWED
from libaccurate.config import NamingPolicy
from libaccurate.network.kube import Kube

# The paths of the Go Accurate's current release, which our manifests register.
VALIDATE_NAMESPACE_PATH = "/validate-v1-namespace"
MUTATE_SUBNAMESPACE_PATH = "/mutate-accurate-cybozu-com-v2-subnamespace"
VALIDATE_SUBNAMESPACE_PATH = "/validate-accurate-cybozu-com-v2-subnamespace"
CONVERT_PATH = "/convert"
# Ours: the hierarchical quota webhook, on updates of ResourceQuota statuses (issue 28).
VALIDATE_QUOTA_STATUS_PATH = "/validate-v1-resourcequota-status"
PATHS = (
    VALIDATE_NAMESPACE_PATH,
    MUTATE_SUBNAMESPACE_PATH,
    VALIDATE_SUBNAMESPACE_PATH,
    CONVERT_PATH,
    VALIDATE_QUOTA_STATUS_PATH,
)
# Paths earlier Go releases registered (the v1 API's, up to the release that moved to v2), and
# the current path that serves each. No release registered paths of its own for v2alpha1.
LEGACY_PATHS: Mapping[str, str] = {
    "/mutate-accurate-cybozu-com-v1-subnamespace": MUTATE_SUBNAMESPACE_PATH,
    "/validate-accurate-cybozu-com-v1-subnamespace": VALIDATE_SUBNAMESPACE_PATH,
}

# A connection that sends nothing for this long is dropped, so idle clients cannot pin threads.
_IDLE_SECONDS = 60

log = logging.getLogger(__name__)

Observer = Callable[[str, bool, float], None]


class WebhookServer:
    """The HTTPS server for the webhook paths; ``start`` it, ``stop`` it.

    ``observe(path, allowed, seconds)`` is called after each request to a webhook path (for
    metrics, under the current path a legacy one stands for); ``allowed`` is False for denials,
    failed conversions and bad requests.
    """

    def __init__(
        self,
        addr: str,
        cert_dir: Path,
        namespaces: NamespaceSource,
        kube: Kube,
        naming_policies: Sequence[NamingPolicy],
        allow_cascading_deletion: bool,
        observe: Observer | None = None,
        tree_label_suffix: str | None = None,
        quotas: QuotaReviews | None = None,
    ) -> None:
        self.addr = addr
        self.host, self._requested_port = parse_addr(addr)
        self.certificate = ServingCertificate(cert_dir)
        self._observe = observe
        self._httpd: _HttpsServer | None = None
        self._thread: threading.Thread | None = None
        admission = AdmissionWebhooks(
            LiveReads(namespaces, kube),
            naming_policies,
            allow_cascading_deletion,
            tree_label_suffix,
            quotas,
        )
        self._routes: dict[str, Callable[[Any], Answer]] = {
            VALIDATE_NAMESPACE_PATH: admission.validate_namespace,
            MUTATE_SUBNAMESPACE_PATH: admission.mutate_subnamespace,
            VALIDATE_SUBNAMESPACE_PATH: admission.validate_subnamespace,
            CONVERT_PATH: convert,
            VALIDATE_QUOTA_STATUS_PATH: quotas.validate_status if quotas else _no_quotas,
        }

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the webhook server is not started")
        return self._httpd.port

    def start(self) -> None:
        """Load the certificate and listen; raises CertificateError or OSError (port in use)."""
        self.certificate.load()
        try:
            self._httpd = _HttpsServer(self.host, self._requested_port, self)
        except OSError as error:
            reason = error.strerror or error
            raise OSError(error.errno, f"cannot serve webhooks on {self.addr}: {reason}") from error
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._thread.start()
        log.info("serving webhooks on %s:%d", self.host or "*", self.port)

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()
        self._httpd = self._thread = None

    def answer(self, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """The HTTP status and JSON body for one POST to ``path``."""
        started = time.monotonic()
        path = LEGACY_PATHS.get(path, path)
        route = self._routes.get(path)
        if route is None:
            known = ", ".join([*PATHS, *LEGACY_PATHS])
            return 404, status(404, "NotFound", f"no webhook at {path}; paths: {known}")
        try:
            response, allowed = route(decode(body))
            code = 200
        except BadRequest as error:
            response, allowed, code = status(400, "BadRequest", str(error)), False, 400
        if self._observe is not None:
            self._observe(path, allowed, time.monotonic() - started)
        return code, response


def _no_quotas(body: Any) -> Answer:
    """Without the HRQ CRD there is nothing to enforce: a quota webhook registered anyway (the
    CRD installed after the controller started) lets updates through until a restart."""
    request = admission_request(body, "", "ResourceQuota", needs_name=True)
    return admission_response(request, ALLOWED), True


# HTTP


class _HttpsServer(Listener):
    """Accepts plain TCP connections and wraps each one with the current certificate, so a
    rotated pair is used from the next connection on. The handshake itself runs on the
    connection's thread (on its first read), so a slow client cannot stall accepting."""

    block_on_close = False

    def __init__(self, host: str, port: int, webhooks: WebhookServer) -> None:
        self.webhooks = webhooks
        super().__init__(host, port, _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, client = self.socket.accept()
        context = self.webhooks.certificate.context()
        secured = context.wrap_socket(connection, server_side=True, do_handshake_on_connect=False)
        return secured, client

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Failed handshakes and dropped connections are the client's business; keep serving."""
        log.debug("webhook connection from %s failed", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in separate writes; with Nagle's algorithm the body would wait
    # for the API server's delayed ACK (about 40 ms on every admission request).
    disable_nagle_algorithm = True
    # Buffered, so that an answer leaves in one TLS record and one send (the handler flushes
    # after each request): every send on the loopback wakes the API server's reading thread,
    # and two of them cost about 0.2 ms more per review than one.
    wbufsize = -1
    server: _HttpsServer
    timeout = _IDLE_SECONDS

    def do_POST(self) -> None:
        length = self.headers.get("Content-Length", "")
        if not length.isdigit():
            self._reply(411, status(411, "BadRequest", "a Content-Length header is required"))
            return
        if int(length) > MAX_BODY:
            # Not read, so the connection cannot be used again.
            self.close_connection = True
            message = f"the request body is {length} bytes, more than {MAX_BODY}"
            self._reply(400, status(400, "BadRequest", message))
            return
        body = self.rfile.read(int(length))
        try:
            code, response = self.server.webhooks.answer(urlsplit(self.path).path, body)
        except Exception:
            log.exception("webhook request to %s failed", self.path)
            code, response = 500, status(500, "InternalError", "the webhook failed; see its log")
        self._reply(code, response)

    def _reply(self, code: int, body: Mapping[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The Date header of an answer, written once a second rather than for each one
        (it shows whole seconds)."""
        if timestamp is not None:
            return super().date_time_string(timestamp)
        return _http_date(int(time.time()))

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("webhook %s: " + format, self.client_address[0], *args)


@functools.lru_cache(maxsize=1)
def _http_date(second: int) -> str:
    return email.utils.formatdate(second, usegmt=True)
