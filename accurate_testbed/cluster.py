"""The cluster a test talks to: the in-memory API server, or a real one named by
ACCURATE_TEST_KUBECONFIG, and what the test must clean up there."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client as k8s_client

from accurate_testbed.apiserver.server import ApiServer

REAL_KUBECONFIG_ENV = "ACCURATE_TEST_KUBECONFIG"


def real_kubeconfig() -> Path | None:
    value = os.environ.get(REAL_KUBECONFIG_ENV)
    return Path(value) if value else None


@dataclass
class Cluster:
    """The API a test talks to. ``server`` is None on a real cluster."""

    kubeconfig: Path
    api_client: Any
    server: ApiServer | None
    _cleanups: list[Callable[[], object]] = field(default_factory=list)

    @property
    def is_real(self) -> bool:
        return self.server is None

    def unique(self, prefix: str) -> str:
        """A name no other test (or earlier run on a real cluster) uses."""
        return f"{prefix}-{uuid.uuid4().hex[:8]}"

    def on_cleanup(self, action: Callable[[], object]) -> None:
        """Run ``action`` after the test on a real cluster (the in-memory one is reset anyway)."""
        self._cleanups.append(action)

    def namespace(self, prefix: str = "test", labels: dict[str, str] | None = None) -> str:
        """Create a namespace with a unique name, deleted after the test on a real cluster."""
        name = self.unique(prefix)
        core: Any = k8s_client.CoreV1Api(self.api_client)
        core.create_namespace({"metadata": {"name": name, "labels": labels or {}}})
        self.on_cleanup(lambda: _ignore_gone(core.delete_namespace, name))
        return name

    def run_cleanups(self) -> None:
        for action in reversed(self._cleanups):
            action()
        self._cleanups.clear()


def _ignore_gone(action: Callable[..., Any], *args: Any) -> None:
    """Deleting what is already gone (404) or already being deleted (409) is fine in cleanup."""
    try:
        action(*args)
    except k8s_client.ApiException as error:
        if error.status not in (404, 409):
            raise
