"""The admission and conversion webhooks of accurate-controller, served over HTTPS.

Every replica serves them, leader or not, because kube-apiserver calls whichever pod the Service
picks. The rules are libaccurate's; this module unwraps AdmissionReview and ConversionReview
envelopes, gives the rules a namespace forest that is fresh enough, and wraps the verdicts again.
A request that is not a well-formed review gets a 400 naming what is wrong, and the server keeps
serving: one bad caller must not take admission down for everyone.
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from controller.certs import ServingCertificate
from controller.health import Listener, parse_addr
from libaccurate.admission import (
    CREATE,
    DELETE,
    UPDATE,
    Verdict,
    mutate_subnamespace,
    review_namespace,
    review_subnamespace,
)
from libaccurate.config import NamingPolicy
from libaccurate.constants import GROUP, LABEL_PARENT, LABEL_TEMPLATE, SUBNAMESPACE_KIND
from libaccurate.conversion import ConversionError, convert_subnamespace
from libaccurate.forest import Forest, Node, node_from_object
from libaccurate.kube import ApiError, Kube, KubeError, resource_path

# The paths of the Go Accurate, so that its webhook configurations carry over unchanged.
VALIDATE_NAMESPACE_PATH = "/validate-v1-namespace"
MUTATE_SUBNAMESPACE_PATH = "/mutate-accurate-cybozu-com-v2-subnamespace"
VALIDATE_SUBNAMESPACE_PATH = "/validate-accurate-cybozu-com-v2-subnamespace"
CONVERT_PATH = "/convert"
PATHS = (
    VALIDATE_NAMESPACE_PATH,
    MUTATE_SUBNAMESPACE_PATH,
    VALIDATE_SUBNAMESPACE_PATH,
    CONVERT_PATH,
)

ADMISSION_REVIEW = "admission.k8s.io/v1"
CONVERSION_REVIEW = "apiextensions.k8s.io/v1"
_OPERATIONS = (CREATE, UPDATE, DELETE)
_NAMESPACES = resource_path("", "v1", "namespaces")
# kube-apiserver caps a request body at 3 MiB and a review carries the object twice.
_MAX_BODY = 8 * 1024 * 1024
# A chain of parent/template links is short; this only stops a pathological one.
_MAX_LIVE_READS = 64
# A connection that sends nothing for this long is dropped, so idle clients cannot pin threads.
_IDLE_SECONDS = 60

log = logging.getLogger(__name__)

Observer = Callable[[str, bool, float], None]


class NamespaceSource(Protocol):
    """Where the webhooks get the namespace forest from: the controller's cache."""

    def forest(self) -> Forest:
        """The forest of every namespace as last seen; it may lag behind the API a little."""
        ...


class BadRequest(Exception):
    """The request is not a review this webhook can answer (HTTP 400)."""


@dataclass(frozen=True)
class _Admission:
    """The parts of an AdmissionReview request that the rules read."""

    uid: str
    operation: str
    new: dict[str, Any] | None
    old: dict[str, Any] | None


class WebhookServer:
    """The HTTPS server for the four webhook paths; ``start`` it, ``stop`` it.

    ``observe(path, allowed, seconds)`` is called after each request to a webhook path (for
    metrics); ``allowed`` is False for denials, failed conversions and bad requests.
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
    ) -> None:
        self.addr = addr
        self.host, self._requested_port = parse_addr(addr)
        self.certificate = ServingCertificate(cert_dir)
        self._namespaces = namespaces
        self._kube = kube
        self._naming_policies = tuple(naming_policies)
        self._allow_cascading_deletion = allow_cascading_deletion
        self._observe = observe
        self._httpd: _HttpsServer | None = None
        self._thread: threading.Thread | None = None
        self._routes: dict[str, Callable[[Any], tuple[dict[str, Any], bool]]] = {
            VALIDATE_NAMESPACE_PATH: self._validate_namespace,
            MUTATE_SUBNAMESPACE_PATH: self._mutate_subnamespace,
            VALIDATE_SUBNAMESPACE_PATH: self._validate_subnamespace,
            CONVERT_PATH: _convert,
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
        route = self._routes.get(path)
        if route is None:
            known = ", ".join(PATHS)
            return 404, _status(404, "NotFound", f"no webhook at {path}; paths: {known}")
        try:
            response, allowed = route(_json(body))
            code = 200
        except BadRequest as error:
            response, allowed, code = _status(400, "BadRequest", str(error)), False, 400
        if self._observe is not None:
            self._observe(path, allowed, time.monotonic() - started)
        return code, response

    # Admission

    def _validate_namespace(self, body: Any) -> tuple[dict[str, Any], bool]:
        request = _admission(body, "", "Namespace", needs_name=True)
        try:
            forest = self._namespace_forest(request)
        except KubeError as error:
            return _unavailable(request, error)
        verdict = review_namespace(
            request.operation, request.new, request.old, forest, self._allow_cascading_deletion
        )
        return _admission_response(request, verdict)

    def _mutate_subnamespace(self, body: Any) -> tuple[dict[str, Any], bool]:
        request = _admission(body, GROUP, SUBNAMESPACE_KIND, needs_name=False)
        return _admission_response(
            request, mutate_subnamespace(request.operation, request.new or {})
        )

    def _validate_subnamespace(self, body: Any) -> tuple[dict[str, Any], bool]:
        request = _admission(body, GROUP, SUBNAMESPACE_KIND, needs_name=True)
        try:
            forest = self._subnamespace_forest(request)
        except KubeError as error:
            return _unavailable(request, error)
        verdict = review_subnamespace(
            request.operation,
            request.new,
            request.old,
            forest,
            self._naming_policies,
            self._allow_cascading_deletion,
        )
        return _admission_response(request, verdict)

    # The forest a review sees. The cache may not have caught up with a change made a moment
    # ago, so what a rule needs is read live when the cache lacks it: the namespaces a
    # reference leads to, and (before a namespace may lose what others depend on) the current
    # dependents. Reads fail the review rather than let a request through unchecked.

    def _namespace_forest(self, request: _Admission) -> Forest:
        view = _LiveView(self._namespaces.forest(), self._kube)
        if request.operation == DELETE:
            view.refresh_dependents(_name(request.old))
            return view.forest
        after = node_from_object(request.new or {})
        if request.operation == UPDATE and _links(after) == _links(
            node_from_object(request.old or {})
        ):
            return view.forest
        if after.source is not None:
            view.include_chain(after.source)
        if request.operation == UPDATE:
            view.refresh_dependents(after.name)
        return view.forest

    def _subnamespace_forest(self, request: _Admission) -> Forest:
        view = _LiveView(self._namespaces.forest(), self._kube)
        if request.operation == CREATE:
            view.include_chain(_namespace(request.new))
        elif request.operation == DELETE and not self._allow_cascading_deletion:
            view.include_chain(_name(request.old))
            view.refresh_dependents(_name(request.old))
        return view.forest


class _LiveView:
    """A forest from the cache, corrected with live reads of the namespaces a review needs."""

    def __init__(self, cached: Forest, kube: Kube) -> None:
        self.forest = cached
        self._kube = kube

    def include_chain(self, name: str) -> None:
        """Make ``name`` and every namespace above it known, reading missing ones live.

        A name the API does not have either stays missing, so the rule sees it as missing.
        """
        for _ in range(_MAX_LIVE_READS):
            unknown = self._first_unknown(name)
            if unknown is None:
                return
            found = self._get(unknown)
            if found is None:
                return
            self._update({unknown: found})

    def refresh_dependents(self, name: str) -> None:
        """Replace what the cache says depends on ``name`` by what the API says now."""
        live = [
            node_from_object(obj)
            for label in (LABEL_PARENT, LABEL_TEMPLATE)
            for obj in self._list(f"{label}={name}")
        ]
        current = {node.name for node in live}
        changes: dict[str, Node | None] = {node.name: node for node in live}
        for stale in set(self.forest.dependents(name)) - current:
            changes[stale] = self._get(stale)
        self._update(changes)

    def _first_unknown(self, name: str) -> str | None:
        if name not in self.forest:
            return name
        chain = self.forest.walk_sources(name)
        return chain.names[-1] if chain.end == "missing" else None

    def _update(self, changes: Mapping[str, Node | None]) -> None:
        """Rebuild the forest only when the live reads differ from the cache."""
        if all(self.forest.get(name) == node for name, node in changes.items()):
            return
        nodes = dict(self.forest.nodes)
        for name, node in changes.items():
            if node is None:
                nodes.pop(name, None)
            else:
                nodes[name] = node
        self.forest = Forest.build(nodes.values())

    def _get(self, name: str) -> Node | None:
        try:
            # resource_path quotes the name, which comes from a label of the request.
            return node_from_object(
                self._kube.get(resource_path("", "v1", "namespaces", name=name))
            )
        except ApiError as error:
            if error.not_found:
                return None
            raise

    def _list(self, selector: str) -> list[dict[str, Any]]:
        listed = self._kube.list_objects(_NAMESPACES, labelSelector=selector)
        return list(listed.get("items") or [])


def _links(node: Node) -> tuple[str | None, str | None, str | None]:
    return node.type, node.parent, node.template


def _admission(body: Any, group: str, kind: str, *, needs_name: bool) -> _Admission:
    """Check the envelope and return what the rules read; raises BadRequest."""
    request = _request(body, ADMISSION_REVIEW, "AdmissionReview")
    uid = _field(request, "uid", str, "request")
    operation = _field(request, "operation", str, "request")
    if operation not in _OPERATIONS:
        raise BadRequest(
            f"request.operation must be one of {', '.join(_OPERATIONS)}, not {operation!r}"
        )
    requested = _field(request, "kind", dict, "request")
    if (requested.get("group"), requested.get("kind")) != (group, kind):
        wanted = f"{group}/{kind}" if group else kind
        got = "/".join(str(requested.get(key) or "") for key in ("group", "version", "kind"))
        raise BadRequest(f"this webhook reviews {wanted} objects, not {got}")
    new, old = request.get("object"), request.get("oldObject")
    if operation in (CREATE, UPDATE):
        _check_object(new, "request.object", operation, needs_name)
    if operation in (UPDATE, DELETE):
        _check_object(old, "request.oldObject", operation, needs_name)
    if kind == SUBNAMESPACE_KIND:
        for obj in (new, old):
            if isinstance(obj, dict) and not obj["metadata"].get("namespace"):
                # kube-apiserver fills it in from the path; a request without it is malformed.
                obj["metadata"]["namespace"] = _field(request, "namespace", str, "request")
    return _Admission(uid, operation, new, old)


def _check_object(obj: Any, where: str, operation: str, needs_name: bool) -> None:
    """The object must carry the metadata the rules read."""
    if not isinstance(obj, dict):
        raise BadRequest(f"{where} is required for {operation} and must be an object")
    metadata = _field(obj, "metadata", dict, where)
    if needs_name:
        _field(metadata, "name", str, f"{where}.metadata")


def _admission_response(request: _Admission, verdict: Verdict) -> tuple[dict[str, Any], bool]:
    """Denials carry code 403 and the rule's message, as controller-runtime's Denied does; a
    mutation carries a base64 JSON patch."""
    response: dict[str, Any] = {"uid": request.uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": verdict.message}
    if verdict.patch:
        patch = json.dumps(list(verdict.patch)).encode()
        response.update(patchType="JSONPatch", patch=base64.b64encode(patch).decode())
    return _admission_review(response), verdict.allowed


def _unavailable(request: _Admission, error: KubeError) -> tuple[dict[str, Any], bool]:
    """The cluster could not be read, so the request is refused rather than let through
    unchecked; code 500 tells clients (the controller among them) to try again."""
    log.warning("cannot review a %s: %s", request.operation, error)
    message = f"cannot check the request against the cluster: {error}"
    response = {
        "uid": request.uid,
        "allowed": False,
        "status": {"code": 500, "reason": "InternalError", "message": message},
    }
    return _admission_review(response), False


def _admission_review(response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": ADMISSION_REVIEW, "kind": "AdmissionReview", "response": response}


# Conversion


def _convert(body: Any) -> tuple[dict[str, Any], bool]:
    """Convert every object, or none: a failed conversion fails the whole request."""
    request = _request(body, CONVERSION_REVIEW, "ConversionReview")
    uid = _field(request, "uid", str, "request")
    desired = _field(request, "desiredAPIVersion", str, "request")
    objects = _field(request, "objects", list, "request")
    if not all(isinstance(obj, dict) for obj in objects):
        raise BadRequest("request.objects must be a list of objects")
    response: dict[str, Any] = {"uid": uid}
    try:
        converted = [convert_subnamespace(obj, desired) for obj in objects]
    except ConversionError as error:
        response["result"] = {"status": "Failure", "message": str(error)}
    else:
        response.update(convertedObjects=converted, result={"status": "Success"})
    review = {"apiVersion": CONVERSION_REVIEW, "kind": "ConversionReview", "response": response}
    return review, response["result"]["status"] == "Success"


# Envelopes


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError as error:
        raise BadRequest(f"the request body is not valid JSON: {error}") from None


def _request(body: Any, api_version: str, kind: str) -> dict[str, Any]:
    """The ``request`` of a review envelope of the given type; raises BadRequest."""
    if not isinstance(body, dict):
        raise BadRequest(f"expected an {api_version} {kind}, got a JSON {type(body).__name__}")
    if (body.get("apiVersion"), body.get("kind")) != (api_version, kind):
        got = f"got apiVersion={body.get('apiVersion')!r}, kind={body.get('kind')!r}"
        raise BadRequest(f"expected an {api_version} {kind}, {got}")
    return dict(_field(body, "request", dict, kind))


_DESCRIBED: dict[type[Any], str] = {dict: "an object", list: "a list", str: "a non-empty string"}


def _field(parent: Mapping[str, Any], key: str, kind: type[Any], where: str) -> Any:
    value = parent.get(key)
    if not isinstance(value, kind) or (kind is str and not value):
        described = _DESCRIBED[kind]
        raise BadRequest(f"{where}.{key} is required and must be {described}")
    return value


def _name(obj: Mapping[str, Any] | None) -> str:
    return str((obj or {})["metadata"]["name"])


def _namespace(obj: Mapping[str, Any] | None) -> str:
    return str((obj or {})["metadata"]["namespace"])


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    """A metav1 Status: kube-apiserver shows its message when a webhook call fails."""
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }


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
    server: _HttpsServer
    timeout = _IDLE_SECONDS

    def do_POST(self) -> None:
        length = self.headers.get("Content-Length", "")
        if not length.isdigit():
            self._reply(411, _status(411, "BadRequest", "a Content-Length header is required"))
            return
        if int(length) > _MAX_BODY:
            message = f"the request body is larger than {_MAX_BODY} bytes"
            self.close_connection = True
            self._reply(413, _status(413, "RequestEntityTooLarge", message))
            return
        body = self.rfile.read(int(length))
        try:
            code, response = self.server.webhooks.answer(urlsplit(self.path).path, body)
        except Exception:
            log.exception("webhook request to %s failed", self.path)
            code, response = 500, _status(500, "InternalError", "the webhook failed; see its log")
        self._reply(code, response)

    def _reply(self, code: int, body: Mapping[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("webhook %s: " + format, self.client_address[0], *args)
