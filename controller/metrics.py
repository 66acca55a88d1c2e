"""The controller's Prometheus metrics: what an operator graphs and alerts on.

Everything lives in a registry of its own, so two controllers in one process (the tests) do not
share counters and nothing a library registers globally leaks into ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily
from prometheus_client.registry import Collector

from libaccurate import quota

# Webhooks answer within the API server's timeout (10 s by default); passes can take minutes on
# large clusters, hence the wider range.
_WEBHOOK_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_PASS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
# The reconcile loop's lanes (controller.loop, controller.lane), by the names passes, logs and
# the ``lane`` label of the pass series give them: the bulk of the work, and SubNamespaces.
LANES = ("bulk", "subnamespaces")


class Metrics:
    """The controller's counters, gauges and histograms, with one method per thing observed."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._passes = Counter(
            "accurate_reconcile_passes",
            "Reconcile passes completed, by lane.",
            ["lane"],
            registry=self.registry,
        )
        self._pass_seconds = Histogram(
            "accurate_reconcile_duration_seconds",
            "Time one reconcile pass took, from planning to the last write, by lane.",
            ["lane"],
            buckets=_PASS_BUCKETS,
            registry=self.registry,
        )
        for lane in LANES:
            # Both lanes' series exist from the start, at zero, so that a sum over lanes or a
            # rate of either is there before the lane's first pass.
            self._passes.labels(lane=lane)
            self._pass_seconds.labels(lane=lane)
        self._actions = Counter(
            "accurate_actions",
            "Actions applied, by kind of action and result.",
            ["action", "result"],
            registry=self.registry,
        )
        self._api_errors = Counter(
            "accurate_api_errors",
            "Error answers from the Kubernetes API, by HTTP status code.",
            ["code"],
            registry=self.registry,
        )
        self._cache = Gauge(
            "accurate_cache_objects",
            "Objects held in the controller's cache, by kind.",
            ["kind"],
            registry=self.registry,
        )
        self._leader = Gauge(
            "accurate_leader",
            "1 while this replica holds the leader election Lease, else 0.",
            registry=self.registry,
        )

    def observe_pass(self, lane: str, seconds: float) -> None:
        self._passes.labels(lane=lane).inc()
        self._pass_seconds.labels(lane=lane).observe(seconds)

    def count_action(self, kind: str, result: str) -> None:
        self._actions.labels(action=kind, result=result).inc()

    def count_api_error(self, code: int) -> None:
        self._api_errors.labels(code=str(code)).inc()

    def set_cache_size(self, kind: str, n: int) -> None:
        self._cache.labels(kind=kind).set(n)

    def set_leader(self, is_leader: bool) -> None:
        self._leader.set(1 if is_leader else 0)

    def track_hrqs(self, hrqs: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
        """Expose the hard and used of every HRQ ``hrqs`` returns at each scrape."""
        self.registry.register(HrqCollector(hrqs))

    def exposition(self) -> tuple[bytes, str]:
        """The Prometheus text format and its content type, for the /metrics route."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class HrqCollector(Collector):
    """``accurate_hierarchicalresourcequota``, labelled as kube-state-metrics labels
    ``kube_resourcequota``: one sample per HRQ, resource and ``type`` (``hard``: its spec,
    ``used``: the sum over its subtree as its status says). Read from the HRQs at each scrape,
    so an HRQ deleted leaves no series behind, and every replica, leader or not, shows what
    the statuses say."""

    def __init__(self, hrqs: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
        self.hrqs = hrqs

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "accurate_hierarchicalresourcequota",
            "Hierarchical resource quota: hard (the limit) and used (by its namespace and "
            "every namespace below it), by resource.",
            labels=["namespace", "hierarchicalresourcequota", "resource", "type"],
        )
        for labels, value in hrq_samples(self.hrqs()):
            family.add_metric(list(labels), value)
        yield family


def hrq_samples(
    objects: Iterable[Mapping[str, Any]],
) -> Iterator[tuple[tuple[str, str, str, str], float]]:
    """(namespace, name, resource, type) and value of each HRQ's hard and used; an HRQ whose
    spec cannot be read has no hard, and a resource not counted yet no used."""
    objects = list(objects)
    hrqs, _ = quota.read_hrqs(objects)
    used = quota.usage_of(objects)
    for hrq in hrqs:
        for kind, values in (("hard", hrq.hard), ("used", used.get(hrq.key) or {})):
            for resource, amount in sorted(values.items()):
                yield (hrq.namespace, hrq.name, resource, kind), float(amount.value)


class WebhookMetrics:
    """The webhook server's counters. They live in the process that answers the reviews
    (controller.webhook_process), which hands their exposition to the controller's /metrics."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._requests = Counter(
            "accurate_webhook_requests",
            "Admission requests answered, by webhook path and verdict.",
            ["path", "allowed"],
            registry=self.registry,
        )
        self._seconds = Histogram(
            "accurate_webhook_duration_seconds",
            "Time taken to answer an admission request, by webhook path.",
            ["path"],
            buckets=_WEBHOOK_BUCKETS,
            registry=self.registry,
        )
        # The two series each (path, verdict) counts in, looked up once: finding a child by
        # its labels costs more than counting in it, on every review.
        self._series: dict[tuple[str, bool], tuple[Counter, Histogram]] = {}

    def observe(self, path: str, allowed: bool, seconds: float) -> None:
        series = self._series.get((path, allowed))
        if series is None:
            series = (
                self._requests.labels(path=path, allowed=str(allowed).lower()),
                self._seconds.labels(path=path),
            )
            self._series[path, allowed] = series
        requests, duration = series
        requests.inc()
        duration.observe(seconds)

    def exposition(self) -> bytes:
        """The Prometheus text format of these series alone, to append to the controller's."""
        return generate_latest(self.registry)
