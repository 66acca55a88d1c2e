"""The one adapter between Accurate and the Kubernetes API, shared by the CLI and the controller.

It loads credentials the way kubectl does (kubeconfig files merged from KUBECONFIG, contexts,
kubectl's override flags, in-cluster service account) with the ``kubernetes`` package, and
then speaks plain JSON over urllib3 itself: responses stay dicts, as the pure rules expect, a
10,000-namespace list is one request and one ``json.loads``, and retries are the caller's
decision rather than hidden in a generated client.
"""

from __future__ import annotations

import copy
import json
import os
import re
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
from kubernetes.client import Configuration
from kubernetes.config import ConfigException, kube_config, load_incluster_config

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|m|s|ms)?)+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)?")
_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, None: 1.0}


class KubeError(Exception):
    """The API could not be reached or configured; the message says what to fix."""


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


@dataclass(frozen=True)
class ConnectionOptions:
    """kubectl's generic connection flags; None means "as the kubeconfig says"."""

    kubeconfig: str | None = None
    context: str | None = None
    cluster: str | None = None
    user: str | None = None
    server: str | None = None
    token: str | None = None
    certificate_authority: str | None = None
    client_certificate: str | None = None
    client_key: str | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    request_timeout: str | None = None
    impersonate: str | None = None
    impersonate_groups: tuple[str, ...] = field(default=())


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


def load_configuration(options: ConnectionOptions) -> Configuration:
    """Credentials and endpoint as kubectl would pick them for the same flags and environment."""
    configuration = Configuration()
    paths = _kubeconfig_paths(options.kubeconfig)
    existing = [p for p in paths if os.path.exists(p)]
    if options.kubeconfig and not existing:
        raise KubeError(f"kubeconfig {options.kubeconfig} does not exist")
    if existing:
        _load_kubeconfig(configuration, existing, options)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        load_incluster_config(client_configuration=configuration)
    elif not options.server:
        raise KubeError(
            "no kubeconfig found (looked in "
            + ", ".join(paths)
            + ") and not running in a cluster; pass --kubeconfig or --server"
        )
    _override(configuration, options)
    return configuration


def _kubeconfig_paths(explicit: str | None) -> list[str]:
    if explicit:
        return [os.path.expanduser(explicit)]
    joined = os.environ.get("KUBECONFIG") or "~/.kube/config"
    return [os.path.expanduser(p) for p in joined.split(os.pathsep) if p]


def _load_kubeconfig(
    configuration: Configuration, paths: list[str], options: ConnectionOptions
) -> None:
    """Merge the files as kubectl does (first file wins per entry); relative paths in each file
    stay relative to that file, which the library's merged nodes remember."""
    try:
        merged = kube_config.KubeConfigMerger(os.pathsep.join(paths)).config
        document = merged.value
        context_name = options.context or document.get("current-context")
        if options.cluster or options.user:
            context_name = _with_overrides(document, context_name, options)
        loader = kube_config.KubeConfigLoader(config_dict=merged, active_context=context_name)
        loader.load_and_set(configuration)
    except (ConfigException, KeyError, TypeError, ValueError) as error:
        raise KubeError(f"invalid kubeconfig ({', '.join(paths)}): {error}") from error


def _with_overrides(
    document: dict[str, Any], context_name: str | None, options: ConnectionOptions
) -> str:
    """Add a context that uses --cluster/--user instead of the chosen context's."""
    contexts = [getattr(c, "value", c) for c in document.get("contexts") or []]
    base = next((c.get("context") or {} for c in contexts if c["name"] == context_name), {})
    override = {
        **base,
        **({"cluster": options.cluster} if options.cluster else {}),
        **({"user": options.user} if options.user else {}),
    }
    name = "accurate-flag-override"
    document.setdefault("contexts", []).append({"name": name, "context": override})
    return name


def _override(configuration: Configuration, options: ConnectionOptions) -> None:
    if options.server:
        configuration.host = options.server.rstrip("/")
    if options.token:
        configuration.api_key = {"BearerToken": f"Bearer {options.token}"}
        configuration.api_key_prefix = {}
        configuration.refresh_api_key_hook = None
    if options.certificate_authority:
        configuration.ssl_ca_cert = options.certificate_authority
    if options.client_certificate:
        configuration.cert_file = options.client_certificate
    if options.client_key:
        configuration.key_file = options.client_key
    if options.insecure_skip_tls_verify:
        configuration.verify_ssl = False
    if options.tls_server_name:
        configuration.tls_server_name = options.tls_server_name


class Kube:
    """A connection to one API server: JSON requests, watches and discovery."""

    def __init__(
        self,
        configuration: Configuration,
        *,
        timeout: float | None = None,
        impersonate: str | None = None,
        impersonate_groups: tuple[str, ...] = (),
        user_agent: str = "accurate",
        pool_size: int = 8,
    ) -> None:
        self.configuration = configuration
        self.host = configuration.host.rstrip("/")
        self.timeout = timeout
        self.headers: dict[str, str] = {"User-Agent": user_agent, "Accept": JSON}
        if impersonate:
            self.headers["Impersonate-User"] = impersonate
        self._groups = impersonate_groups
        self._pool = urllib3.PoolManager(maxsize=pool_size, **_tls_arguments(configuration))

    @classmethod
    def connect(cls, options: ConnectionOptions, user_agent: str = "accurate") -> Kube:
        timeout = parse_duration(options.request_timeout) if options.request_timeout else None
        return cls(
            load_configuration(options),
            timeout=timeout,
            impersonate=options.impersonate,
            impersonate_groups=options.impersonate_groups,
            user_agent=user_agent,
        )

    def with_timeout(self, seconds: float) -> Kube:
        """The same connection with every request bounded by ``seconds`` (or the tighter timeout
        it already had), for callers such as leader election that must never hang on a dead
        connection whatever the user's --request-timeout says."""
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
    ) -> Any:
        """Send one request; returns the decoded JSON body or raises ApiError / KubeError."""
        response = self._send(method, path, query, body, content_type, stream=False)
        return _decode(response.status, response.data)

    def get(self, path: str) -> dict[str, Any]:
        return dict(self.request("GET", path))

    def list_objects(self, path: str, **query: str) -> dict[str, Any]:
        """A LIST, with ``labelSelector``/``fieldSelector``/... passed as keyword arguments."""
        return dict(self.request("GET", path, query=query))

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
        # A connection of its own: the server may close it when the watch ends, and a pooled
        # connection would then fail the next request that picks it up.
        own = urllib3.PoolManager(maxsize=1, **_tls_arguments(self.configuration))
        try:
            response = self._send("GET", path, params, None, JSON, stream=True, pool=own)
            if response.status >= 400:
                _decode(response.status, response.read())
            for event in _events(response, path):
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise ApiError(int(status.get("code") or 500), status)
                yield event
        finally:
            own.clear()

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
        *,
        stream: bool,
        pool: urllib3.PoolManager | None = None,
    ) -> urllib3.BaseHTTPResponse:
        url = self.host + path + (f"?{urlencode(query)}" if query else "")
        headers: Mapping[str, str] = {**self.headers, **self._auth_headers()}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers = {**headers, "Content-Type": content_type}
        if self._groups:
            headers = urllib3.HTTPHeaderDict(headers)
            for group in self._groups:
                headers.add("Impersonate-Group", group)
        timeout = None if stream else self.timeout
        try:
            return (pool or self._pool).request(
                method,
                url,
                body=data,
                headers=headers,
                timeout=urllib3.Timeout(total=timeout) if timeout else None,
                preload_content=not stream,
                retries=False,
            )
        except urllib3.exceptions.HTTPError as error:
            raise KubeError(f"cannot reach the API server at {self.host}: {error}") from error

    def _auth_headers(self) -> dict[str, str]:
        """The bearer token, refreshed through the kubeconfig's exec plugin when it expires."""
        token = self.configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
        if token:
            return {"Authorization": token}
        user, password = self.configuration.username, self.configuration.password
        if user and password:
            return dict(urllib3.util.make_headers(basic_auth=f"{user}:{password}"))
        return {}


def resource_path(
    group: str,
    version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """The REST path of a collection or an object; ``group`` "" is the core group."""
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    parts = [prefix]
    if namespace:
        parts.append(f"namespaces/{quote(namespace, safe='')}")
    parts.append(plural)
    if name:
        parts.append(quote(name, safe=""))
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


def _tls_arguments(configuration: Configuration) -> dict[str, Any]:
    if not configuration.host.startswith("https"):
        return {}
    arguments: dict[str, Any] = {
        "cert_reqs": ssl.CERT_REQUIRED if configuration.verify_ssl else ssl.CERT_NONE,
        "ca_certs": configuration.ssl_ca_cert,
        "cert_file": configuration.cert_file,
        "key_file": configuration.key_file,
    }
    if configuration.ca_cert_data:
        arguments["ca_cert_data"] = configuration.ca_cert_data
    if configuration.tls_server_name:
        arguments["server_hostname"] = configuration.tls_server_name
    if not configuration.verify_ssl:
        arguments["assert_hostname"] = False
    return arguments


def _events(response: urllib3.BaseHTTPResponse, path: str) -> Iterator[dict[str, Any]]:
    """The decoded events of a watch; a stream cut off mid-way is a KubeError, so that the
    caller lists again rather than trusting what it has."""
    try:
        for line in _lines(response):
            yield json.loads(line)
    except (urllib3.exceptions.HTTPError, OSError, ValueError) as error:
        raise KubeError(f"the watch of {path} broke off: {error}") from error


def _lines(response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """Newline-delimited JSON from a chunked watch response, however the chunks fall."""
    pending = b""
    for chunk in response.stream(amt=65536, decode_content=True):
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
