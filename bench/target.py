"""The API server a run measures (an in-memory one, or a real cluster) and the temporary folder
the run works in.

Request counts come from the log of an in-memory server in this process; a real cluster offers
no such log to a client, nor does a server in another process, so there they are None and the
table says so. A server in a process of its own writes an audit log when asked (``apart``), as
an operator's kube-apiserver may; a real cluster's is out of a client's reach. Every folder a
run makes (controller logs and configs, certificates, kubectl's cache, builds) is made inside
the run's own temporary folder, which ``close()`` removes however the run ends, so that runs
leave nothing behind in the temporary directory.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.manifests import CRDS, subnamespace_crd_manifest
from accurate_testbed.processes import stop
from libaccurate.network.kube import ApiError, ConnectionOptions, Kube

ROOT = Path(__file__).resolve().parents[1]
REAL_KUBECONFIG_ENV = "ACCURATE_TEST_KUBECONFIG"
FOLDER_PREFIX = "accurate-bench-"
REAL = "real cluster"
IN_PROCESS = "in-memory API server"
OWN_PROCESS = "in-memory API server in a process of its own"
REVIEWS = "/apis/authorization.k8s.io/"
# The user agent of the benchmark's own requests, unless a scenario names another.
CLIENT_AGENT = "accurate-bench"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
# The in-memory server keeps every change for watches; a benchmark makes far more than tests.
HISTORY = 200_000
SERVER_START_TIMEOUT = 60.0
SERVER_STOP_TIMEOUT = 20.0


class Target:
    """A cluster to benchmark and the folder the run works in; ``fresh()`` before each
    scenario, ``close()`` at the end. ``shutdown`` stops what was started for it (a server,
    the folder's removal) at ``close()``."""

    def __init__(
        self,
        kubeconfig: Path,
        kind: str,
        folder: Path,
        shutdown: ExitStack,
        server: ApiServer | None = None,
        audit_log: Path | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.kind = kind
        self.folder = folder
        self.server = server
        self.audit_log = audit_log
        self.prefix = ""
        self._shutdown = shutdown
        self._cleanups = ExitStack()

    @classmethod
    def open(cls) -> Target:
        """The cluster named by ACCURATE_TEST_KUBECONFIG, or else a new in-memory API server in
        this process, where the scenarios can read its request log."""
        with ExitStack() as shutdown:
            folder = _temporary_folder(shutdown, Path(tempfile.gettempdir()), FOLDER_PREFIX)
            real = os.environ.get(REAL_KUBECONFIG_ENV)
            if real:
                return cls(Path(real), REAL, folder, shutdown.pop_all())
            server = ApiServer(history=HISTORY).start()
            shutdown.callback(server.stop)
            kubeconfig = server.write_kubeconfig(folder / "kubeconfig")
            return cls(kubeconfig, IN_PROCESS, folder, shutdown.pop_all(), server)

    @contextmanager
    def apart(self, audit: bool = False) -> Iterator[Target]:
        """A fresh cluster for a scenario that times clients against it: on a real cluster,
        this one; otherwise a new in-memory API server in a process of its own, so that the
        clients wait on a server that does not share this process's CPU time and GIL with the
        benchmark (as no real API server does), writing an audit log (its ``audit_log``) if
        asked. That server is stopped, and its files removed, when the block is left, however
        it is left. Either way this target is made fresh first: no controller of an earlier
        scenario is left running beside the clients."""
        self.fresh()
        if self.kind == REAL:
            yield self
            return
        with ExitStack() as shutdown:
            folder = _temporary_folder(shutdown, self.folder, "apiserver-")
            audit_log = folder / "audit.log" if audit else None
            kubeconfig = _serve(shutdown, folder, audit_log)
            served = Target(kubeconfig, OWN_PROCESS, folder, shutdown.pop_all(), None, audit_log)
        with closing(served):
            served.fresh()
            yield served

    def kube(self, user_agent: str = CLIENT_AGENT) -> Kube:
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

    def scratch(self, prefix: str) -> Path:
        """A new folder inside the run's folder, removed with it."""
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.folder))

    def on_cleanup(self, action: Callable[[], object], *, removes: bool = False) -> None:
        """``action`` at the next ``fresh()`` or ``close()``, the last registered first. An
        action that only removes what a scenario made on the cluster (``removes``) runs on a
        real cluster alone: an in-memory server forgets it all when it is emptied or stopped,
        even one that a Ctrl-C stopped first (it shares the terminal's signals)."""
        if removes and self.kind != REAL:
            return
        self._cleanups.callback(action)

    def cleanup(self) -> None:
        """Every action registered since the last clean-up, each one even if another fails
        (the last failure is raised, with the others as its context)."""
        self._cleanups.close()

    def close(self) -> None:
        """The last clean-up, then what was started for this target is stopped and its
        folder removed, whatever fails on the way."""
        with self._shutdown:
            self.cleanup()

    def start_counting(self) -> None:
        if self.server is not None:
            self.server.clear_requests()

    def count(self, agent: str, verbs: frozenset[str], under: str = "/") -> int | None:
        """Requests with a user agent starting with ``agent``, one of ``verbs`` and a path
        starting with ``under`` since ``start_counting``; None without a request log."""
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
        """The paths of the writes ``agent`` sent since ``start_counting``, in order; None
        without a request log. Access reviews are POSTs (the controller's startup self-check)
        but store nothing, so they are left out."""
        if self.server is None:
            return None
        return [
            request.path
            for request in self.server.requests
            if request.user_agent.startswith(agent)
            and request.verb in WRITE_VERBS
            and not request.path.startswith(REVIEWS)
        ]


def _temporary_folder(shutdown: ExitStack, parent: Path, prefix: str) -> Path:
    """A new folder in ``parent`` that ``shutdown`` removes."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    shutdown.callback(shutil.rmtree, folder)
    return folder


def _serve(shutdown: ExitStack, folder: Path, audit_log: Path | None) -> Path:
    """``python -m accurate_testbed.apiserver``, writing its kubeconfig and log into
    ``folder`` (and its audit log to ``audit_log``, if given), once it serves (it prints its
    URL then); ``shutdown`` stops it. Its kubeconfig."""
    kubeconfig = folder / "kubeconfig"
    log = folder / "apiserver.log"
    command = [sys.executable, "-m", "accurate_testbed.apiserver", "--kubeconfig", str(kubeconfig)]
    if audit_log is not None:
        command += ["--audit-log-path", str(audit_log)]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=sink)
    shutdown.callback(_stop, process)
    assert process.stdout is not None
    printed, _, _ = select.select([process.stdout], [], [], SERVER_START_TIMEOUT)
    if not printed or not process.stdout.readline():
        output = log.read_text(errors="replace")
        raise RuntimeError(f"the in-memory API server did not start:\n{output}")
    return kubeconfig


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Ask the server to stop (a no-op if it has ended), killing it if it has not ended
    within SERVER_STOP_TIMEOUT."""
    try:
        if not stop(process, timeout=SERVER_STOP_TIMEOUT):
            raise RuntimeError("the in-memory API server ignored SIGTERM and was killed")
    finally:
        assert process.stdout is not None
        process.stdout.close()
