"""A test's kubeconfig with its cluster reached another way: at another address (a slow link in
front of it), under a name only a proxy knows, or through a proxy (``proxy-url``), so that the
same tests and benchmarks run against the in-memory server and a real cluster alike.

The copy keeps checking the server's certificate for the name the original used
(``tls-server-name``), and its file paths stay valid wherever it is written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

# Fields of a kubeconfig entry that name files, relative to the file holding it.
_PATH_FIELDS = ("certificate-authority", "client-certificate", "client-key", "tokenFile")


def current_cluster(kubeconfig: Path) -> dict[str, Any]:
    """The cluster entry the current context names."""
    return _cluster_entry(_load(kubeconfig))["cluster"]


def server_address(kubeconfig: Path) -> tuple[str, int]:
    """Where the current cluster's API server listens: its host and port."""
    parts = urlsplit(current_cluster(kubeconfig)["server"])
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def rerouted(kubeconfig: Path, out: Path, server: str | None = None, **fields: Any) -> Path:
    """A copy of ``kubeconfig`` at ``out`` whose current cluster is reached at ``server`` when
    given, with each of ``fields`` set in the cluster entry (by its kubeconfig name with ``_``
    for ``-``; None removes it)."""
    document = _load(kubeconfig)
    base = kubeconfig.resolve().parent
    for section in ("clusters", "users"):
        for entry in document.get(section) or []:
            body = entry.get(section[:-1]) or {}
            for key in _PATH_FIELDS:
                if body.get(key):
                    body[key] = os.path.join(base, body[key])
    cluster = _cluster_entry(document)["cluster"]
    if server is not None:
        cluster.setdefault("tls-server-name", urlsplit(cluster["server"]).hostname)
        cluster["server"] = server
    for name, value in fields.items():
        key = name.replace("_", "-")
        if value is None:
            cluster.pop(key, None)
        else:
            cluster[key] = value
    out.write_text(yaml.safe_dump(document, sort_keys=False))
    out.chmod(0o600)
    return out


def _load(kubeconfig: Path) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(kubeconfig.read_text())
    return document


def _cluster_entry(document: dict[str, Any]) -> dict[str, Any]:
    context_name = document["current-context"]
    context = next(c for c in document["contexts"] if c["name"] == context_name)["context"]
    entry: dict[str, Any] = next(c for c in document["clusters"] if c["name"] == context["cluster"])
    return entry
