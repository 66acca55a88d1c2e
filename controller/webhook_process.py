"""The admission and conversion webhooks served from a process of their own (issue 20).

A reconcile pass is pure Python for a while, and in the controller's process it holds the GIL
while a review waits: at 10,000 namespaces that put tens of milliseconds on the p99 of every
namespace write the webhook sees. So accurate-controller starts a child process that serves the
webhooks with the same flags (address, certificate directory, cascading deletion, naming
policies, tree labels) and keeps its own namespace-only cache and incremental forest, fed by
its own watch; nothing the parent does can stall it.

The child is started with the ``spawn`` method, a fresh interpreter, because forking a process
that already runs threads (or may hold locks) can deadlock the child. Parent and child talk
over one pipe: the child says once whether it serves (and on which port) or why it cannot, then
answers requests for its metrics, which the parent adds to its own ``/metrics``. The child
leaves when told to, or when the pipe breaks because the parent is gone, so it never outlives
the controller. The parent supervises it: once it has died the controller is not ready and
exits with status 1, as a Go controller-runtime manager does when one of its servers fails, and
Kubernetes restarts the pod.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import signal
import socket
import sys
import threading
import uuid
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

from controller.cache import Cache, hold_once_filled, namespaces_only, quota_resources
from controller.certs import CertificateError
from controller.leader import LeaderElector
from controller.logs import setup_logging
from controller.metrics import WebhookMetrics
from controller.quota_admission import QuotaReviews
from controller.quota_authority import QuotaAuthority
from controller.webhook import WebhookServer
from libaccurate.config import NamingPolicy
from libaccurate.network import collector
from libaccurate.network.kube import ConnectionOptions, Kube, KubeError
from libaccurate.network.kubeconfig import load_credentials

# The child imports the controller and lists every namespace's first page before it serves;
# on a loaded node that takes seconds, never this long.
START_TIMEOUT = 60.0
# A metrics request to a child that does not answer within this is given up (no webhook
# series in that scrape) rather than hold the scrape.
METRICS_TIMEOUT = 5.0
# How long a stopping child may take to finish its requests in flight.
STOP_GRACE = 10.0
# How long a thread of the child may keep the GIL while another waits (Python's default is
# 5 ms): when the namespace watch takes in a big relist, a review waits a fraction of a
# millisecond for its turn, not 5 ms every time it needs the GIL back.
GIL_SWITCH_INTERVAL = 0.0005

log = logging.getLogger(__name__)


class WebhookProcessError(Exception):
    """The webhook process could not start; the message says why (the child's own words)."""


@dataclass(frozen=True)
class QuotaLease:
    """The Lease the webhook processes hold to decide hierarchical quotas one at a time
    (controller.quota_authority), with the controller's leader election timings; ``pod`` is
    this replica's pod name (POD_NAME), which the holder labels."""

    namespace: str
    name: str
    lease_duration: float
    renew_deadline: float
    retry_period: float
    pod: str | None


@dataclass(frozen=True)
class WebhookSettings:
    """What the child needs to serve the webhooks as the parent would; it crosses the pipe."""

    addr: str
    cert_dir: str
    kubeconfig: str | None
    naming_policies: tuple[NamingPolicy, ...]
    allow_cascading_deletion: bool
    tree_label_suffix: str | None
    hierarchical_quotas: bool
    quota_lease: QuotaLease | None
    resync_period: float
    request_timeout: float
    user_agent: str
    log_format: str
    log_level: str


class WebhookProcess:
    """The child process serving the webhooks: ``start`` it, ask whether it is ``alive``, read
    its ``exposition``, ``stop`` it."""

    def __init__(self, settings: WebhookSettings) -> None:
        self._settings = settings
        self._connection: Connection | None = None
        self._process: BaseProcess | None = None
        self._lock = threading.Lock()
        self._asked = 0
        self.port = 0

    def start(self) -> None:
        """Start the child and wait until it serves; raises WebhookProcessError with its reason
        when it cannot (a busy port, an unusable certificate)."""
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        process = context.Process(
            target=serve, args=(self._settings, theirs), name="accurate-webhooks", daemon=True
        )
        process.start()
        theirs.close()
        self._connection, self._process = ours, process
        word, said = self._first_word(ours)
        if word != "serving" or not isinstance(said, int):
            self.stop()
            raise WebhookProcessError(str(said))
        self.port = said
        log.info("webhook process started", extra={"pid": process.pid, "port": self.port})

    def _first_word(self, connection: Connection) -> tuple[str, object]:
        """What the child says first: ("serving", port) or ("failed", reason)."""
        if not connection.poll(START_TIMEOUT):
            return "failed", f"the webhook process did not serve within {START_TIMEOUT:.0f} s"
        with contextlib.suppress(EOFError, OSError):
            word: tuple[str, object] = connection.recv()
            return word
        if self._process is not None:
            # It broke the pipe, so it is on its way out: let it finish to read its status.
            self._process.join(STOP_GRACE)
        return "failed", f"the webhook process {self.ending()} before serving"

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    def ending(self) -> str:
        """How the child ended, for the log line and the probes."""
        code = self._process.exitcode if self._process is not None else None
        if code is None:
            return "is running"
        if code < 0:
            return f"was killed by signal {-code}"
        return f"exited with status {code}"

    def exposition(self) -> bytes:
        """The child's webhook metrics in the Prometheus text format; empty when it cannot say
        (gone, or too slow): the scrape still has the parent's series."""
        with self._lock:
            if self._connection is None or not self.alive:
                return b""
            self._asked += 1
            try:
                self._connection.send(("metrics", self._asked))
                while self._connection.poll(METRICS_TIMEOUT):
                    asked, body = self._connection.recv()
                    if asked == self._asked:
                        return bytes(body)
            except (EOFError, OSError):
                pass
            return b""

    def stop(self) -> None:
        """Ask the child to finish its requests and leave; end it if it does not."""
        with self._lock:
            connection, process = self._connection, self._process
            self._connection = self._process = None
        if connection is not None:
            with contextlib.suppress(OSError):
                connection.send(("stop", 0))
        if process is not None:
            process.join(STOP_GRACE)
            if process.is_alive():
                process.kill()
                process.join()
        if connection is not None:
            connection.close()


def serve(settings: WebhookSettings, parent: Connection) -> None:
    """The child's main: serve until the parent says stop or goes away. Runs in the child."""
    # Ctrl-C reaches the whole process group; the parent stops the child in its own order.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    # As in the controller's process: the first LISTs decode every namespace into the cache,
    # and a review should not pay for the collector walking them (libaccurate.network.collector).
    collector.hold()
    setup_logging(settings.log_format, settings.log_level)
    stop = threading.Event()
    metrics = WebhookMetrics()
    try:
        server, authority = _start_server(settings, metrics, stop)
    except (OSError, CertificateError, KubeError, ValueError) as error:
        parent.send(("failed", str(error)))
        sys.exit(1)
    parent.send(("serving", server.port))
    try:
        while True:
            command, asked = parent.recv()
            if command != "metrics":
                break
            parent.send((asked, metrics.exposition()))
    except (EOFError, OSError):
        log.warning("the controller process is gone; the webhook process stops")
    stop.set()
    server.stop()
    if authority is not None:
        authority.release()


def _start_server(
    settings: WebhookSettings, metrics: WebhookMetrics, stop: threading.Event
) -> tuple[WebhookServer, QuotaAuthority | None]:
    """The namespace cache (filled in the background), the listening webhook server and, with
    hierarchical quotas, what says whether this process decides them."""
    kube = Kube(
        load_credentials(ConnectionOptions(kubeconfig=settings.kubeconfig)),
        timeout=settings.request_timeout,
        user_agent=settings.user_agent,
    )
    resources = namespaces_only() + (quota_resources() if settings.hierarchical_quotas else [])
    cache = Cache(kube, resources, settings.resync_period)
    authority = _authority(settings, kube) if settings.hierarchical_quotas else None
    quotas = None
    if authority is not None:
        quotas = QuotaReviews(cache, kube, lambda: authority.deciding)
    server = WebhookServer(
        settings.addr,
        Path(settings.cert_dir),
        cache,
        kube,
        settings.naming_policies,
        settings.allow_cascading_deletion,
        metrics.observe,
        settings.tree_label_suffix,
        quotas,
    )
    server.start()
    cache.start(stop)
    hold_once_filled(cache, stop)
    if authority is not None:
        authority.start(stop)
    return server, authority


def _authority(settings: WebhookSettings, kube: Kube) -> QuotaAuthority:
    """Without leader election, this process decides; with it, the quota Lease's holder."""
    lease = settings.quota_lease
    if lease is None:
        return QuotaAuthority(None, kube, None)
    identity = f"{socket.gethostname()}_{uuid.uuid4()}"
    elector = LeaderElector(
        kube,
        lease.namespace,
        lease.name,
        identity,
        lease_duration=lease.lease_duration,
        renew_deadline=lease.renew_deadline,
        retry_period=lease.retry_period,
    )
    pod = (lease.namespace, lease.pod) if lease.pod else None
    if pod is None:
        log.warning(
            "POD_NAME is not set: the quota webhook's Service cannot find this replica when it "
            "holds the quota Lease; set it from the downward API (metadata.name)"
        )
    return QuotaAuthority(elector, kube, pod)
