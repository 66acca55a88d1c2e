"""The webhook server's TLS key pair: read from --cert-dir, and read again when it changes.

cert-manager renews the serving certificate long before it expires and kubelet swaps the mounted
Secret files atomically, so the server must pick up the new pair without a restart. Every new
connection asks for the current context; a stat of the two files tells whether they changed
since the last load, which costs far less than the TLS handshake that follows.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from pathlib import Path

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"

# What identifies one version of a file: a rename (kubelet, cert-manager) changes the inode, an
# in-place rewrite the size or modification time.
_Signature = tuple[tuple[int, int, int, int], ...]

log = logging.getLogger(__name__)


class CertificateError(Exception):
    """The key pair cannot be used; the message names the files and the reason."""


class ServingCertificate:
    """The key pair in a directory, as an ``ssl.SSLContext`` for new server connections."""

    def __init__(self, cert_dir: Path) -> None:
        self.cert_file = cert_dir / CERT_FILE
        self.key_file = cert_dir / KEY_FILE
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        self._loaded: _Signature | None = None
        self._rejected: _Signature | None = None

    def load(self) -> None:
        """Load the pair now; raises CertificateError, because without one at startup there is
        nothing to serve with."""
        with self._lock:
            signature = self._signature()
            self._context = self._read()
            self._loaded = signature

    def context(self) -> ssl.SSLContext:
        """The context for a new connection: the pair on disk, or the last good one while the
        files cannot be used (half-way through a rotation, say: a new certificate next to the
        old key). Each unusable version is reported once and tried again when it changes."""
        with self._lock:
            if self._context is None:
                raise CertificateError("the serving certificate was never loaded")
            signature = self._signature()
            if signature is not None and signature not in (self._loaded, self._rejected):
                self._reload(signature)
            return self._context

    def _reload(self, signature: _Signature) -> None:
        try:
            self._context = self._read()
        except CertificateError as error:
            self._rejected = signature
            log.warning("keeping the previous serving certificate: %s", error)
            return
        self._loaded = signature
        log.info("loaded a new serving certificate from %s", self.cert_file)

    def _signature(self) -> _Signature | None:
        """None while a file is missing, which happens for a moment during some rotations."""
        try:
            stats = [os.stat(path) for path in (self.cert_file, self.key_file)]
        except OSError:
            return None
        return tuple((s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns) for s in stats)

    def _read(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
        except OSError as error:  # ssl.SSLError is an OSError too
            reason = error.strerror or error
            raise CertificateError(
                f"cannot load the webhook serving certificate {self.cert_file} with key "
                f"{self.key_file}: {reason}"
            ) from error
        return context
