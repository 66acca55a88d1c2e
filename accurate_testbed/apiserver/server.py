"""The HTTPS front: authentication, authorization, routing, query parameters, content
negotiation, streaming.

``ApiServer`` ties the parts together and is what tests hold: start/stop, reset between tests,
users and their kubeconfigs, fault injection and the request log.
"""

from __future__ import annotations

import gzip
import json
import secrets
import socket
import ssl
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import trustme

from accurate_testbed.apiserver import (
    bootstrap_policy,
    discovery,
    errors,
    openapi,
    protobuf,
    representations,
    tables,
)
from accurate_testbed.apiserver.access_review import AccessReviews
from accurate_testbed.apiserver.admission import Admission
from accurate_testbed.apiserver.aggregation import ClusterRoleAggregation, settled
from accurate_testbed.apiserver.api import APPLY_PATCH, Api, Caller
from accurate_testbed.apiserver.audit import AuditLog, Seen, sent_metadata
from accurate_testbed.apiserver.audit import event as audit_event
from accurate_testbed.apiserver.authentication import ADMIN, Users, impersonate
from accurate_testbed.apiserver.background import BackgroundLoop
from accurate_testbed.apiserver.errors import ApiError
from accurate_testbed.apiserver.escalation import EscalationGuard
from accurate_testbed.apiserver.faults import Faults, LoggedRequest, reason_for
from accurate_testbed.apiserver.gc import GarbageCollector
from accurate_testbed.apiserver.kubeconfig import write_kubeconfig
from accurate_testbed.apiserver.paging import ListOptions
from accurate_testbed.apiserver.quota import QuotaAdmission
from accurate_testbed.apiserver.quota_controller import QuotaController
from accurate_testbed.apiserver.rbac import Attributes, Authorizer, request_attributes
from accurate_testbed.apiserver.resources import RBAC, Registry, Resource
from accurate_testbed.apiserver.routing import ResourcePath, parse_resource_path
from accurate_testbed.apiserver.selectors import selector
from accurate_testbed.apiserver.store import Store
from accurate_testbed.apiserver.termination import Termination
from accurate_testbed.apiserver.watch import WatchOptions, stream

INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# kube-apiserver's response compression (APIResponseCompression, on by default since 1.16):
# a response whose body is over 128 KiB is gzipped, at level 1, for a client whose
# Accept-Encoding lists gzip; watches are never compressed (responsewriters/writers.go).
GZIP_THRESHOLD = 128 * 1024
GZIP_LEVEL = 1
# How long ``stop`` waits for the background loops' running steps, all loops together.
LOOPS_STOP_TIMEOUT = 5.0
PANIC_TEXT = "This request caused apiserver to panic. Look in the logs for details.\n"


class ApiServer:
    """An in-memory kube-apiserver on 127.0.0.1 over HTTPS."""

    def __init__(
        self,
        port: int = 0,
        history: int = 10000,
        bookmark_interval: float = 1.0,
        audit_log: Path | None = None,
    ):
        """``audit_log``: where to append an audit event for each request (audit.py), as
        kube-apiserver's ``--audit-log-path``; none when not given."""
        self.store = Store(history)
        self.registry = Registry()
        self.faults = Faults()
        self.authorizer = Authorizer(self.store)
        self.api = Api(
            self.store,
            self.registry,
            Admission(self.store),
            EscalationGuard(self.authorizer),
            AccessReviews(self.authorizer),
        )
        self.quota_admission = QuotaAdmission(self.api)
        self.api.quota = self.quota_admission
        self.bookmark_interval = bookmark_interval
        self.token = secrets.token_hex(16)
        self.users = Users(self.token)
        self.ca = trustme.CA()
        self._cert = self.ca.issue_cert("127.0.0.1", "localhost")
        self._stopping = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self.httpd.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._cert.configure_cert(context)
        context.set_alpn_protocols(["http/1.1"])
        self.httpd.socket = context.wrap_socket(
            self.httpd.socket, server_side=True, do_handshake_on_connect=False
        )
        self.httpd.apiserver = self  # type: ignore[attr-defined]
        self.audit = AuditLog(audit_log) if audit_log is not None else None
        self.controllers = BackgroundLoop(
            self.store, [Termination(self.api), ClusterRoleAggregation(self.api)]
        )
        # Each its own loop, as they run side by side in kube-controller-manager: their writes
        # pass through admission webhooks, and a slow webhook in one must not hold the others.
        self.garbage_collector = BackgroundLoop(self.store, [GarbageCollector(self.api)])
        self.quota_controller = BackgroundLoop(self.store, [QuotaController(self.api)])
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def ca_pem(self) -> bytes:
        return bytes(self.ca.cert_pem.bytes())

    def start(self) -> ApiServer:
        self.reset()
        self._thread.start()
        self.controllers.start()
        self.garbage_collector.start()
        self.quota_controller.start()
        return self

    def stop(self) -> None:
        """Every loop is asked to end before any is waited for, and all of them share one
        deadline: a step still running (a long pass on a loaded machine) costs that once."""
        self._stopping.set()
        self.store.wake()  # watches see the server stopping
        loops = (self.controllers, self.garbage_collector, self.quota_controller)
        for loop in loops:
            loop.stop()
        self.quota_admission.stop()
        self.httpd.shutdown()
        self.httpd.server_close()
        if self.audit is not None:
            self.audit.close()
        deadline = time.monotonic() + LOOPS_STOP_TIMEOUT
        for loop in loops:
            loop.join(max(0.0, deadline - time.monotonic()))

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def reset(self) -> None:
        """Back to a fresh cluster: the initial namespaces and RBAC policy (aggregated), only the
        admin user, no faults, an empty log."""
        self.store.reset()
        self.registry.set_crds([])
        self.users.reset()
        self.faults.reset()
        self.faults.drop_watches()
        self._create(
            "", "namespaces", [{"metadata": {"name": name}} for name in INITIAL_NAMESPACES]
        )
        self._create(RBAC, "clusterroles", settled(bootstrap_policy.cluster_roles()))
        self._create(RBAC, "clusterrolebindings", bootstrap_policy.cluster_role_bindings())

    def _create(self, group: str, plural: str, objects: list[dict[str, Any]]) -> None:
        """As kube-apiserver makes them at startup (its field manager is its own name)."""
        resource = self.registry.find(group, "v1", plural)
        assert resource is not None
        for obj in objects:
            self.api.create(resource, "", obj, Caller(ADMIN, field_manager="kube-apiserver"))

    def set_watch_history(self, size: int) -> None:
        self.store.set_history(size)

    def add_user(self, name: str, groups: Sequence[str] = ()) -> str:
        """A user (in ``system:authenticated`` and ``groups``) and their bearer token; they may
        do what RBAC grants them. Forgotten at ``reset``."""
        return self.users.add(name, groups)

    def write_kubeconfig(self, path: Path, user: str | None = None) -> Path:
        """A kubeconfig for the admin, or for a user made with ``add_user``."""
        if user is None:
            return write_kubeconfig(path, self.url, self.ca_pem, self.token)
        return write_kubeconfig(path, self.url, self.ca_pem, self.users.token_of(user), user)

    # Fault injection and the request log, for tests.

    def fail(
        self,
        status: int,
        path: str = ".*",
        method: str | None = None,
        times: int = 1,
        message: str = "injected failure",
    ) -> None:
        self.faults.fail(status, path, method, times, message)

    def delay(self, seconds: float, path: str = ".*", method: str | None = None) -> None:
        self.faults.delay(seconds, path, method)

    def drop_watches(self) -> None:
        self.faults.drop_watches()
        self.store.wake()

    @property
    def requests(self) -> list[LoggedRequest]:
        return self.faults.requests

    def clear_requests(self) -> None:
        self.faults.clear_requests()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "accurate-test-apiserver"
    _raw_body: bytes | None = None
    _warnings: list[str]

    @property
    def apiserver(self) -> ApiServer:
        server: ApiServer = self.server.apiserver  # type: ignore[attr-defined]
        return server

    def setup(self) -> None:
        """Headers and body go out in separate writes; without TCP_NODELAY each response would
        wait for the client's delayed ACK (40 ms)."""
        super().setup()
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._seen = Seen()  # a request refused before ``_handle`` (a bad request line) too

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the request log is the place to look."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Called with each response's status: the audit log's responseStatus.code."""
        self._seen.code = int(code)

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    # -- plumbing ----------------------------------------------------------------------------

    def _send_json(self, code: int, body: Any) -> None:
        if isinstance(body, dict) and body.get("kind") == "Status":
            self._seen.status = body
        data = json.dumps(body, separators=(",", ":")).encode()
        compressed = len(data) > GZIP_THRESHOLD and _asks_for_gzip(self.headers)
        if compressed:
            data = gzip.compress(data, GZIP_LEVEL)
        self.send_response(code)
        for warning in self._warnings:
            self.send_header("Warning", _warning_header(warning))
        self.send_header("Content-Type", "application/json")
        if compressed:
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Vary", "Accept-Encoding")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        """The request body, read once (also to keep the connection usable after an error)."""
        if self._raw_body is None:
            length = int(self.headers.get("Content-Length") or 0)
            self._raw_body = self.rfile.read(length) if length else b""
        return self._raw_body

    def _json_body(self) -> Any:
        """The body as JSON; its metadata as sent is kept for the audit log."""
        body = self._decoded_body()
        self._seen.sent_metadata = sent_metadata(body)
        return body

    def _decoded_body(self) -> Any:
        """kubectl's typed clients send protobuf, decoded for the kinds they create."""
        raw = self._body()
        if not raw:
            return {}
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if content_type == protobuf.CONTENT_TYPE:
            try:
                return protobuf.decode(raw)
            except protobuf.ProtobufError as error:
                raise errors.unsupported_media_type(
                    ["application/json", "application/yaml"]
                ) from error
        try:
            return json.loads(raw)
        except ValueError as error:
            raise errors.bad_request(
                f"error decoding request body ({self.headers.get('Content-Type')}): {error}"
            ) from error

    def _handle(self) -> None:
        received = time.time_ns()  # before any work: the audit log's requestReceivedTimestamp
        self._raw_body = None
        self._warnings = []
        self._seen = Seen()
        self._serve()
        audit = self.apiserver.audit
        if audit is not None:
            audit.write(self._audit_event(received))

    def _audit_event(self, received: int) -> dict[str, Any]:
        peer = self.client_address[0]
        completed = time.time_ns()
        return audit_event(
            self._seen, self.headers, self.path, self.command, peer, received, completed
        )

    def _serve(self) -> None:
        """The request, answered; what ``_seen`` learns of it on the way is for the audit log."""
        url = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(url.query, True).items()}
        # Percent-escapes are decoded before routing, as Go's URL.Path is (a:b, a%3Ab alike).
        path = unquote(url.path).rstrip("/") or "/"
        seen = self._seen
        try:
            server = self.apiserver
            seen.user = server.users.authenticate(self.headers.get("Authorization"))
            user = seen.acting = impersonate(self.headers, seen.user, server.authorizer)
            resource_path = seen.where = parse_resource_path(path)
            attributes = request_attributes(user, self.command, path, resource_path, query)
            seen.attributes = attributes
            server.faults.log(
                LoggedRequest(
                    self.command,
                    path,
                    url.query,
                    attributes.verb,
                    self.headers.get("User-Agent", ""),
                    user["username"],
                    tuple(user.get("groups") or ()),
                    self._dry_run(query),
                )
            )
            self._inject_faults(path)
            server.authorizer.require(attributes)
            if resource_path is None:
                self._serve_non_resource(path)
            else:
                self._serve_resource(resource_path, attributes, query)
        except ApiError as error:
            self._body()
            self._send_error(error)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True
        except Exception as error:
            traceback.print_exc(file=sys.stderr)
            self._send_json(500, ApiError(500, "InternalError", f"internal error: {error}").status)

    def _inject_faults(self, path: str) -> None:
        self.apiserver.faults.wait_latency(self.command, path)
        failure = self.apiserver.faults.injected_failure(self.command, path)
        if failure is not None:
            status, message = failure
            raise ApiError(status, reason_for(status), message)

    # -- non-resource paths ------------------------------------------------------------------

    def _serve_non_resource(self, path: str) -> None:
        registry = self.apiserver.registry
        parts = [part for part in path.split("/") if part]
        document: Any = None
        if path in ("/healthz", "/readyz", "/livez"):
            return self._send_text("ok")
        if path == "/version":
            document = discovery.VERSION
        elif path == "/api":
            document = discovery.core_versions()
        elif path == "/api/v1":
            document = discovery.resource_list(registry, "", "v1")
        elif path == "/apis":
            document = discovery.group_list(registry)
        elif len(parts) == 2 and parts[0] == "apis":
            document = discovery.group(registry, parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            document = discovery.resource_list(registry, parts[1], parts[2])
        elif path == "/openapi/v3":
            document = openapi.root_document(registry)
        elif len(parts) >= 4 and parts[:2] == ["openapi", "v3"]:
            group_name = "" if parts[2] == "api" else parts[3]
            document = openapi.group_version_document(registry, group_name, parts[-1])
        if document is None:
            raise errors.path_not_found()
        self._send_json(200, document)
        return None

    def _send_error(self, error: ApiError) -> None:
        """The Status, with its code as the HTTP status. Go's net/http panics on a status
        outside 100-999 (a webhook may set any code), and kube-apiserver's panic recovery then
        answers a plain-text 500."""
        if 100 <= error.code <= 999:
            self._send_json(error.code, error.status)
        else:
            self._send_text(PANIC_TEXT, 500)

    def _send_text(self, text: str, code: int = 200) -> None:
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # -- resources ---------------------------------------------------------------------------

    def _serve_resource(
        self, where: ResourcePath, attributes: Attributes, query: dict[str, str]
    ) -> None:
        verb, user = attributes.verb, dict(attributes.user)
        resource = self.apiserver.registry.find(where.group, where.version, where.plural)
        if resource is None:
            raise errors.path_not_found()
        if verb not in resource.verbs:
            raise errors.method_not_supported(resource.group, resource.plural, verb)
        if where.subresource and where.subresource not in resource.subresources:
            raise errors.path_not_found()
        if resource.namespaced != (where.namespace is not None) and verb not in ("list", "watch"):
            raise errors.path_not_found()
        namespace = where.namespace or ""
        api = self.apiserver.api
        caller = Caller(
            user_info=user,
            user_agent=self.headers.get("User-Agent", ""),
            field_manager=query.get("fieldManager", ""),
            force=query.get("force") == "true",
            dry_run=query.get("dryRun") == "All",
            strict=query.get("fieldValidation") == "Strict",
            warnings=self._warnings,
        )
        if verb == "get":
            assert where.name is not None
            self._send_object(resource, api.get(resource, namespace, where.name), query)
        elif verb == "list":
            listed = api.list(
                resource,
                where.namespace,
                query.get("labelSelector", ""),
                query.get("fieldSelector", ""),
                ListOptions.from_query(query),
            )
            self._send_list(resource, listed)
        elif verb == "watch":
            self._watch(resource, where.namespace, query)
        elif verb == "create":
            self._send_json(201, api.create(resource, namespace, self._json_body(), caller))
        elif verb == "update":
            assert where.name is not None
            body = self._json_body()
            updated = api.update(resource, namespace, where.name, body, caller, where.subresource)
            self._send_json(200, updated)
        elif verb == "patch":
            assert where.name is not None
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if content_type == APPLY_PATCH:
                self._authorize_create_by_apply(resource, attributes)
            patched, created = api.patch(
                resource,
                namespace,
                where.name,
                self._body(),
                content_type,
                caller,
                where.subresource,
            )
            self._send_json(201 if created else 200, patched)
        elif verb == "delete":
            assert where.name is not None
            options = self._delete_options(query)
            caller = replace(caller, dry_run=options.get("dryRun") == ["All"])
            self._send_json(200, api.delete(resource, namespace, where.name, options, caller))
        elif verb == "deletecollection":
            self._body()
            removed = api.delete_collection(
                resource,
                where.namespace,
                query.get("labelSelector", ""),
                query.get("fieldSelector", ""),
                caller,
            )
            self._send_json(200, removed)
        else:
            raise errors.method_not_supported(resource.group, resource.plural, verb)

    def _dry_run(self, query: dict[str, str]) -> bool:
        """Whether a request asks for a dry run, read as the server will read it."""
        if self.command != "DELETE":
            return query.get("dryRun") == "All"
        try:
            return self._delete_options(query).get("dryRun") == ["All"]
        except ApiError:
            return False  # the request will be refused, never carried out

    def _delete_options(self, query: dict[str, str]) -> dict[str, Any]:
        """DeleteOptions come from the body when there is one, and then the query is ignored
        (kube-apiserver's DeleteResource reads one or the other): ``?dryRun=All`` beside a body
        deletes for real."""
        if self._body():
            options = self._json_body()
            if not isinstance(options, dict):
                raise errors.bad_request("the body of the request was not a JSON object")
            return options
        options = {key: query[key] for key in ("propagationPolicy",) if key in query}
        if "dryRun" in query:
            options["dryRun"] = [query["dryRun"]]
        return options

    def _authorize_create_by_apply(self, resource: Resource, attributes: Attributes) -> None:
        """An apply that creates the object must also be allowed to ``create`` it."""
        where = (attributes.namespace if resource.namespaced else "", attributes.name)
        if self.apiserver.store.get(resource.group, resource.plural, *where) is not None:
            return
        decision = self.apiserver.authorizer.authorize(replace(attributes, verb="create"))
        if not decision.allowed:
            raise errors.forbidden(
                attributes.group, attributes.resource, attributes.name, decision.reason
            )

    def _representation(self) -> tuple[str, str] | None:
        """The transform the Accept header asks for (representations.negotiate)."""
        return representations.negotiate(self.headers.get("Accept") or "")

    def _send_object(self, resource: Resource, obj: dict[str, Any], query: dict[str, str]) -> None:
        wanted = self._representation()
        if wanted is None:
            self._send_json(200, obj)
        elif wanted[0] == representations.TABLE:
            rv = obj["metadata"].get("resourceVersion", "")
            self._send_json(200, tables.table(resource, [obj], {"resourceVersion": rv}))
        elif wanted[0] == representations.METADATA:
            self._send_json(200, representations.as_metadata(obj, wanted[1]))
        else:
            raise representations.not_acceptable(
                f"you requested {wanted[0]}, but the requested object is not a list"
            )

    def _send_list(self, resource: Resource, listed: dict[str, Any]) -> None:
        wanted = self._representation()
        if wanted is None:
            if not resource.custom:
                listed = {**listed, "items": [_typed_item(item) for item in listed["items"]]}
            self._send_json(200, listed)
        elif wanted[0] == representations.TABLE:
            self._send_json(200, tables.table(resource, listed["items"], listed["metadata"]))
        elif wanted[0] == representations.METADATA_LIST:
            self._send_json(200, representations.as_metadata_list(listed, wanted[1]))
        else:
            raise representations.not_acceptable(
                f"you requested {wanted[0]}, but the requested object is a list"
            )

    def _watch(self, resource: Resource, namespace: str | None, query: dict[str, str]) -> None:
        predicate = selector(
            query.get("labelSelector", ""),
            query.get("fieldSelector", ""),
            resource.kind,
            resource.namespaced,
        )
        options = WatchOptions(
            resource_version=query.get("resourceVersion", ""),
            timeout=float(query.get("timeoutSeconds") or 1800),
            bookmarks=query.get("allowWatchBookmarks") == "true",
            send_initial_events=query.get("sendInitialEvents") == "true",
            bookmark_interval=self.apiserver.bookmark_interval,
        )
        epoch = self.apiserver.faults.watch_epoch
        server = self.apiserver

        def stopped() -> bool:
            return server.stopping or server.faults.watch_epoch != epoch

        events = stream(server.store, resource, namespace, predicate, options, stopped)
        self._stream(resource, events)
        # A watch that ran out its timeout leaves the connection to the client's next request,
        # as Go's net/http does after a complete chunked answer; one the server ended (it is
        # stopping, or the watches were dropped) goes with its connection.
        self.close_connection = stopped()

    def _stream(self, resource: Resource, events: Iterator[dict[str, Any]]) -> None:
        wanted = self._representation()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.flush()
        first = True
        for event in events:
            obj = event["object"]
            if wanted is not None and event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                obj = self._transformed_event_object(resource, obj, wanted, headers=first)
                first = False
            data = json.dumps({"type": event["type"], "object": obj}).encode() + b"\n"
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    @staticmethod
    def _transformed_event_object(
        resource: Resource, obj: dict[str, Any], wanted: tuple[str, str], headers: bool
    ) -> dict[str, Any]:
        """A watched object in the form asked for; the list form cannot be made of one object,
        and kube-apiserver's watch encoder then sends the object as it is."""
        kind, version = wanted
        if kind == representations.TABLE:
            rv = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
            return tables.table(resource, [obj], rv, headers=headers)
        if kind == representations.METADATA:
            return representations.as_metadata(obj, version)
        return obj


def _asks_for_gzip(headers: Any) -> bool:
    """kube-apiserver's test: one of the comma-separated Accept-Encoding tokens is exactly
    ``gzip`` once trimmed (a ``gzip;q=1`` does not count)."""
    return any(
        token.strip() == "gzip" for token in (headers.get("Accept-Encoding") or "").split(",")
    )


def _typed_item(item: dict[str, Any]) -> dict[str, Any]:
    """Items of a built-in list carry no kind/apiVersion on the real server."""
    return {k: v for k, v in item.items() if k not in ("kind", "apiVersion")}


def _warning_header(text: str) -> str:
    """RFC 7234 warn-value as kube-apiserver sends it: code 299, no agent, quoted text."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'
