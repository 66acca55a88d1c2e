"""``accurate-controller``: checks everything it needs at startup, then runs until SIGTERM.

Startup reads and validates the config against the API server's discovery, makes sure the
SubNamespace CRD is served and that the controller's account has every permission it uses;
any problem ends the process with status 1 and one message naming it. The webhooks are served
from a child process (controller.webhook_process); the cache, the leader election, the
reconcile loop and the probe and metrics servers run on threads until SIGTERM or SIGINT: the
loop stops taking work, writes in flight finish, the Lease is released, the child stops. When
the loop or the child dies, the controller exits with status 1.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from controller import health, selfcheck
from controller.applier import Applier
from controller.cache import (
    HRQS,
    SUBNAMESPACES,
    Cache,
    hold_once_filled,
    mirrored,
    quota_resources,
)
from controller.events import EVENTS, Recorder
from controller.generated_notice import GeneratedNotice
from controller.lane import SubNamespaceLane
from controller.leader import LeaderElector
from controller.logs import setup_logging
from controller.loop import Leadership, Loop, Traffic
from controller.metrics import Metrics
from controller.options import DISABLED, PROGRAM, Options, parse
from controller.owners import Owners
from controller.passes import Passes
from controller.quotas import PERMISSIONS as QUOTA_PERMISSIONS
from controller.quotas import Quotas
from controller.sudoers import Sudoers, keeps_sudoers
from controller.throttle import Throttles
from controller.webhook_process import (
    QuotaLease,
    WebhookProcess,
    WebhookProcessError,
    WebhookSettings,
)
from controller.writes import Writer
from libaccurate import __version__, quota, subnamespaces
from libaccurate.config import (
    Config,
    ConfigError,
    parse_config,
    resolve_watches,
    tenant_overrides,
)
from libaccurate.constants import SUBNAMESPACE_KIND, SUBNAMESPACE_PLURAL
from libaccurate.network import collector
from libaccurate.network.kube import ConnectionOptions, Kube, KubeError
from libaccurate.network.kubeconfig import load_credentials

# Every request but a watch gives up after this long, so a dead connection never holds a worker.
REQUEST_TIMEOUT = 30.0
# How long shutdown waits for the pass in progress before leaving anyway.
SHUTDOWN_GRACE = 30.0
# The SubNamespace lane's writers: its passes are small, and it must never queue behind the
# bulk lane's writes.
LANE_WORKERS = 2

log = logging.getLogger(__name__)


class StartupError(Exception):
    """The controller cannot start; the message says why and what to do."""


@dataclass
class Controller:
    """The running parts, for a clean shutdown."""

    stop: threading.Event
    loop_thread: threading.Thread
    lane_thread: threading.Thread
    appliers: tuple[Applier, ...]
    elector: LeaderElector | None
    servers: list[health.Server] = field(default_factory=list)
    webhooks: WebhookProcess | None = None

    def failure(self) -> str | None:
        """Why the controller cannot go on (a part of it died), or None while it can."""
        for thread in (self.loop_thread, self.lane_thread):
            if thread.ident and not thread.is_alive():
                return "the reconcile loop stopped"
        if self.webhooks is not None and not self.webhooks.alive:
            return f"the webhook process {self.webhooks.ending()}"
        return None

    def shutdown(self) -> None:
        """Stop taking work, let writes in flight finish, then give up the Lease."""
        self.stop.set()
        self.loop_thread.join(SHUTDOWN_GRACE)
        self.lane_thread.join(SHUTDOWN_GRACE)
        for applier in self.appliers:
            applier.close()
        if self.elector is not None:
            self.elector.release()
        for server in self.servers:
            server.stop()
        if self.webhooks is not None:
            self.webhooks.stop()
        log.info("stopped")


def main(argv: Sequence[str] | None = None) -> None:
    options = parse(argv)
    setup_logging(options.log_format, options.log_level)
    if options.ignored:
        message = "ignoring flags accepted only for compatibility with the Go Accurate"
        log.info(message, extra={"flags": options.ignored})
    stop = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    # The collector set for the API's answers from here on: the first LISTs decode the whole
    # cluster into the cache (libaccurate.network.collector).
    collector.hold()
    try:
        controller = start(options, stop)
    except (StartupError, ConfigError, KubeError, selfcheck.MissingPermissions) as error:
        print(f"{PROGRAM}: {error}", file=sys.stderr)
        sys.exit(1)
    while not stop.wait(1.0) and (failure := controller.failure()) is None:
        pass
    crashed = not stop.is_set()
    if crashed:
        log.error("stopping: %s", failure)
    controller.shutdown()
    if crashed:
        sys.exit(1)


def start(options: Options, stop: threading.Event) -> Controller:
    """Check everything the controller needs and start it; raises what prevents it."""
    lease_namespace = _lease_namespace(options)
    config = _read_config(options.config_file)
    for warning in tenant_overrides(config):
        log.warning(warning)
    kube = Kube(
        load_credentials(ConnectionOptions(kubeconfig=options.kubeconfig)),
        timeout=REQUEST_TIMEOUT,
        user_agent=f"{PROGRAM}/{__version__}",
        # Both lanes' workers, plus the lease, the owner reads and the startup checks.
        pool_size=options.workers + LANE_WORKERS + 4,
    )
    discovery = kube.server_resources()
    watched = resolve_watches(config, discovery, options.config_file)
    _require_subnamespaces(discovery)
    hierarchical = _serves(discovery, quota.API_VERSION, quota.PLURAL)
    required = selfcheck.required(watched, lease_namespace)
    for warning in selfcheck.check(kube, [*required, *(QUOTA_PERMISSIONS if hierarchical else ())]):
        log.warning(warning)
    identity = f"{socket.gethostname()}_{uuid.uuid4()}"
    elector = _elector(options, kube, lease_namespace, identity)
    metrics = Metrics()
    throttles = Throttles(options.qps)
    resources = mirrored(watched, options.propagate_generated)
    cache = Cache(
        kube, resources + (quota_resources() if hierarchical else []), options.resync_period
    )
    if hierarchical:
        metrics.track_hrqs(lambda: cache.items(HRQS))
    is_leader: Callable[[], bool] = (lambda: elector.is_leader) if elector else (lambda: True)
    recorder = Recorder(kube, throttles.of(EVENTS), identity, stop)
    writers = [
        Writer(
            kube,
            watched,
            recorder,
            throttles,
            metrics,
            may_write=lambda: not stop.is_set() and is_leader(),
            stop=stop,
            lookup=cache.get,
            urgent=urgent,
        )
        for urgent in (False, True)
    ]
    appliers = (
        Applier(writers[0], metrics, options.workers),
        Applier(writers[1], metrics, LANE_WORKERS),
    )
    # The Go controller reads owners from its cache; ours reads them, at a pace of their own.
    owners = Owners(kube, discovery, throttles.of("owners"), stop, options.resync_period)
    sudoers = Sudoers(kube) if any(keeps_sudoers(w) for w in watched) else None
    passes = Passes(
        cache,
        config,
        watched,
        metrics,
        owners if options.propagate_generated else None,
        sudoers,
        Quotas(kube, cache, recorder) if hierarchical else None,
    )
    leadership = Leadership(is_leader, elector.wait_until_leader if elector else lambda _: True)
    traffic = Traffic()
    lane_feed = cache.follow([SUBNAMESPACES])
    loop = Loop(
        passes,
        appliers[0],
        cache.follow(),
        leadership,
        options.resync_period,
        traffic,
        lane_feed,
    )
    lane = SubNamespaceLane(passes, appliers[1], lane_feed, leadership, traffic, loop)
    loop_thread = threading.Thread(target=loop.run, args=(stop,), name="loop", daemon=True)
    lane_thread = threading.Thread(target=lane.run, args=(stop,), name="lane", daemon=True)
    controller = Controller(stop, loop_thread, lane_thread, appliers, elector)
    controller.webhooks = _webhooks(options, config, hierarchical, lease_namespace)
    controller.servers = _serve(options, cache, metrics, controller, is_leader)
    if elector is not None:
        threading.Thread(target=elector.run, args=(stop,), name="leader", daemon=True).start()
    cache.start(stop)
    hold_once_filled(cache, stop)
    loop_thread.start()
    lane_thread.start()
    if not options.propagate_generated:
        notice = GeneratedNotice(cache, watched, owners, recorder, writers[0].may_write)
        threading.Thread(
            target=notice.run, args=(stop, options.resync_period), name="notice", daemon=True
        ).start()
    log.info(
        "started",
        extra={
            "version": __version__,
            "identity": identity,
            "watches": [f"{w.gvk.kind}.{w.gvk.api_version}" for w in watched],
        },
    )
    return controller


def _webhooks(
    options: Options, config: Config, hierarchical: bool, lease_namespace: str | None
) -> WebhookProcess | None:
    """The admission and conversion webhooks, served by every replica, leader or not, from a
    process of their own (controller.webhook_process), so that no reconcile pass stalls them."""
    if options.webhook_addr == DISABLED:
        return None
    webhooks = WebhookProcess(
        WebhookSettings(
            addr=options.webhook_addr,
            cert_dir=options.cert_dir,
            kubeconfig=options.kubeconfig,
            naming_policies=tuple(config.naming_policies),
            allow_cascading_deletion=options.allow_cascading_deletion,
            tree_label_suffix=config.tree_label_suffix,
            hierarchical_quotas=hierarchical,
            quota_lease=_quota_lease(options, lease_namespace) if hierarchical else None,
            resync_period=options.resync_period,
            request_timeout=REQUEST_TIMEOUT,
            user_agent=f"{PROGRAM}/{__version__}",
            log_format=options.log_format,
            log_level=options.log_level,
        )
    )
    try:
        webhooks.start()
    except WebhookProcessError as error:
        raise StartupError(str(error)) from error
    return webhooks


def _quota_lease(options: Options, lease_namespace: str | None) -> QuotaLease | None:
    """With leader election, the webhook processes hold a Lease of their own to decide
    hierarchical quotas one at a time (controller.quota_authority)."""
    if lease_namespace is None:
        return None
    return QuotaLease(
        lease_namespace,
        f"{options.leader_election_id}-quota",
        options.lease_duration,
        options.renew_deadline,
        options.retry_period,
        os.environ.get("POD_NAME") or None,
    )


def _lease_namespace(options: Options) -> str | None:
    if not options.leader_election:
        return None
    namespace = os.environ.get("POD_NAMESPACE", "")
    if not namespace:
        raise StartupError(
            "POD_NAMESPACE is not set: leader election keeps its Lease in that namespace; "
            "set it, or pass --no-leader-election to run a single controller"
        )
    return namespace


def _read_config(path: str) -> Config:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else str(error)
        raise StartupError(f"cannot read the config file {path}: {reason}") from error
    return parse_config(text, path)


def _serves(discovery: list[dict[str, object]], group_version: str, plural: str) -> bool:
    """Whether discovery lists ``plural`` in ``group_version``."""
    for resource_list in discovery:
        if resource_list.get("groupVersion") != group_version:
            continue
        resources = resource_list.get("resources")
        if isinstance(resources, list) and any(r.get("name") == plural for r in resources):
            return True
    return False


def _require_subnamespaces(discovery: list[dict[str, object]]) -> None:
    group_version = subnamespaces.api_version()
    if _serves(discovery, group_version, SUBNAMESPACE_PLURAL):
        return
    raise StartupError(
        f"the API server does not serve {SUBNAMESPACE_KIND} ({group_version}): "
        "install the CRD subnamespaces.accurate.cybozu.com first"
    )


def _elector(
    options: Options, kube: Kube, lease_namespace: str | None, identity: str
) -> LeaderElector | None:
    if lease_namespace is None:
        return None
    try:
        return LeaderElector(
            kube,
            lease_namespace,
            options.leader_election_id,
            identity,
            lease_duration=options.lease_duration,
            renew_deadline=options.renew_deadline,
            retry_period=options.retry_period,
        )
    except ValueError as error:
        raise StartupError(f"invalid leader election settings: {error}") from error


def _serve(
    options: Options,
    cache: Cache,
    metrics: Metrics,
    controller: Controller,
    is_leader: Callable[[], bool],
) -> list[health.Server]:
    """/healthz and /readyz on the probe address, /metrics on the metrics address (with the
    webhook process's series)."""

    def healthz() -> tuple[int, bytes, str]:
        failure = controller.failure()
        if failure is None:
            return 200, b"ok\n", "text/plain"
        return 500, f"{failure}\n".encode(), "text/plain"

    def readyz() -> tuple[int, bytes, str]:
        failure = controller.failure()
        if failure is not None:
            return 503, f"{failure}\n".encode(), "text/plain"
        if cache.synced:
            return 200, b"ok\n", "text/plain"
        return 503, b"the cache has not been filled yet\n", "text/plain"

    def exposition() -> tuple[int, bytes, str]:
        metrics.set_leader(is_leader())
        for name, size in cache.sizes().items():
            metrics.set_cache_size(name, size)
        body, content_type = metrics.exposition()
        if controller.webhooks is not None:
            body += controller.webhooks.exposition()
        return 200, body, content_type

    wanted: dict[str, dict[str, health.Route]] = {}
    if options.health_probe_addr != DISABLED:
        wanted.setdefault(options.health_probe_addr, {}).update(
            {"/healthz": healthz, "/readyz": readyz}
        )
    if options.metrics_addr != DISABLED:
        wanted.setdefault(options.metrics_addr, {})["/metrics"] = exposition
    servers = []
    try:
        for addr, routes in wanted.items():
            servers.append(health.serve(addr, routes))
    except OSError as error:
        for server in servers:
            server.stop()
        raise StartupError(str(error)) from error
    return servers
