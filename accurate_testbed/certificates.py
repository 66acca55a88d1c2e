"""Serving certificates for webhook servers on the loopback addresses, from a test CA."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import trustme


def write_serving_pair(ca: trustme.CA, cert_dir: Path) -> None:
    """Issue a serving certificate for the loopback addresses (IPv4 and IPv6) and swap it in
    atomically, as kubelet does."""
    issued = ca.issue_cert("127.0.0.1", "::1")
    cert_dir.mkdir(parents=True, exist_ok=True)
    pem = b"".join(blob.bytes() for blob in issued.cert_chain_pems)
    for name, data in (("tls.crt", pem), ("tls.key", issued.private_key_pem.bytes())):
        staged = cert_dir / f".{name}.new"
        staged.write_bytes(data)
        os.replace(staged, cert_dir / name)


def ca_bundle(ca: trustme.CA) -> str:
    return base64.b64encode(ca.cert_pem.bytes()).decode()
