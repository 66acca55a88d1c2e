"""The API server a run measures: an in-memory one in this process, or a real cluster.

Request counts come from the in-memory server's request log; a real cluster offers no such log
to a client, so there they are None and the table says so.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.manifests import CRDS, subnamespace_crd_manifest
from libaccurate.kube import ApiError, ConnectionOptions, Kube

REAL_KUBECONFIG_ENV = "ACCURATE_TEST_KUBECONFIG"
REVIEWS = "/apis/authorization.k8s.io/"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
# The in-memory server keeps every change for watches; a benchmark makes far more than tests.
HISTORY = 200_000


class Target:
    """A cluster to benchmark; ``fresh()`` before each scenario, ``close()`` at the end."""

    def __init__(self, kubeconfig: Path, server: ApiServer | None) -> None:
        self.kubeconfig = kubeconfig
        self.server = server
        self.prefix = ""
        self._cleanups: list[Callable[[], object]] = []

    @classmethod
    def open(cls) -> Target:
        real = os.environ.get(REAL_KUBECONFIG_ENV)
        if real:
            return cls(Path(real), None)
        server = ApiServer(history=HISTORY).start()
        folder = Path(tempfile.mkdtemp(prefix="accurate-bench-"))
        return cls(server.write_kubeconfig(folder / "kubeconfig"), server)

    @property
    def kind(self) -> str:
        return "real cluster" if self.server is None else "in-memory API server"

    def kube(self, user_agent: str = "accurate-bench") -> Kube:
        return Kube.connect(ConnectionOptions(kubeconfig=str(self.kubeconfig)), user_agent)

    def fresh(self) -> None:
        """An empty cluster with the SubNamespace CRD; on a real cluster, the previous
        scenario's namespaces are removed and new names get a new prefix."""
        self.cleanup()
        self.prefix = f"b{uuid.uuid4().hex[:5]}"
        if self.server is not None:
            self.server.reset()
            self.server.set_watch_history(HISTORY)
        kube = self.kube()
        try:
            kube.create(CRDS, subnamespace_crd_manifest())
        except ApiError as error:
            if not error.already_exists:
                raise

    def name(self, suffix: str) -> str:
        return f"{self.prefix}-{suffix}"

    def on_cleanup(self, action: Callable[[], object]) -> None:
        self._cleanups.append(action)

    def cleanup(self) -> None:
        while self._cleanups:
            self._cleanups.pop()()

    def close(self) -> None:
        self.cleanup()
        if self.server is not None:
            self.server.stop()

    def start_counting(self) -> None:
        if self.server is not None:
            self.server.clear_requests()

    def count(self, agent: str, verbs: frozenset[str], under: str = "/") -> int | None:
        """Requests with a user agent starting with ``agent``, one of ``verbs`` and a path
        starting with ``under`` since ``start_counting``; None on a real cluster."""
        if self.server is None:
            return None
        return sum(
            1
            for request in self.server.requests
            if request.user_agent.startswith(agent)
            and request.verb in verbs
            and request.path.startswith(under)
        )

    def writes(self, agent: str) -> int | None:
        """Requests from ``agent`` that change the cluster since ``start_counting``."""
        paths = self.write_paths(agent)
        return None if paths is None else len(paths)

    def write_paths(self, agent: str) -> list[str] | None:
        """The paths of the writes ``agent`` sent since ``start_counting``, in order; None on a
        real cluster. Access reviews are POSTs (the controller's startup self-check) but store
        nothing, so they are left out."""
        if self.server is None:
            return None
        return [
            request.path
            for request in self.server.requests
            if request.user_agent.startswith(agent)
            and request.verb in WRITE_VERBS
            and not request.path.startswith(REVIEWS)
        ]
