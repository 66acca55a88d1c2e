"""The kubeconfig clients use to reach a test server: its CA, its URL and a user's token."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

CONTEXT = "accurate-test"


def kubeconfig(
    url: str, ca_pem: bytes, token: str, user: str = "admin", namespace: str = "default"
) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CONTEXT,
                "cluster": {
                    "server": url,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": user, "namespace": namespace},
            }
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }


def write_kubeconfig(path: Path, url: str, ca_pem: bytes, token: str, user: str = "admin") -> Path:
    path.write_text(yaml.safe_dump(kubeconfig(url, ca_pem, token, user), sort_keys=False))
    path.chmod(0o600)
    return path
