"""The one adapter between Accurate and the Kubernetes API, shared by the CLI and the controller.

It connects where ``libaccurate.network.kubeconfig`` says, with the credentials it found there,
and speaks plain JSON over HTTP/1.1 itself (``libaccurate.network.http_connection``): responses
stay dicts, as the pure rules expect, a 10,000-namespace list is one request and one
``json.loads``, and retries are the caller's decision rather than hidden in a generated client.
Those connections and a small pool of them kept alive (``_Connections``) are all the
controller's threads and the plugin's one request need; an HTTP library cost every plugin
command 25 ms or more of imports, ``http.client`` 12 % of a ``list`` (issue 18).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

# KubeError and ConnectionOptions are defined with the loader, which needs them first; every
# caller imports them from here, with the rest of the adapter.
from libaccurate.network.kubeconfig import (
    ConnectionOptions,
    Credentials,
    KubeError,
    load_credentials,
)

# Callers build the paths they request with the adapter, so it hands them the builder too.
from libaccurate.paths import resource_path as resource_path

# The connection and ssl are imported where a connection is made: importing this module for its
# errors, paths and types (as the plugin's command modules do) then loads no network stack.
if TYPE_CHECKING:
    import ssl

    from libaccurate.network.http_connection import Connection, Response

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
# Items' metadata alone, as client-go's metadata client asks, with plain JSON after it for a
# server that does not serve the form (kube-apiserver has since 1.15, custom resources too).
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
APPLY_PATCH = "application/apply-patch+yaml"

# A server URL in the form kubeconfigs hold it: http(s), a name or address, a port, a plain
# path. ``_server_parts`` reads it without urllib.parse.
_PLAIN_SERVER = re.compile(r"(https?)://([A-Za-z0-9.-]+)(?::([0-9]{1,5}))?(/[A-Za-z0-9._~/-]*)?")
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|m|s|ms)?)+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)?")
_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, None: 1.0}


class ApiError(KubeError):
    """The API server answered with an error ``Status``; ``status`` is that object."""

    def __init__(self, code: int, status: Mapping[str, Any]) -> None:
        self.code = code
        self.status = dict(status)
        super().__init__(self.message)

    @property
    def reason(self) -> str:
        return str(self.status.get("reason") or "")

    @property
    def message(self) -> str:
        return str(self.status.get("message") or f"HTTP {self.code}")

    @property
    def causes(self) -> list[dict[str, Any]]:
        return list((self.status.get("details") or {}).get("causes") or [])

    @property
    def not_found(self) -> bool:
        return self.code == 404

    @property
    def conflict(self) -> bool:
        """A stale write (409 Conflict), not an existing name (409 AlreadyExists)."""
        return self.code == 409 and self.reason == "Conflict"

    @property
    def already_exists(self) -> bool:
        return self.code == 409 and self.reason == "AlreadyExists"

    @property
    def namespace_terminating(self) -> bool:
        return any(c.get("reason") == "NamespaceTerminating" for c in self.causes)

    @property
    def retriable(self) -> bool:
        """Worth another try after a pause: overload, a stale read, a server-side hiccup."""
        return self.conflict or self.code == 429 or self.code >= 500


def parse_duration(text: str) -> float | None:
    """kubectl's --request-timeout: a bare number of seconds or a Go duration; 0 means none."""
    value = text.strip()
    if not value or not _DURATION.match(value):
        raise KubeError(
            f"invalid --request-timeout {text!r}: use a number of seconds or a duration "
            "such as 30s, 1m or 1h"
        )
    seconds = sum(float(n) * _SECONDS[unit or None] for n, unit in _DURATION_PART.findall(value))
    return seconds or None


class Kube:
    """A connection to one API server: JSON requests, watches and discovery."""

    def __init__(
        self,
        credentials: Credentials,
        *,
        timeout: float | None = None,
        impersonate: str | None = None,
        impersonate_groups: tuple[str, ...] = (),
        user_agent: str = "accurate",
        pool_size: int = 8,
    ) -> None:
        self.credentials = credentials
        self.host = credentials.host.rstrip("/")
        self.timeout = timeout
        self.headers: dict[str, str] = {"User-Agent": user_agent}
        if credentials.compression:
            # As Go's transport asks for kubectl; kube-apiserver then gzips responses over
            # 128 KiB (a 2,000-namespace LIST: 1.4 MB of JSON, 80 KB on the wire).
            self.headers["Accept-Encoding"] = "gzip"
        if impersonate:
            self.headers["Impersonate-User"] = impersonate
        self._groups = impersonate_groups
        self._connections = _Connections(credentials, pool_size)

    @classmethod
    def connect(cls, options: ConnectionOptions, user_agent: str = "accurate") -> Kube:
        timeout = parse_duration(options.request_timeout) if options.request_timeout else None
        return cls(
            load_credentials(options),
            timeout=timeout,
            impersonate=options.impersonate,
            impersonate_groups=options.impersonate_groups,
            user_agent=user_agent,
        )

    def with_timeout(self, seconds: float) -> Kube:
        """The same connection with every request bounded by ``seconds`` (or the tighter timeout
        it already had), for callers such as leader election that must never hang on a dead
        connection whatever the user's --request-timeout says."""
        import copy  # with weakref, 1 % of a `list`, which needs neither

        bounded = copy.copy(self)
        bounded.timeout = min(self.timeout, seconds) if self.timeout else seconds
        return bounded

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        accept: str = JSON,
    ) -> Any:
        """Send one request; returns the decoded JSON body or raises ApiError / KubeError."""
        connection = self._connections.take()
        response = self._send(
            method, path, query, body, content_type, connection, self.timeout, accept
        )
        data = self._read(response, connection)
        self._connections.give_back(connection)
        return _decode(response.status, data)

    def open_ahead(self, count: int) -> None:
        """Start opening ``count`` connections now, each in a thread of its own, for requests
        the caller will surely send once it is ready: their handshakes' round trips pass
        meanwhile, and the requests take them first."""
        self._connections.open_ahead(count, self.timeout)

    def get(self, path: str) -> dict[str, Any]:
        return dict(self.request("GET", path))

    def find(self, path: str) -> dict[str, Any] | None:
        """A GET for callers to whom "not there" is an answer: None on 404."""
        try:
            return self.get(path)
        except ApiError as error:
            if error.not_found:
                return None
            raise

    def list_objects(self, path: str, **query: str) -> dict[str, Any]:
        """A LIST, with ``labelSelector``/``fieldSelector``/... passed as keyword arguments."""
        return dict(self.request("GET", path, query=query))

    def list_metadata(self, path: str, **query: str) -> dict[str, Any]:
        """A LIST of the items' metadata only (kind, spec and status left out), for callers
        that read names, labels or annotations and nothing else: a fraction of the bytes. A
        server without the form answers with whole items, whose metadata is the same."""
        return dict(self.request("GET", path, query=query, accept=METADATA_LIST))

    def create(self, path: str, body: Mapping[str, Any], **query: str) -> dict[str, Any]:
        return dict(self.request("POST", path, query=query, body=body))

    def replace(self, path: str, body: Mapping[str, Any], **query: str) -> dict[str, Any]:
        return dict(self.request("PUT", path, query=query, body=body))

    def patch(
        self, path: str, body: Any, content_type: str = MERGE_PATCH, **query: str
    ) -> dict[str, Any]:
        return dict(self.request("PATCH", path, query=query, body=body, content_type=content_type))

    def apply(
        self, path: str, body: Mapping[str, Any], field_manager: str, force: bool = True
    ) -> dict[str, Any]:
        """Server-side apply (JSON is YAML, so the body is sent as JSON)."""
        query = {"fieldManager": field_manager, **({"force": "true"} if force else {})}
        return self.patch(path, body, APPLY_PATCH, **query)

    def delete(self, path: str, body: Mapping[str, Any] | None = None, **query: str) -> Any:
        return self.request("DELETE", path, query=query, body=body)

    def watch(
        self,
        path: str,
        resource_version: str,
        *,
        timeout_seconds: int = 300,
        **query: str,
    ) -> Iterator[dict[str, Any]]:
        """Watch events as dicts ({"type", "object"}) until the server ends the stream.

        An ERROR event (410 Gone for an expired resourceVersion) is raised as ApiError, so the
        caller's answer is always the same: list again.
        """
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
            **query,
        }
        # A connection of its own, closed when the watch ends: the server may close it then,
        # and a pooled connection would fail the next request that picks it up.
        own = self._connections.open()
        try:
            response = self._send("GET", path, params, None, JSON, own, timeout=None)
            if response.status >= 400:
                _decode(response.status, self._read(response, own))
            for event in _events(response, path):
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise ApiError(int(status.get("code") or 500), status)
                yield event
        finally:
            own.close()

    def server_resources(self) -> list[dict[str, Any]]:
        """Every group/version's APIResourceList (preferred and other versions), for watches."""
        lists = [self.get("/api/v1")]
        for group in self.get("/apis").get("groups") or []:
            for version in group.get("versions") or []:
                try:
                    lists.append(self.get(f"/apis/{version['groupVersion']}"))
                except ApiError as error:
                    if error.code not in (404, 503):
                        raise
        return lists

    def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None,
        body: Any,
        content_type: str,
        connection: Connection,
        timeout: float | None,
        accept: str = JSON,
    ) -> Response:
        """Send one request on ``connection`` and return the response, its body not yet read.
        ``timeout`` bounds the connect and each read, as kubectl's --request-timeout does."""
        target = self._connections.prefix + path + (f"?{_query_string(query)}" if query else "")
        authorization = self.credentials.authorization()
        headers = [
            *self.headers.items(),
            ("Accept", accept),
            *([("Authorization", authorization)] if authorization else []),
            *(("Impersonate-Group", group) for group in self._groups),
        ]
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers += [("Content-Type", content_type), ("Content-Length", str(len(data)))]
        try:
            response = connection.request(method, target, headers, data, timeout)
        except OSError as error:
            connection.close()
            raise self._unreachable(error) from error
        _debug('%s "%s %s" %s', self.host, method, target, response.status)
        return response

    def _read(self, response: Response, connection: Connection) -> bytes:
        """The whole body; a connection whose response broke off is closed, never reused."""
        try:
            return response.read()
        except OSError as error:
            connection.close()
            raise self._unreachable(error) from error

    def _unreachable(self, error: OSError) -> KubeError:
        """What went wrong on the way, and by which way: a proxy's own failures name it."""
        proxy, via = self.credentials.proxy, ""
        if proxy is not None:
            from libaccurate.network.tunnels import ProxyError

            via = "" if isinstance(error, ProxyError) else f" through {proxy.describe()}"
        return KubeError(f"cannot reach the API server at {self.host}{via}: {error}")


def _query_string(query: Mapping[str, str]) -> str:
    """``urlencode(query)``, imported when a request has a query (``list`` sends none)."""
    from urllib.parse import urlencode

    return urlencode(query)


def _server_parts(host: str) -> tuple[str, str | None, int | None, str, str]:
    """The scheme, host name, port, path and authority of the server at ``host`` (a URL, or
    an address, then http), as ``urlsplit`` gives them. The form kubeconfigs hold is read
    here: importing urllib.parse, with ipaddress, was 5 % of a ``list``; any other goes to
    urlsplit, whose errors stay as they were."""
    url = host if "://" in host else f"http://{host}"
    plain = _PLAIN_SERVER.fullmatch(url)
    if plain is not None and int(plain[3] or 0) <= 65535:
        scheme, name, port, path = plain.groups()
        authority = f"{name}:{port}" if port is not None else name
        number = None if port is None else int(port)
        return scheme, name.lower(), number, path or "", authority
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        number = parts.port
    except ValueError as error:  # a port that is not a number
        raise KubeError(f"invalid API server address {host}: {error}") from error
    return parts.scheme, parts.hostname, number, parts.path, parts.netloc.rpartition("@")[2]


class _Connections:
    """Keep-alive connections to one API server, shared by the threads using one ``Kube``: a
    request takes an idle one (or opens one) and gives it back once its response is read; at
    most ``size`` are kept idle. A connection the server closed meanwhile is dropped on taking,
    as HTTP clients do, so a request never fails for being sent on it."""

    def __init__(self, credentials: Credentials, size: int) -> None:
        host = credentials.host
        scheme, hostname, port, path, self._authority = _server_parts(host)
        self.prefix = path.rstrip("/")
        self._secure = scheme == "https"
        self._address = (hostname or "", port or (443 if self._secure else 80))
        self._tls = _ssl_context(credentials) if self._secure else None
        self._server_name = credentials.tls_server_name or hostname
        self._proxy = credentials.proxy
        self._size = size
        self._idle: list[Connection] = []
        # Connections being opened ahead (Kube.open_ahead): taken first, unchecked, since
        # they have carried nothing the server could have closed them after.
        self._ahead: list[Connection] = []
        self._lock = threading.Lock()

    def open(self) -> Connection:
        from libaccurate.network.http_connection import Connection

        host, port = self._address
        _debug("new connection to %s:%s", host, port)
        return Connection(host, port, self._authority, self._tls, self._server_name, self._proxy)

    def open_ahead(self, count: int, timeout: float | None) -> None:
        for _ in range(count):
            connection = self.open()
            connection.open_ahead(timeout)
            with self._lock:
                self._ahead.append(connection)

    def take(self) -> Connection:
        with self._lock:
            if self._ahead:
                return self._ahead.pop(0)
            while self._idle:
                connection = self._idle.pop()
                if not _closed_by_server(connection):
                    return connection
                connection.close()
        return self.open()

    def give_back(self, connection: Connection) -> None:
        with self._lock:
            if connection.reusable and len(self._idle) < self._size:
                self._idle.append(connection)
                return
        connection.close()


def _debug(message: str, *args: object) -> None:
    """A debug record of the HTTP traffic, as the controller shows at its debug level.
    ``logging`` is used only when the program imported it: the plugin does not (it is a few ms
    of every start, issue 18), and where nothing imported it, nothing would show the record."""
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.getLogger(__name__).debug(message, *args)


def _closed_by_server(connection: Connection) -> bool:
    """An idle keep-alive connection with something to read has been closed by the server (or
    broken): there is no response it could be waiting for."""
    import select

    sock = connection.sock
    if sock is None:
        return False
    try:
        if hasattr(select, "poll"):  # select.select cannot watch descriptors above 1023
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _ssl_context(credentials: Credentials) -> ssl.SSLContext:
    """One context for every connection: the CA (or the system's) and the client certificate
    are loaded once, not on every handshake. TLS 1.2 at least, as client-go."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if not credentials.verify:
        # Asked for in so many words (--insecure-skip-tls-verify).
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        if credentials.ca_file or credentials.ca_data:
            cadata = credentials.ca_data.decode("ascii", "replace") if credentials.ca_data else None
            context.load_verify_locations(cafile=credentials.ca_file, cadata=cadata)
        else:
            context.load_default_certs()
        _load_client_certificate(context, credentials)
    except (ssl.SSLError, OSError) as error:
        raise KubeError(f"cannot use the TLS settings for {credentials.host}: {error}") from error
    return context


def _load_client_certificate(context: ssl.SSLContext, credentials: Credentials) -> None:
    """The ssl module reads a certificate and key only from files, so data from the kubeconfig
    (``client-certificate-data``, ``client-key-data``) passes through one (see ``_pem_file``)."""
    with contextlib.ExitStack() as files:
        cert = _pem_file(files, "client.crt", credentials.cert_data) or credentials.cert_file
        if cert is None:
            return
        key = _pem_file(files, "client.key", credentials.key_data) or credentials.key_file
        context.load_cert_chain(cert, key)


def _pem_file(files: contextlib.ExitStack, name: str, data: bytes | None) -> str | None:
    """A path to read ``data`` from while ``files`` is open; None for no data. On Linux an
    anonymous memory file (memfd): a private key never reaches a disk, and nothing is left
    behind however the process ends, killed included; and nothing more is imported for the
    kubeconfigs most tools write (issue 30). Elsewhere a file created readable by its owner
    alone in a private temporary folder, removed when ``files`` closes, error or not."""
    if data is None:
        return None
    descriptor = _memory_file(name)
    if descriptor is None:
        import tempfile

        folder = files.enter_context(tempfile.TemporaryDirectory(prefix="accurate-"))
        path = os.path.join(folder, name)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    else:
        path = f"/proc/self/fd/{descriptor}"
    files.callback(os.close, descriptor)
    with open(descriptor, "wb", closefd=False) as stream:
        stream.write(data)
    return path


def _memory_file(name: str) -> int | None:
    """A descriptor of a new anonymous memory file, readable through /proc; None where the
    system has neither."""
    if not hasattr(os, "memfd_create") or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.memfd_create(name, os.MFD_CLOEXEC)
    except OSError:
        return None


def _events(response: Response, path: str) -> Iterator[dict[str, Any]]:
    """The decoded events of a watch; a stream cut off mid-way is a KubeError, so that the
    caller lists again rather than trusting what it has."""
    try:
        for line in _lines(response):
            yield json.loads(line)
    except (OSError, ValueError) as error:
        raise KubeError(f"the watch of {path} broke off: {error}") from error


def _lines(response: Response) -> Iterator[bytes]:
    """Newline-delimited JSON from a chunked watch response, however the chunks fall: each
    read returns what has arrived, without waiting for 64 KiB."""
    pending = b""
    for chunk in iter(lambda: response.read1(65536), b""):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        yield from (line for line in complete if line.strip())
    if pending.strip():
        yield pending


def _decode(code: int, data: bytes) -> Any:
    try:
        decoded = json.loads(data) if data else None
    except ValueError:
        decoded = None
    if code >= 400:
        status = decoded if isinstance(decoded, dict) and decoded.get("kind") == "Status" else None
        raise ApiError(code, status or {"code": code, "message": _text(data, code)})
    return decoded


def _text(data: bytes, code: int) -> str:
    text = data.decode(errors="replace").strip()
    return text[:500] if text else f"the server answered HTTP {code} with no explanation"
