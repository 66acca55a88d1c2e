"""libaccurate.network.kubeconfig: the endpoint and credentials kubectl would use, shown by
connecting.

Where kubectl and the ``kubernetes`` package differ (test_kubeconfig_agreement compares the two
everywhere else), these tests pin kubectl's behaviour: the first current-context wins, a user's
relative paths follow the user's own file, a token file is read again, nothing is sent over
plain http. Servers are the test cluster (skipped where its kubeconfig has no static token, as
a real cluster may not) or small local ones that report what reached them.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trustme
import yaml

from accurate_testbed.processes import free_port
from libaccurate.network import kubeconfig as loader
from libaccurate.network.kube import ApiError, ConnectionOptions, Kube, KubeError
from libaccurate.network.kubeconfig import load_credentials

NAMESPACE = "/api/v1/namespaces/default"
EXEC_API = "client.authentication.k8s.io/v1"


@dataclass(frozen=True)
class Static:
    """The test cluster's address, CA and admin token."""

    server: str
    ca_pem: bytes
    token: str

    @property
    def cluster(self) -> dict[str, str]:
        ca = base64.b64encode(self.ca_pem).decode()
        return {"server": self.server, "certificate-authority-data": ca}


def static_parts(kubeconfig: Path) -> Static:
    """Skips when the kubeconfig's user has no token (a real cluster reached otherwise)."""
    document = yaml.safe_load(kubeconfig.read_text())
    context = _named(document["contexts"], document["current-context"])["context"]
    cluster = _named(document["clusters"], context["cluster"])["cluster"]
    user = _named(document["users"], context["user"])["user"]
    if not user.get("token") or not cluster.get("certificate-authority-data"):
        pytest.skip("the test cluster's kubeconfig has no token and CA data to reuse")
    ca = base64.b64decode(cluster["certificate-authority-data"])
    return Static(cluster["server"], ca, user["token"])


def _named(entries: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(entry for entry in entries if entry["name"] == name)


def write(
    path: Path,
    *,
    clusters: dict[str, dict[str, Any]] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
    contexts: dict[str, tuple[str, str]] | None = None,
    current: str | None = None,
) -> Path:
    """A kubeconfig file; each context is (cluster, user)."""
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in (clusters or {}).items()],
        "users": [{"name": n, "user": u} for n, u in (users or {}).items()],
        "contexts": [
            {"name": n, "context": {"cluster": c, "user": u}}
            for n, (c, u) in (contexts or {}).items()
        ],
    }
    if current:
        document["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def one_context(path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> Path:
    return write(
        path, clusters={"c": cluster}, users={"u": user}, contexts={"x": ("c", "u")}, current="x"
    )


def reaches_the_cluster(options: ConnectionOptions) -> bool:
    return Kube.connect(options).get(NAMESPACE)["metadata"]["name"] == "default"


# Merging and paths


def test_the_first_file_to_set_a_current_context_wins(
    kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    static = static_parts(kubeconfig)
    unreachable = {"server": f"https://127.0.0.1:{free_port()}"}
    other = one_context(tmp_path / "other", unreachable, {"token": static.token})
    monkeypatch.setenv("KUBECONFIG", f"{kubeconfig}:{other}")
    assert reaches_the_cluster(ConnectionOptions())
    monkeypatch.setenv("KUBECONFIG", f"{other}:{kubeconfig}")
    with pytest.raises(KubeError, match="cannot reach the API server"):
        reaches_the_cluster(ConnectionOptions())


def test_relative_paths_follow_the_file_that_holds_the_entry(
    kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CA is next to the clusters' file and the token next to the users' file; the
    current directory is neither."""
    static = static_parts(kubeconfig)
    clusters, users = tmp_path / "clusters", tmp_path / "users"
    users_file = write(
        users / "config",
        users={"me": {"tokenFile": "secrets/token"}},
        contexts={"here": ("there", "me")},
        current="here",
    )
    clusters_file = write(
        clusters / "config",
        clusters={"there": {"server": static.server, "certificate-authority": "pki/ca.crt"}},
    )
    (users / "secrets").mkdir()
    (users / "secrets" / "token").write_text(static.token + "\n")
    (clusters / "pki").mkdir()
    (clusters / "pki" / "ca.crt").write_bytes(static.ca_pem)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    monkeypatch.setenv("KUBECONFIG", f"{users_file}:{clusters_file}")
    assert reaches_the_cluster(ConnectionOptions())


def test_the_kubeconfig_flag_is_read_alone(
    kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken"
    broken.write_text("clusters: [\n")
    monkeypatch.setenv("KUBECONFIG", str(broken))
    with pytest.raises(KubeError, match=re.escape(f"invalid kubeconfig {broken}: ")):
        load_credentials(ConnectionOptions())
    assert reaches_the_cluster(ConnectionOptions(kubeconfig=str(kubeconfig)))


# Tokens


def test_a_token_file_is_read_again_and_wins_over_an_inline_token(
    kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    static = static_parts(kubeconfig)
    token = tmp_path / "token"
    token.write_text(static.token)
    config = one_context(
        tmp_path / "config", static.cluster, {"tokenFile": str(token), "token": "old"}
    )
    monkeypatch.setattr(loader, "TOKEN_REREAD_SECONDS", 0.0)
    kube = Kube.connect(ConnectionOptions(kubeconfig=str(config), token="flag"))
    assert kube.get(NAMESPACE)["metadata"]["name"] == "default"
    token.write_text("rotated-away")
    with pytest.raises(ApiError) as caught:
        kube.get(NAMESPACE)
    assert caught.value.code == 401
    token.write_text(static.token)
    assert kube.get(NAMESPACE)["metadata"]["name"] == "default"


@pytest.mark.parametrize(
    ("user", "secrets"),
    [
        (
            {
                "token": "s3cr3t-token",
                "client-certificate-data": base64.b64encode(b"CERT").decode(),
                "client-key-data": base64.b64encode(b"s3cr3t-key").decode(),
            },
            ("s3cr3t-token", "s3cr3t-key"),
        ),
        ({"username": "alice", "password": "s3cr3t-password"}, ("s3cr3t-password",)),
    ],
)
def test_credentials_never_show_their_secrets(
    tmp_path: Path, user: dict[str, str], secrets: tuple[str, ...]
) -> None:
    config = one_context(tmp_path / "config", {"server": "https://127.0.0.1:6443"}, user)
    credentials = load_credentials(ConnectionOptions(kubeconfig=str(config)))
    shown = repr(credentials)
    assert shown.startswith("Credentials(host='https://127.0.0.1:6443'")
    assert "user_entry='u'" in shown
    assert [secret for secret in secrets if secret in shown] == []


# TLS, client certificates and plain http


@dataclass
class Seen:
    """What reached a local server: the client certificate's common name and the header."""

    common_name: str | None = None
    authorization: str | None = None


@pytest.fixture
def whoami() -> Iterator[Callable[..., tuple[str, Seen]]]:
    """Starts local servers that record what each request showed; https ones ask for a client
    certificate (optional) signed by the returned CA."""
    servers: list[ThreadingHTTPServer] = []

    def start(ca: trustme.CA | None = None, identity: str = "127.0.0.1") -> tuple[str, Seen]:
        seen = Seen()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                certificate = getattr(self.connection, "getpeercert", lambda: None)()
                subject = dict(part[0] for part in (certificate or {}).get("subject", ()))
                seen.common_name = subject.get("commonName")
                seen.authorization = self.headers.get("Authorization")
                body = b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if ca is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ca.issue_cert(identity).configure_cert(context)
            ca.configure_trust(context)
            context.verify_mode = ssl.CERT_OPTIONAL
            server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        scheme = "https" if ca else "http"
        return f"{scheme}://127.0.0.1:{server.server_port}", seen

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _pem_data(pem: bytes) -> str:
    return base64.b64encode(pem).decode()


@pytest.mark.parametrize("form", ["relative files", "data", "flags"])
def test_client_certificates_reach_the_server(
    form: str, whoami: Callable[..., tuple[str, Seen]], tmp_path: Path
) -> None:
    ca = trustme.CA()
    url, seen = whoami(ca)
    alice = ca.issue_cert("alice.example", common_name="alice")
    cert, key = alice.cert_chain_pems[0].bytes(), alice.private_key_pem.bytes()
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "alice.crt").write_bytes(cert)
    (tmp_path / "pki" / "alice.key").write_bytes(key)
    user: dict[str, str] = {
        "relative files": {"client-certificate": "pki/alice.crt", "client-key": "pki/alice.key"},
        "data": {"client-certificate-data": _pem_data(cert), "client-key-data": _pem_data(key)},
        "flags": {},
    }[form]
    cluster = {"server": url, "certificate-authority-data": _pem_data(ca.cert_pem.bytes())}
    config = one_context(tmp_path / "config", cluster, user)
    options = ConnectionOptions(kubeconfig=str(config))
    if form == "flags":
        options = options._replace(
            client_certificate=str(tmp_path / "pki" / "alice.crt"),
            client_key=str(tmp_path / "pki" / "alice.key"),
        )
    Kube.connect(options).get("/")
    assert seen.common_name == "alice"


@pytest.mark.parametrize(
    ("cluster", "reached"),
    [
        ({"tls-server-name": "api.internal"}, True),
        ({}, False),
        ({"insecure-skip-tls-verify": True, "with-ca": False}, True),
    ],
    ids=["tls-server-name", "wrong name", "insecure"],
)
def test_the_server_certificate_is_checked_against_the_right_name(
    cluster: dict[str, Any],
    reached: bool,
    whoami: Callable[..., tuple[str, Seen]],
    tmp_path: Path,
) -> None:
    ca = trustme.CA()
    url, _ = whoami(ca, identity="api.internal")
    fields = {"server": url, **{k: v for k, v in cluster.items() if k != "with-ca"}}
    if cluster.get("with-ca", True):
        fields["certificate-authority-data"] = _pem_data(ca.cert_pem.bytes())
    kube = Kube.connect(ConnectionOptions(kubeconfig=str(one_context(tmp_path / "c", fields, {}))))
    if reached:
        assert kube.get("/") == {}
    else:
        with pytest.raises(KubeError, match="cannot reach the API server"):
            kube.get("/")


def test_no_credentials_go_to_a_plain_http_server(
    whoami: Callable[..., tuple[str, Seen]], tmp_path: Path
) -> None:
    url, seen = whoami()
    config = str(one_context(tmp_path / "config", {"server": url}, {"token": "secret"}))
    Kube.connect(ConnectionOptions(kubeconfig=config, token="flag")).get("/")
    assert seen.authorization is None
    https, seen_over_tls = whoami(trustme.CA())
    over_tls = ConnectionOptions(
        kubeconfig=config, server=https, token="flag", insecure_skip_tls_verify=True
    )
    Kube.connect(over_tls).get("/")
    assert seen_over_tls.authorization == "Bearer flag"


def test_a_server_without_a_scheme_is_reached_as_kubectl_reaches_it(
    whoami: Callable[..., tuple[str, Seen]], tmp_path: Path
) -> None:
    """client-go puts https before a bare host:port when TLS is set up, http otherwise."""
    ca = trustme.CA()
    https, seen = whoami(ca)
    bare = {
        "server": urlsplit(https).netloc,
        "certificate-authority-data": _pem_data(ca.cert_pem.bytes()),
    }
    config = str(one_context(tmp_path / "tls", bare, {"token": "secret"}))
    assert Kube.connect(ConnectionOptions(kubeconfig=config)).get("/") == {}
    assert seen.authorization == "Bearer secret"
    http, _ = whoami()
    plain = str(one_context(tmp_path / "plain", {"server": urlsplit(http).netloc}, {}))
    assert Kube.connect(ConnectionOptions(kubeconfig=plain)).get("/") == {}


# What kubectl refuses, and what is wrong in a file


def _edit(section: str, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def edit(document: dict[str, Any]) -> None:
        document[section][0][section[:-1]].update(fields)

    return edit


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda document: document.update({key: value})


def _keep(document: dict[str, Any]) -> None:
    """The kubeconfig as written: the flags are what is wrong."""


REFUSALS: list[tuple[str, Callable[[dict[str, Any]], None], dict[str, Any], str]] = [
    ("missing --context", _keep, {"context": "nope"}, 'context "nope" does not exist'),
    (
        "missing current-context",
        _set("current-context", "nope"),
        {},
        "context was not found for specified context: nope",
    ),
    (
        "no current-context",
        _set("current-context", ""),
        {},
        "no current-context: pass --context, --cluster or --server",
    ),
    (
        "context's cluster",
        _edit("contexts", cluster="gone"),
        {},
        'cluster "gone" was not found for context "x"',
    ),
    (
        "context's user",
        _edit("contexts", user="gone"),
        {},
        'user "gone" was not found for context "x"',
    ),
    ("missing --cluster", _keep, {"cluster": "gone"}, 'cluster "gone" does not exist'),
    ("missing --user", _keep, {"user": "gone"}, 'auth info "gone" does not exist'),
    ("no server", _edit("clusters", server=""), {}, 'no server found for cluster "c"'),
    (
        "insecure with a CA",
        _edit("clusters", **{"insecure-skip-tls-verify": True}),
        {},
        'cluster "c": specifying a root certificates file with the insecure flag is not allowed',
    ),
    (
        "both CA forms",
        _edit("clusters", **{"certificate-authority": "/ca.crt"}),
        {},
        'cluster "c" has both certificate-authority and certificate-authority-data; keep one',
    ),
    (
        "CA not base64",
        _edit("clusters", **{"certificate-authority-data": "not base64!"}),
        {},
        'certificate-authority-data of cluster "c" is not base64',
    ),
    (
        "token and basic auth",
        _edit("users", username="u", password="p"),
        {},
        "more than one authentication method found for u; found [token basicAuth], "
        "only one is allowed",
    ),
    (
        "certificate, no key",
        _edit("users", **{"client-certificate-data": "Y2VydA=="}),
        {},
        'user "u" has a client certificate but no client-key or client-key-data',
    ),
    (
        "missing token file",
        _edit("users", tokenFile="/nonexistent/token", token=None),
        {},
        'unable to read tokenFile /nonexistent/token for user "u": No such file or directory',
    ),
]


@pytest.mark.parametrize(
    ("edit", "flags", "message"),
    [case[1:] for case in REFUSALS],
    ids=[case[0] for case in REFUSALS],
)
def test_what_kubectl_refuses_is_an_error_naming_the_file(
    edit: Callable[[dict[str, Any]], None], flags: dict[str, Any], message: str, tmp_path: Path
) -> None:
    ca = _pem_data(b"-----BEGIN CERTIFICATE-----\n")
    path = one_context(
        tmp_path / "config",
        {"server": "https://127.0.0.1:1", "certificate-authority-data": ca},
        {"token": "t"},
    )
    document = yaml.safe_load(path.read_text())
    edit(document)
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(KubeError) as caught:
        load_credentials(ConnectionOptions(kubeconfig=str(path), **flags))
    assert str(caught.value) == f"invalid kubeconfig ({path}): {message}"


def test_the_insecure_flag_replaces_the_files_ca_but_not_a_ca_flag(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"pem")
    cluster = {"server": "https://127.0.0.1:1", "certificate-authority": str(ca)}
    path = one_context(tmp_path / "config", cluster, {})
    insecure = load_credentials(
        ConnectionOptions(kubeconfig=str(path), insecure_skip_tls_verify=True)
    )
    assert (insecure.verify, insecure.ca_file) == (False, None)
    both = ConnectionOptions(
        kubeconfig=str(path), insecure_skip_tls_verify=True, certificate_authority=str(ca)
    )
    with pytest.raises(KubeError, match="with the insecure flag is not allowed"):
        load_credentials(both)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("clusters: [\n", "invalid kubeconfig {path}: while parsing"),
        ("- a list\n", "invalid kubeconfig {path}: expected a mapping"),
        ("clusters: {a: 1}\n", "invalid kubeconfig {path}: clusters must be a list"),
        ("users: [{user: {}}]\n", "invalid kubeconfig {path}: an entry of users has no name"),
        (
            "contexts: [{name: x}, {name: x}]\n",
            'invalid kubeconfig {path}: context "x" is listed twice',
        ),
    ],
)
def test_a_broken_file_is_named_with_what_is_wrong(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(KubeError) as caught:
        load_credentials(ConnectionOptions(kubeconfig=str(path)))
    assert str(caught.value).startswith(message.format(path=path))


# What the kubernetes package is handed: exec plugins, auth providers, the service account


PLUGIN = """#!{python}
import datetime, json, sys
with open({runs!r}, "a") as log:
    log.write("run\\n")
if {exit_code}:
    sys.exit("no login: run sso-login first")
expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta({expires_in})
status = {{"token": {token!r}, "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}}
print(json.dumps({{"apiVersion": {api!r}, "kind": "ExecCredential", "status": status}}))
"""


def exec_plugin(folder: Path, token: str, expires_in: str, exit_code: int = 0) -> Path:
    """A plugin printing an ExecCredential and counting its runs in the file it returns."""
    runs = folder / "runs"
    plugin = folder / "bin" / "token-plugin"
    plugin.parent.mkdir(parents=True)
    plugin.write_text(
        PLUGIN.format(
            python=sys.executable,
            runs=str(runs),
            exit_code=exit_code,
            expires_in=expires_in,
            token=token,
            api=EXEC_API,
        )
    )
    plugin.chmod(0o755)
    return runs


def exec_user() -> dict[str, Any]:
    """The plugin by a path relative to the kubeconfig, as kubectl resolves it."""
    return {
        "exec": {
            "apiVersion": EXEC_API,
            "command": "./bin/token-plugin",
            "interactiveMode": "Never",
        }
    }


@pytest.mark.parametrize(("expires_in", "more_runs"), [("hours=1", 0), ("minutes=1", 2)])
def test_an_exec_plugin_gives_the_token_and_runs_again_once_it_expires(
    expires_in: str,
    more_runs: int,
    kubeconfig: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A credential that expires within minutes counts as expired (the package's margin)."""
    static = static_parts(kubeconfig)
    runs = exec_plugin(tmp_path, static.token, expires_in)
    config = one_context(tmp_path / "config", static.cluster, exec_user())
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    kube = Kube.connect(ConnectionOptions(kubeconfig=str(config)))
    loaded = runs.read_text().count("run")
    for _ in range(2):
        assert kube.get(NAMESPACE)["metadata"]["name"] == "default"
    assert runs.read_text().count("run") == loaded + more_runs


def test_a_failing_exec_plugin_is_an_error_naming_the_user(tmp_path: Path) -> None:
    exec_plugin(tmp_path, "unused", "hours=1", exit_code=1)
    config = one_context(tmp_path / "config", {"server": "https://127.0.0.1:1"}, exec_user())
    with pytest.raises(KubeError, match='user "u": its exec plugin or auth-provider gave no'):
        load_credentials(ConnectionOptions(kubeconfig=str(config)))


def test_an_oidc_auth_provider_token_is_sent(tmp_path: Path) -> None:
    claims = base64.urlsafe_b64encode(json.dumps({"exp": 4102444800}).encode()).rstrip(b"=")
    id_token = f"e30.{claims.decode()}.c2ln"
    provider = {"name": "oidc", "config": {"id-token": id_token, "idp-issuer-url": "https://idp"}}
    config = one_context(
        tmp_path / "config", {"server": "https://127.0.0.1:1"}, {"auth-provider": provider}
    )
    credentials = load_credentials(ConnectionOptions(kubeconfig=str(config)))
    assert credentials.authorization() == f"Bearer {id_token}"


def test_a_pod_uses_its_service_account(
    kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service account folder is moved, the only thing a test outside a pod cannot have."""
    static = static_parts(kubeconfig)
    account = tmp_path / "serviceaccount"
    account.mkdir()
    address = urlsplit(static.server)
    monkeypatch.setattr(loader, "SERVICE_ACCOUNT_DIR", str(account))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", str(address.hostname))
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(address.port or 443))
    with pytest.raises(KubeError, match=r"no kubeconfig found .* not running in a cluster"):
        load_credentials(ConnectionOptions())
    (account / "token").write_text(static.token)
    (account / "ca.crt").write_bytes(static.ca_pem)
    assert reaches_the_cluster(ConnectionOptions())
    with pytest.raises(ApiError) as caught:
        reaches_the_cluster(ConnectionOptions(token="wrong"))
    assert caught.value.code == 401
