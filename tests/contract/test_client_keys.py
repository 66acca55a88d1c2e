"""A client certificate and key given as data in a kubeconfig (``client-certificate-data``,
``client-key-data``, as kind, kubeadm and the cloud CLIs write them) authenticate as well as
files do, and the key never lies on a disk where another user, or a later crash, could find it
(issue 30): on Linux it passes to the ssl module through an anonymous memory file; elsewhere
through a file only its owner may read, in a private folder, removed once loaded, error or not.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml

from libaccurate.network import kube
from libaccurate.network.kube import ConnectionOptions, Kube, KubeError
from libaccurate.network.kubeconfig import Credentials

HAS_MEMORY_FILES = hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")


class Observed(ssl.SSLContext):
    """A real context that notes, while loading, what it was given to read."""

    seen: list[tuple[str, os.stat_result, os.stat_result]]

    def load_cert_chain(self, certfile: Any, keyfile: Any = None, password: Any = None) -> None:
        self.seen = [
            (path, os.stat(path), os.stat(os.path.dirname(path)))
            for path in (certfile, keyfile)
            if path
        ]
        super().load_cert_chain(certfile, keyfile, password)


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder ``tempfile`` uses, empty, so that whatever is left in it shows."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture
def mutual_tls(ca: trustme.CA) -> Iterator[str]:
    """An HTTPS server that requires a client certificate from ``ca`` and answers every request
    with the common name it saw; its URL."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
                connection = context.wrap_socket(raw, server_side=True)
            except (OSError, ssl.SSLError):
                continue
            with connection:
                connection.recv(65536)
                seen: Any = connection.getpeercert()
                subject = dict(pair[0] for pair in seen["subject"])
                body = json.dumps({"commonName": subject["commonName"]}).encode()
                head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                connection.sendall(f"{head}{len(body)}\r\n\r\n".encode() + body)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    listener.close()
    thread.join(5)


def kubeconfig(folder: Path, server: str, ca: trustme.CA, form: str) -> Path:
    """A kubeconfig for ``server`` whose user is the client ``tenant-a`` of ``ca``, with the CA,
    certificate and key as files or as data."""
    issued = ca.issue_cert("tenant-a", common_name="tenant-a")
    blobs = {
        "certificate-authority": ca.cert_pem.bytes(),
        "client-certificate": issued.cert_chain_pems[0].bytes(),
        "client-key": issued.private_key_pem.bytes(),
    }
    fields: dict[str, str] = {}
    for key, blob in blobs.items():
        if form == "data":
            fields[f"{key}-data"] = base64.b64encode(blob).decode()
        else:
            (folder / key).write_bytes(blob)
            fields[key] = str(folder / key)
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **_only(fields, "certificate")}}],
        "users": [{"name": "u", "user": _only(fields, "client")}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(document))
    return path


def _only(fields: dict[str, str], prefix: str) -> dict[str, str]:
    return {key: value for key, value in fields.items() if key.startswith(prefix)}


def client_pair(ca: trustme.CA) -> Credentials:
    issued = ca.issue_cert("tenant-a")
    return Credentials(
        host="https://127.0.0.1:1",
        cert_data=issued.cert_chain_pems[0].bytes(),
        key_data=issued.private_key_pem.bytes(),
    )


@pytest.mark.parametrize("form", ["files", "data"])
def test_a_client_certificate_authenticates_in_either_form_and_leaves_no_file(
    form: str, ca: trustme.CA, mutual_tls: str, tmp_path: Path, temporary: Path
) -> None:
    client = Kube.connect(
        ConnectionOptions(kubeconfig=str(kubeconfig(tmp_path, mutual_tls, ca, form)))
    )
    assert client.get("/version") == {"commonName": "tenant-a"}
    assert list(temporary.iterdir()) == []


@pytest.mark.skipif(not HAS_MEMORY_FILES, reason="no memory files (memfd) on this system")
def test_a_key_given_as_data_is_read_from_memory_on_linux(ca: trustme.CA, temporary: Path) -> None:
    context = Observed(ssl.PROTOCOL_TLS_CLIENT)
    kube._load_client_certificate(context, client_pair(ca))
    assert [path.startswith("/proc/self/fd/") for path, _, _ in context.seen] == [True, True]
    assert list(temporary.iterdir()) == []


@pytest.mark.skipif(not HAS_MEMORY_FILES, reason="no memory files (memfd) on this system")
def test_a_process_killed_while_loading_a_key_leaves_no_copy_of_it(
    ca: trustme.CA, tmp_path: Path
) -> None:
    """The crash case: SIGKILL runs no clean-up, so only a key that never had a path is safe."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    pair = client_pair(ca)
    killed_while_loading = f"""
import os, signal, ssl
from libaccurate.network import kube
from libaccurate.network.kubeconfig import Credentials

class Killed(ssl.SSLContext):
    def load_cert_chain(self, certfile, keyfile=None, password=None):
        super().load_cert_chain(certfile, keyfile, password)
        os.kill(os.getpid(), signal.SIGKILL)

pair = Credentials("https://127.0.0.1:1", cert_data={pair.cert_data!r}, key_data={pair.key_data!r})
kube._load_client_certificate(Killed(ssl.PROTOCOL_TLS_CLIENT), pair)
"""
    result = subprocess.run(
        [sys.executable, "-c", killed_while_loading],
        env={**os.environ, "TMPDIR": str(folder)},
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert list(folder.iterdir()) == []


def test_without_memory_files_the_key_is_a_private_file_removed_once_loaded(
    ca: trustme.CA, temporary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on macOS and Windows, which have no memfd."""
    monkeypatch.delattr(os, "memfd_create", raising=False)
    context = Observed(ssl.PROTOCOL_TLS_CLIENT)
    kube._load_client_certificate(context, client_pair(ca))
    assert len(context.seen) == 2
    for path, file, folder in context.seen:
        assert os.path.dirname(os.path.dirname(path)) == str(temporary)
        assert stat.S_IMODE(file.st_mode) == 0o600 and file.st_uid == os.getuid()
        assert stat.S_IMODE(folder.st_mode) == 0o700 and folder.st_uid == os.getuid()
    assert list(temporary.iterdir()) == []


def test_without_memory_files_a_key_that_does_not_load_is_removed_too(
    ca: trustme.CA, temporary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "memfd_create", raising=False)
    mismatched = client_pair(ca)._replace(key_data=trustme.CA().private_key_pem.bytes())
    with pytest.raises(KubeError, match="cannot use the TLS settings"):
        kube._ssl_context(mismatched)
    assert list(temporary.iterdir()) == []
