"""Which API server to call and which credentials to show it, chosen as kubectl chooses them.

The rules are client-go's (``clientcmd``), which every kubectl user already relies on:

* Files: ``--kubeconfig`` alone when given (it must exist); otherwise every file listed in
  ``KUBECONFIG`` (missing ones skipped), or ``~/.kube/config``.
* Merging: the first file to name a cluster, user or context wins that entry whole, and the
  first file to set ``current-context`` wins it. A relative path in an entry is relative to the
  file that holds the entry.
* Flags: ``--context``, ``--cluster`` and ``--user`` pick entries; ``--server``, ``--token``,
  ``--certificate-authority``, ``--client-certificate``, ``--client-key``,
  ``--insecure-skip-tls-verify`` and ``--tls-server-name`` replace fields of the chosen ones
  (a CA flag and the insecure flag replace each other; ``--server`` drops the file's
  ``tls-server-name``).
* Credentials go only to an ``https`` server. With no kubeconfig file and no ``--server``, a
  pod's service account is used.

Static credentials (tokens, token files, client certificates, basic auth, CAs) are read here,
so that the common path never imports the ``kubernetes`` package: importing any part of it
loads the whole generated client, a quarter of a second of start-up for every ``kubectl
accurate`` command. Credentials that a program produces (``exec`` plugins, ``auth-provider``)
and the in-cluster service account are handed to that package, imported only then.
"""

# Annotations are evaluated here (no `from __future__ import annotations`): as strings, each
# NamedTuple field cost a compile() at import, the first one 10 M instructions, 5 % of a
# `list` (docs/design-notes.md, "`list` without click").

import base64
import binascii
import contextlib
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from libaccurate.network import plain_yaml

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# The environment variables that may choose a proxy (libaccurate.network.proxies).
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")
DEFAULT_KUBECONFIG = "~/.kube/config"
# How often a token file is read again, as client-go does for rotated tokens.
TOKEN_REREAD_SECONDS = 60.0

# What ``repr(Credentials)`` leaves out: secrets, and the function that makes them.
_UNSHOWN = frozenset({"key_data", "token", "token_source", "password"})
_SECTIONS = ("clusters", "users", "contexts")
# The fields of each section that name files, resolved against the file holding the entry.
_PATH_FIELDS = {
    "clusters": ("certificate-authority",),
    "users": ("client-certificate", "client-key", "tokenFile"),
    "contexts": (),
}
Fields = dict[str, Any]


class KubeError(Exception):
    """The API could not be reached or configured; the message says what to fix."""


class _Invalid(Exception):
    """A problem in the chosen kubeconfig entries or flags; the caller says where they came from."""


class ConnectionOptions(NamedTuple):
    """kubectl's generic connection flags; None means "as the kubeconfig says". A NamedTuple:
    every ``kubectl accurate`` command makes one at start, and a frozen dataclass of this many
    fields cost 2 % of a ``list`` to define (issue 18, docs/design-notes.md)."""

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
    impersonate_groups: tuple[str, ...] = ()
    namespace: str | None = None
    disable_compression: bool = False


class Proxy(NamedTuple):
    """A proxy to go through: ``scheme`` is how we speak to it (http or https), ``shown`` its URL
    without credentials, for messages, ``source`` the setting that chose it. Chosen by
    ``libaccurate.network.proxies``; kept here, beside the credentials that carry it, because
    their fields are evaluated when this module loads (see the module's docstring)."""

    scheme: str
    host: str
    port: int
    authorization: str | None
    shown: str
    source: str

    def describe(self) -> str:
        return f"the proxy {self.shown} (from {self.source})"


class Credentials(NamedTuple):
    """Where the API server is and what to show it.

    Each of the CA, the client certificate and the client key is a file or PEM data, never
    both. ``token_source``, when set, gives the token to send now: a token file read again, an
    exec plugin run again once its credential expires. A NamedTuple, as ``ConnectionOptions``;
    its ``repr`` leaves out the secrets (``_UNSHOWN``).
    """

    host: str
    ca_file: str | None = None
    ca_data: bytes | None = None
    cert_file: str | None = None
    cert_data: bytes | None = None
    key_file: str | None = None
    key_data: bytes | None = None
    token: str | None = None
    token_source: Callable[[], str] | None = None
    username: str | None = None
    password: str | None = None
    verify: bool = True
    tls_server_name: str | None = None
    # The namespace commands are about when none is named: -n, else the context's, as kubectl.
    namespace: str = "default"
    # The kubeconfig's name for whom (its user entry), for servers that cannot say who you are.
    user_entry: str | None = None
    # The proxy to go through (the cluster's proxy-url, else the environment's), None for none.
    proxy: Proxy | None = None
    # Whether to ask for gzip: kubectl's --disable-compression, or the cluster's
    # disable-compression, turns it off.
    compression: bool = True

    def __repr__(self) -> str:
        """Every field but the secrets, so that no log or traceback shows them."""
        shown = ", ".join(
            f"{name}={value!r}" for name, value in self._asdict().items() if name not in _UNSHOWN
        )
        return f"Credentials({shown})"

    @property
    def secure(self) -> bool:
        return self.host.startswith("https://")

    def authorization(self) -> str | None:
        """The Authorization header for the next request, if any."""
        token = self.token_source() if self.token_source else self.token
        if token:
            return f"Bearer {token}"
        if self.username or self.password:
            pair = f"{self.username or ''}:{self.password or ''}".encode()
            return f"Basic {base64.b64encode(pair).decode()}"
        return None


def load_credentials(options: ConnectionOptions) -> Credentials:
    """The endpoint and credentials kubectl would use with the same flags and environment."""
    paths = _kubeconfig_paths(options.kubeconfig)
    if options.kubeconfig and not os.path.exists(paths[0]):
        raise KubeError(f"kubeconfig {options.kubeconfig} does not exist")
    existing = [path for path in paths if os.path.exists(path)]
    if not existing and not options.server:
        if _in_cluster_possible():
            return _in_cluster(options)
        raise KubeError(
            "no kubeconfig found (looked in "
            + ", ".join(paths)
            + ") and not running in a cluster; pass --kubeconfig or --server"
        )
    where = f"kubeconfig ({', '.join(existing)})" if existing else "connection flags"
    try:
        return _choose(_merge(existing), options)
    except _Invalid as problem:
        raise KubeError(f"invalid {where}: {problem}") from None


def _kubeconfig_paths(explicit: str | None) -> list[str]:
    """The files to merge, in order: ``--kubeconfig``, else KUBECONFIG's list, else the default."""
    if explicit:
        return [os.path.expanduser(explicit)]
    listed = (os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG).split(os.pathsep)
    return [os.path.expanduser(path) for path in dict.fromkeys(listed) if path]


class _Kubeconfig:
    """The files merged: entries by name, their relative paths already made absolute."""

    def __init__(self) -> None:
        self.clusters: dict[str, Fields] = {}
        self.users: dict[str, Fields] = {}
        self.contexts: dict[str, Fields] = {}
        self.current_context = ""


def _merge(paths: list[str]) -> _Kubeconfig:
    merged = _Kubeconfig()
    for path in paths:
        document = _read(path)
        base = os.path.dirname(os.path.abspath(path))
        for section in _SECTIONS:
            table: dict[str, Fields] = getattr(merged, section)
            for name, fields in _entries(path, document, section).items():
                table.setdefault(name, _absolute(section, fields, base))
        merged.current_context = merged.current_context or _text(document.get("current-context"))
    return merged


def _read(path: str) -> Fields:
    """One kubeconfig file as a mapping."""
    try:
        with open(path, "rb") as file:
            text = file.read()
    except OSError as error:
        raise KubeError(f"cannot read kubeconfig {path}: {error.strerror}") from error
    try:
        document = plain_yaml.load(text)
    except plain_yaml.NotPlain:
        document = _parsed(path, text)
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise KubeError(f"invalid kubeconfig {path}: expected a mapping of clusters, users, ...")
    return document


def _parsed(path: str, text: bytes) -> Any:
    """A kubeconfig beyond the plain YAML that ``plain_yaml`` reads, by PyYAML. Imported only
    here: its import is a fifth of a ``list`` (issue 18)."""
    import yaml

    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:
        raise KubeError(f"invalid kubeconfig {path}: {error}") from error


def _entries(path: str, document: Fields, section: str) -> dict[str, Fields]:
    """One section of one file by name; ``clusters: [{name: a, cluster: {...}}]`` gives
    ``{"a": {...}}``."""
    key = section[:-1]
    entries = document.get(section) or []
    if not isinstance(entries, list):
        raise KubeError(f"invalid kubeconfig {path}: {section} must be a list")
    found: dict[str, Fields] = {}
    for entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise KubeError(f"invalid kubeconfig {path}: an entry of {section} has no name")
        if name in found:
            raise KubeError(f'invalid kubeconfig {path}: {key} "{name}" is listed twice')
        fields = entry.get(key) or {}
        if not isinstance(fields, dict):
            raise KubeError(f'invalid kubeconfig {path}: {key} "{name}" must be a mapping')
        found[name] = fields
    return found


def _absolute(section: str, fields: Fields, base: str) -> Fields:
    resolved = dict(fields)
    for key in _PATH_FIELDS[section]:
        if resolved.get(key):
            resolved[key] = os.path.normpath(os.path.join(base, str(resolved[key])))
    plugin = resolved.get("exec")
    # A command with a directory in it is a path; a bare name is looked up on PATH.
    if isinstance(plugin, dict) and os.sep in _text(plugin.get("command")):
        command = os.path.normpath(os.path.join(base, _text(plugin["command"])))
        resolved["exec"] = {**plugin, "command": command}
    return resolved


def _choose(config: _Kubeconfig, options: ConnectionOptions) -> Credentials:
    context_name = _context_name(config, options)
    context = config.contexts.get(context_name, {})
    cluster_name = options.cluster or _text(context.get("cluster"))
    user_name = options.user or _text(context.get("user"))
    cluster = _entry(config.clusters, cluster_name, "cluster", bool(options.cluster), context_name)
    user = _entry(config.users, user_name, "user", bool(options.user), context_name)
    cluster, user = _cluster_flags(cluster, options), _user_flags(user, options)
    if not cluster.get("server"):
        raise _Invalid(
            f'no server found for cluster "{cluster_name}"'
            if cluster_name
            else "no current-context: pass --context, --cluster or --server"
        )
    _check_cluster(cluster_name, cluster)
    _check_user(user_name, user)
    namespace = options.namespace or _text(context.get("namespace")) or "default"
    found = _credentials(cluster_name, cluster, user_name, user)
    return found._replace(
        namespace=namespace,
        user_entry=user_name or None,
        proxy=_proxy(found.host, _text(cluster.get("proxy-url")), cluster_name),
        compression=not (options.disable_compression or cluster.get("disable-compression") is True),
    )


def _context_name(config: _Kubeconfig, options: ConnectionOptions) -> str:
    if options.context:
        if options.context not in config.contexts:
            raise _Invalid(f'context "{options.context}" does not exist')
        return options.context
    name = config.current_context
    if name and name not in config.contexts:
        raise _Invalid(f"context was not found for specified context: {name}")
    return name


def _entry(
    table: Mapping[str, Fields], name: str, kind: str, by_flag: bool, context_name: str
) -> Fields:
    """The named cluster or user. A name nothing defines is an error (with kubectl's words),
    where kubectl itself would fall back to localhost:8080 or prompt for a password."""
    if not name:
        return {}
    if name in table:
        return table[name]
    if by_flag:
        raise _Invalid(f'{"auth info" if kind == "user" else kind} "{name}" does not exist')
    raise _Invalid(f'{kind} "{name}" was not found for context "{context_name}"')


def _cluster_flags(cluster: Fields, options: ConnectionOptions) -> Fields:
    merged = dict(cluster)
    if options.server:
        merged["server"] = options.server
    if options.insecure_skip_tls_verify or options.certificate_authority:
        merged["insecure-skip-tls-verify"] = options.insecure_skip_tls_verify
        merged["certificate-authority"] = options.certificate_authority
        merged.pop("certificate-authority-data", None)
    if options.tls_server_name or options.server:
        merged["tls-server-name"] = options.tls_server_name
    return merged


def _user_flags(user: Fields, options: ConnectionOptions) -> Fields:
    merged = dict(user)
    if options.token:
        merged["token"] = options.token
    for key, value in (
        ("client-certificate", options.client_certificate),
        ("client-key", options.client_key),
    ):
        if value:
            merged[key] = value
            merged.pop(f"{key}-data", None)
    return merged


def _check_cluster(name: str, cluster: Fields) -> None:
    has_ca = bool(cluster.get("certificate-authority") or cluster.get("certificate-authority-data"))
    _check_one_form(f'cluster "{name}"', cluster, "certificate-authority")
    if has_ca and cluster.get("insecure-skip-tls-verify") is True:
        raise _Invalid(
            f'cluster "{name}": specifying a root certificates file with the insecure flag '
            "is not allowed"
        )


def _check_user(name: str, user: Fields) -> None:
    owner = f'user "{name}"'
    _check_one_form(owner, user, "client-certificate")
    _check_one_form(owner, user, "client-key")
    has_cert = user.get("client-certificate") or user.get("client-certificate-data")
    if has_cert and not (user.get("client-key") or user.get("client-key-data")):
        raise _Invalid(f"{owner} has a client certificate but no client-key or client-key-data")
    methods = [
        method
        for method, present in (
            ("token", user.get("token") or user.get("tokenFile")),
            ("basicAuth", user.get("username") or user.get("password")),
            ("exec", user.get("exec")),
            ("auth-provider", user.get("auth-provider")),
        )
        if present
    ]
    if len(methods) > 1:
        found = " ".join(methods)
        raise _Invalid(
            f"more than one authentication method found for {name}; found [{found}], "
            "only one is allowed"
        )


def _check_one_form(owner: str, fields: Fields, key: str) -> None:
    if fields.get(key) and fields.get(f"{key}-data"):
        raise _Invalid(f"{owner} has both {key} and {key}-data; keep one")


def _server_url(cluster: Fields, user: Fields) -> str:
    """The server's URL. A bare ``host:port`` means https when TLS is set up (a CA, a client
    certificate or insecure-skip-tls-verify) and http otherwise, as client-go decides it, so
    the same kubeconfig reaches the same server as kubectl."""
    server = _text(cluster["server"]).rstrip("/")
    if "://" in server:
        return server
    tls_fields = (cluster, "certificate-authority"), (user, "client-certificate")
    tls = cluster.get("insecure-skip-tls-verify") is True or any(
        fields.get(key) or fields.get(f"{key}-data") for fields, key in tls_fields
    )
    return f"{'https' if tls else 'http'}://{server}"


def _credentials(cluster_name: str, cluster: Fields, user_name: str, user: Fields) -> Credentials:
    host = _server_url(cluster, user)
    if not host.startswith("https://"):
        # As kubectl: no credentials in clear text, whatever the kubeconfig holds.
        return Credentials(host=host)
    owner = f'user "{user_name}"'
    ca_file, ca_data = _file_or_data(cluster, "certificate-authority", f'cluster "{cluster_name}"')
    cert_file, cert_data = _file_or_data(user, "client-certificate", owner)
    # As kubectl: a key is used only with a certificate.
    has_cert = bool(cert_file or cert_data)
    key_file, key_data = _file_or_data(user, "client-key", owner) if has_cert else (None, None)
    token, token_source = _token(user, owner)
    if user.get("exec") or user.get("auth-provider"):
        token_source, produced_cert, produced_key = _produced(cluster, user, owner)
        if produced_cert:
            cert_file, cert_data, key_file, key_data = produced_cert, None, produced_key, None
    return Credentials(
        host=host,
        ca_file=ca_file,
        ca_data=ca_data,
        cert_file=cert_file,
        cert_data=cert_data,
        key_file=key_file,
        key_data=key_data,
        token=token,
        token_source=token_source,
        username=_text(user.get("username")) or None,
        password=_text(user.get("password")) or None,
        verify=cluster.get("insecure-skip-tls-verify") is not True,
        tls_server_name=_text(cluster.get("tls-server-name")) or None,
    )


def _file_or_data(fields: Fields, key: str, owner: str) -> tuple[str | None, bytes | None]:
    """``key`` as a readable file, or ``key-data`` decoded from base64."""
    data, path = fields.get(f"{key}-data"), _text(fields.get(key))
    if data:
        try:
            return None, base64.b64decode(_text(data), validate=True)
        except binascii.Error:
            raise _Invalid(f"{key}-data of {owner} is not base64") from None
    if not path:
        return None, None
    try:
        with open(path, "rb"):
            return path, None
    except OSError as error:
        raise _Invalid(f"unable to read {key} {path} for {owner}: {error.strerror}") from None


def _token(user: Fields, owner: str) -> tuple[str | None, Callable[[], str] | None]:
    token = _text(user.get("token")) or None
    path = _text(user.get("tokenFile"))
    if not path:
        return token, None
    try:
        return None, _TokenFile(path, fallback=token)
    except OSError as error:
        reason = error.strerror or error
        raise _Invalid(f"unable to read tokenFile {path} for {owner}: {reason}") from None


class _TokenFile:
    """A token file read again at most every TOKEN_REREAD_SECONDS, so that a token rotated on
    disk (a projected service-account token, a CI token a helper renews) reaches a controller
    that runs for weeks. As with client-go, the file wins over an inline ``token``, which is
    used only while the file cannot be read, as is the last token read."""

    def __init__(self, path: str, fallback: str | None = None) -> None:
        self.path = path
        try:
            self._token = self._read()
        except OSError:
            if fallback is None:
                raise
            self._token = fallback
        self._read_at = time.monotonic()

    def __call__(self) -> str:
        if time.monotonic() - self._read_at >= TOKEN_REREAD_SECONDS:
            self._read_at = time.monotonic()
            with contextlib.suppress(OSError):
                self._token = self._read()
        return self._token

    def _read(self) -> str:
        with open(self.path, encoding="utf-8") as file:
            token = file.read().strip()
        if not token:
            raise OSError(f"{self.path} is empty")
        return token


def _produced(
    cluster: Fields, user: Fields, owner: str
) -> tuple[Callable[[], str] | None, str | None, str | None]:
    """A token source and client certificate files from an exec plugin or an auth-provider,
    through the ``kubernetes`` package: it runs the plugin again when its credential expires
    and refreshes gcp/oidc tokens. Only those fields are handed over; the static ones stay
    ours."""
    from kubernetes.client import Configuration
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.kube_config import KubeConfigLoader

    handed = {key: user[key] for key in ("exec", "auth-provider") if key in user}
    document = {
        "current-context": "accurate",
        "contexts": [{"name": "accurate", "context": {"cluster": "accurate", "user": "accurate"}}],
        "clusters": [{"name": "accurate", "cluster": cluster}],
        "users": [{"name": "accurate", "user": handed}],
    }
    configuration = Configuration()
    try:
        KubeConfigLoader(config_dict=document, config_base_path="").load_and_set(configuration)
    except (ConfigException, KeyError, ValueError, OSError) as error:
        raise _Invalid(f"{owner}: {error}") from None
    produced_token = "BearerToken" in configuration.api_key
    if not produced_token and not configuration.cert_file:
        raise _Invalid(f"{owner}: its exec plugin or auth-provider gave no credentials")
    source = _package_token(configuration) if produced_token else None
    return source, configuration.cert_file, configuration.key_file


def _package_token(configuration: Any) -> Callable[[], str]:
    """The package's current token, refreshed by its own hook, without its "Bearer " prefix."""

    def token() -> str:
        header = configuration.get_api_key_with_prefix("BearerToken") or ""
        return str(header).partition(" ")[2]

    return token


def _proxy(host: str, proxy_url: str, cluster_name: str) -> Proxy | None:
    """The proxy kubectl would go through; the rules are loaded only when a proxy is set."""
    if not proxy_url and not any(os.environ.get(name) for name in PROXY_VARIABLES):
        return None
    from libaccurate.network.proxies import choose_proxy

    return choose_proxy(host, proxy_url, cluster_name, os.environ)


def _in_cluster_possible() -> bool:
    """client-go's test: the service's address in the environment and a token file mounted."""
    return bool(
        os.environ.get("KUBERNETES_SERVICE_HOST")
        and os.environ.get("KUBERNETES_SERVICE_PORT")
        and os.path.isfile(os.path.join(SERVICE_ACCOUNT_DIR, "token"))
    )


def _in_cluster(options: ConnectionOptions) -> Credentials:
    """The pod's service account, through the ``kubernetes`` package (which reads its rotated
    token again every minute); as in kubectl, only --token and --certificate-authority apply."""
    from kubernetes.client import Configuration
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.incluster_config import InClusterConfigLoader

    configuration = Configuration()
    loader = InClusterConfigLoader(
        token_filename=os.path.join(SERVICE_ACCOUNT_DIR, "token"),
        cert_filename=os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt"),
    )
    try:
        loader.load_and_set(configuration)
    except ConfigException as error:
        raise KubeError(
            f"cannot use the service account in {SERVICE_ACCOUNT_DIR}: {error}"
        ) from None
    proxy = _proxy(configuration.host, "", "")
    return Credentials(
        host=configuration.host,
        ca_file=options.certificate_authority or configuration.ssl_ca_cert,
        token=options.token,
        token_source=None if options.token else _package_token(configuration),
        namespace=options.namespace or _pod_namespace(),
        proxy=proxy,
        compression=not options.disable_compression,
    )


def _pod_namespace() -> str:
    """The service account's namespace, where kubectl in a pod works by default."""
    try:
        with open(os.path.join(SERVICE_ACCOUNT_DIR, "namespace")) as file:
            return file.read().strip() or "default"
    except OSError:
        return "default"


def _text(value: Any) -> str:
    return "" if value is None else str(value)
