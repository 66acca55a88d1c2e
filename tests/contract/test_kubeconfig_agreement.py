"""libaccurate.network.kubeconfig picks what the ``kubernetes`` package's loader picks, over
generated kubeconfigs: several files merged, static users of every kind, file and data forms,
relative and absolute paths, several contexts, with and without kubectl's override flags.

The package knows no flags and differs from kubectl in a few places, so the reference here is
the package's KubeConfigLoader plus kubectl's rules where they differ (each marked "kubectl:"
below): the first file's ``current-context`` wins (the package takes the last); the flags
replace fields as client-go's overrides do; a token file wins over ``--token``; and kubectl
refuses some combinations the package accepts (a CA with insecure-skip-tls-verify, a token
with basic auth, a certificate without a key, names nothing defines). A refusal must be a
KubeError from our loader.
"""

from __future__ import annotations

import base64
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from kubernetes.client import Configuration
from kubernetes.config import kube_config

from libaccurate.network.kubeconfig import (
    ConnectionOptions,
    Credentials,
    KubeError,
    load_credentials,
)

CLUSTERS = ("c1", "c2", "c3")
USERS = ("u1", "u2", "u3")
CONTEXTS = ("x1", "x2", "x3")
MISSING = "nowhere"
# How a file is referenced: relative to the kubeconfig holding it, absolute, or inline data.
FORMS = st.sampled_from(["relative", "absolute", "data"])
WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)


@dataclass(frozen=True)
class Picked:
    """What a client ends up using, file contents rather than file names."""

    host: str
    ca: bytes | None
    cert: bytes | None
    key: bytes | None
    authorization: str | None
    verify: bool
    tls_server_name: str | None


class Layout:
    """The files of one example: kubeconfigs in folders of their own, and the files they
    reference, each with content naming it, so that a file found in the wrong place shows."""

    def __init__(self, root: Path, count: int) -> None:
        self.root = root
        self.folders = [root / f"d{index}" for index in range(count)]
        for folder in self.folders:
            folder.mkdir()

    def reference(self, index: int, owner: str, field: str, form: str) -> dict[str, str]:
        """The kubeconfig fields for one file reference (``field`` or ``field-data``)."""
        content = f"{index}/{owner}/{field}".encode()
        if form == "data":
            return {f"{field}-data": base64.b64encode(content).decode()}
        name = f"{owner}-{field}-{index}.pem"  # unique: a copy in every folder must not clash
        (self.folders[index] / name).write_bytes(content)
        if field in ("client-certificate", "client-key") and form == "relative":
            # The package resolves a user's certificate against the file of the *cluster*
            # (kubectl: the user's own file, which test_kube_adapter pins); the same content
            # in every folder keeps that difference out of this comparison.
            for folder in self.folders:
                (folder / name).write_bytes(content)
        return {field: name if form == "relative" else str(self.folders[index] / name)}

    def flag_file(self, name: str) -> str:
        path = self.root / name
        path.write_bytes(f"flag/{name}".encode())
        return str(path)


@st.composite
def clusters(draw: Any, layout: Layout, index: int) -> list[dict[str, Any]]:
    entries = []
    for name in draw(st.lists(st.sampled_from(CLUSTERS), min_size=1, unique=True)):
        cluster: dict[str, Any] = {"server": f"https://{name}-{index}.example:6443"}
        ca = draw(st.sampled_from([None, "relative", "absolute", "data"]))
        if ca:
            cluster.update(layout.reference(index, name, "certificate-authority", ca))
        if draw(st.booleans()):
            cluster["insecure-skip-tls-verify"] = bool(draw(rarely(True)))
        if draw(st.booleans()):
            cluster["tls-server-name"] = f"{name}-{index}.internal"
        entries.append({"name": name, "cluster": cluster})
    return entries


@st.composite
def users(draw: Any, layout: Layout, index: int) -> list[dict[str, Any]]:
    entries = []
    for name in draw(st.lists(st.sampled_from(USERS), unique=True)):
        user: dict[str, Any] = {}
        auth = draw(st.sampled_from(["none", "token", "tokenFile", "basic"]))
        if auth == "token":
            user["token"] = f"token-{index}-{draw(WORDS)}"
        elif auth == "tokenFile":
            form = draw(st.sampled_from(["relative", "absolute"]))
            user.update(layout.reference(index, name, "tokenFile", form))
        elif auth == "basic":
            user.update(username=f"{name}-{index}", password=draw(WORDS))
        if draw(st.booleans()):
            user.update(layout.reference(index, name, "client-certificate", draw(FORMS)))
            user.update(layout.reference(index, name, "client-key", draw(FORMS)))
        entries.append({"name": name, "user": user})
    return entries


def rarely(value: Any) -> st.SearchStrategy[Any]:
    """``value`` one time in ten, else nothing: for the choices kubectl refuses."""
    return st.sampled_from([*[None] * 9, value])


@st.composite
def named(draw: Any, names: list[str]) -> str:
    """A name some file defines, or, rarely, one none defines."""
    missing = draw(rarely(MISSING))
    return str(missing or draw(st.sampled_from(names)))


@st.composite
def kubeconfigs(draw: Any, layout: Layout) -> tuple[list[Path], dict[str, list[str]]]:
    """The files, and the names they define (clusters, users, contexts)."""
    documents: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": draw(clusters(layout, index)),
            "users": draw(users(layout, index)),
        }
        for index in range(len(layout.folders))
    ]
    defined = {
        section: [entry["name"] for document in documents for entry in document[section]]
        for section in ("clusters", "users")
    }
    for document in documents:
        document["contexts"] = [
            {
                "name": name,
                "context": {
                    "cluster": draw(named(defined["clusters"])),
                    **({"user": draw(named(defined["users"]))} if defined["users"] else {}),
                },
            }
            for name in draw(st.lists(st.sampled_from(CONTEXTS), min_size=1, unique=True))
        ]
    defined["contexts"] = [
        entry["name"] for document in documents for entry in document["contexts"]
    ]
    paths = []
    for document, folder in zip(documents, layout.folders, strict=True):
        if draw(st.sampled_from([True, True, False])):
            document["current-context"] = draw(named(defined["contexts"]))
        path = folder / "config"
        path.write_text(yaml.safe_dump(document))
        paths.append(path)
    return paths, defined


@st.composite
def flags(draw: Any, layout: Layout, defined: dict[str, list[str]]) -> ConnectionOptions:
    def maybe(section: str) -> str | None:
        return draw(st.one_of(st.none(), named(defined[section]))) if defined[section] else None

    pair = draw(st.sampled_from(["none", "none", "both", "cert", "key"]))
    return ConnectionOptions(
        context=maybe("contexts"),
        cluster=maybe("clusters"),
        user=maybe("users"),
        server=draw(st.sampled_from([None, "https://flag.example:443"])),
        token=draw(st.sampled_from([None, "flag-token"])),
        certificate_authority=layout.flag_file("ca.pem") if draw(st.booleans()) else None,
        client_certificate=layout.flag_file("cert.pem") if pair in ("both", "cert") else None,
        client_key=layout.flag_file("key.pem") if pair in ("both", "key") else None,
        insecure_skip_tls_verify=bool(draw(rarely(True))),
        tls_server_name=draw(st.sampled_from([None, "flag.internal"])),
    )


def ours(credentials: Credentials) -> Picked:
    return Picked(
        host=credentials.host,
        ca=_content(credentials.ca_file, credentials.ca_data),
        cert=_content(credentials.cert_file, credentials.cert_data),
        key=_content(credentials.key_file, credentials.key_data),
        authorization=credentials.authorization(),
        verify=credentials.verify,
        tls_server_name=credentials.tls_server_name,
    )


def _content(path: str | None, data: bytes | None) -> bytes | None:
    return data if data is not None else Path(path).read_bytes() if path else None


def the_package(paths: list[Path], options: ConnectionOptions) -> Picked | None:
    """The package's pick with kubectl's flag rules on top; None where kubectl refuses."""
    merger = kube_config.KubeConfigMerger(os.pathsep.join(str(p) for p in paths))
    document = merger.config.value
    entries = {
        section: {entry["name"]: entry.value[section[:-1]] for entry in document[section]}
        for section in ("clusters", "users", "contexts")
    }
    # kubectl: the first file that sets current-context wins.
    current = next(
        (c for p in paths if (c := yaml.safe_load(p.read_text()).get("current-context"))), ""
    )
    context_name = options.context or current
    if context_name and context_name not in entries["contexts"]:
        return None
    context = dict(entries["contexts"].get(context_name, {}))
    context.update({k: v for k, v in (("cluster", options.cluster), ("user", options.user)) if v})
    cluster_name, user_name = context.get("cluster", ""), context.get("user", "")
    # kubectl (and we) can talk to --server with no cluster entry at all; the package cannot.
    assume(cluster_name or not options.server)
    if cluster_name not in entries["clusters"]:
        return None
    if user_name and user_name not in entries["users"]:
        return None
    cluster, user = entries["clusters"][cluster_name], entries["users"].get(user_name, {})
    if _refused(cluster, user, options):
        return None
    document["contexts"].append({"name": "picked", "context": context})
    configuration = Configuration()
    loader = kube_config.KubeConfigLoader(merger.config, "picked", config_base_path=None)
    loader.load_and_set(configuration)
    return _with_flags(configuration, user, options)


def _refused(cluster: dict[str, Any], user: dict[str, Any], options: ConnectionOptions) -> bool:
    ca_flag = options.certificate_authority or options.insecure_skip_tls_verify
    has_ca = options.certificate_authority if ca_flag else _has(cluster, "certificate-authority")
    insecure = (
        options.insecure_skip_tls_verify if ca_flag else cluster.get("insecure-skip-tls-verify")
    )
    has_token = options.token or user.get("token") or user.get("tokenFile")
    has_cert = options.client_certificate or _has(user, "client-certificate")
    has_key = options.client_key or _has(user, "client-key")
    return bool(
        (has_ca and insecure is True)
        or (has_token and user.get("username"))
        or (has_cert and not has_key)
    )


def _has(fields: dict[str, Any], key: str) -> bool:
    return bool(fields.get(key) or fields.get(f"{key}-data"))


def _with_flags(configuration: Any, user: dict[str, Any], options: ConnectionOptions) -> Picked:
    authorization = configuration.api_key.get("BearerToken")
    if options.token and not user.get("tokenFile"):  # kubectl: the token file wins
        authorization = f"Bearer {options.token}"
    ca_flag = options.certificate_authority or options.insecure_skip_tls_verify
    cert = options.client_certificate or configuration.cert_file
    key = options.client_key or configuration.key_file
    tls_flag = options.server or options.tls_server_name
    return Picked(
        host=(options.server or configuration.host).rstrip("/"),
        ca=_content(options.certificate_authority if ca_flag else configuration.ssl_ca_cert, None),
        cert=_content(cert, None),
        key=_content(key, None) if cert else None,
        authorization=authorization,
        verify=not options.insecure_skip_tls_verify if ca_flag else configuration.verify_ssl,
        tls_server_name=options.tls_server_name if tls_flag else configuration.tls_server_name,
    )


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_our_loader_picks_what_the_kubernetes_package_picks(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        layout = Layout(Path(folder), data.draw(st.integers(1, 3)))
        paths, defined = data.draw(kubeconfigs(layout))
        options = data.draw(flags(layout, defined))
        patch.setenv("KUBECONFIG", os.pathsep.join(str(path) for path in paths))
        expected = the_package(paths, options)
        if expected is None:
            with pytest.raises(KubeError, match="invalid kubeconfig"):
                load_credentials(options)
        else:
            assert ours(load_credentials(options)) == expected
