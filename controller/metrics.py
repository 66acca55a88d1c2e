"""The controller's Prometheus metrics: what an operator graphs and alerts on.

Everything lives in a registry of its own, so two controllers in one process (the tests) do not
share counters and nothing a library registers globally leaks into ``/metrics``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

# Webhooks answer within the API server's timeout (10 s by default); passes can take minutes on
# large clusters, hence the wider range.
_WEBHOOK_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_PASS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class Metrics:
    """The controller's counters, gauges and histograms, with one method per thing observed."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._passes = Counter(
            "accurate_reconcile_passes",
            "Reconcile passes completed.",
            registry=self.registry,
        )
        self._pass_seconds = Histogram(
            "accurate_reconcile_duration_seconds",
            "Time one reconcile pass took, from planning to the last write.",
            buckets=_PASS_BUCKETS,
            registry=self.registry,
        )
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

    def observe_pass(self, seconds: float) -> None:
        self._passes.inc()
        self._pass_seconds.observe(seconds)

    def count_action(self, kind: str, result: str) -> None:
        self._actions.labels(action=kind, result=result).inc()

    def count_api_error(self, code: int) -> None:
        self._api_errors.labels(code=str(code)).inc()

    def set_cache_size(self, kind: str, n: int) -> None:
        self._cache.labels(kind=kind).set(n)

    def set_leader(self, is_leader: bool) -> None:
        self._leader.set(1 if is_leader else 0)

    def exposition(self) -> tuple[bytes, str]:
        """The Prometheus text format and its content type, for the /metrics route."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


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

    def observe(self, path: str, allowed: bool, seconds: float) -> None:
        self._requests.labels(path=path, allowed=str(allowed).lower()).inc()
        self._seconds.labels(path=path).observe(seconds)

    def exposition(self) -> bytes:
        """The Prometheus text format of these series alone, to append to the controller's."""
        return generate_latest(self.registry)
