"""10: what the namespace webhook adds to a namespace write, the way production sees it (issue 20).

Namespace creations labelled with an Accurate parent go through the API server one after the
other, timed at the client, with the controller's webhooks registered (from the deploy
manifests, pointed at the controller's own server) for the namespaces of one series only, so
that each creation of that series has a twin without the webhook right before it, under the
same load. Every admitted creation changes the controller's cache and starts a reconcile pass,
so the next review meets a moved cache and a busy controller, as it does on a live cluster. The
API server's own cost is in both series; their difference is what the webhook adds.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Sequence

import trustme
from prometheus_client.parser import text_string_to_metric_families

from accurate_testbed.certificates import ca_bundle, write_serving_pair
from accurate_testbed.manifests import MANIFESTS, namespace_hook_answers, registration, render
from accurate_testbed.processes import Process, free_port
from accurate_testbed.waiting import wait_for
from bench import controller, population
from bench.report import Row, percentile
from bench.target import Target
from libaccurate.constants import LABEL_PARENT
from libaccurate.network.kube import Kube, resource_path

NAMESPACES_PER_ROOT = 50
REGISTRATION_TIMEOUT = 30.0
# The first pass labels every sub-namespace of the new cluster at the default request limit.
FIRST_PASS_TIMEOUT = 600.0
REVIEWS_METRIC = "accurate_webhook_requests_total"
ACTIONS_METRIC = "accurate_actions_total"
REVIEW_SECONDS_METRIC = "accurate_webhook_duration_seconds"
NAMESPACE_REVIEW_PATH = "/validate-v1-namespace"
# The bucket of that histogram the reviews themselves are expected to fit in.
FAST_REVIEW_BUCKET = "0.001"
# The label that sends a namespace through the webhooks (their namespaceSelector).
HOOKED = {"bench.accurate.cybozu.com/hooked": "true"}
# Go Accurate's figures on the real cluster, the goal here.
GOAL_P50 = 0.003
GOAL_P99 = 0.020


def admission(target: Target, sizes: Sequence[int], writes: int) -> list[Row]:
    """At each cluster size: ``writes`` timed creations without the webhook, then with it."""
    rows: list[Row] = []
    for size in sizes:
        rows += _at_size(target, size, writes)
    return rows


def _at_size(target: Target, size: int, writes: int) -> list[Row]:
    target.fresh()
    trees = population.forest(target, max(1, size // NAMESPACES_PER_ROOT), size)
    parents = [ns for root, tree in trees.items() for ns in (root, *tree)]
    ca = trustme.CA()
    cert_dir = target.scratch("certs-")
    write_serving_pair(ca, cert_dir)
    port = free_port()
    running = controller.start(
        target, "--webhook-addr", f"127.0.0.1:{port}", "--cert-dir", str(cert_dir)
    )
    controller.wait_for_pass(running, timeout=FIRST_PASS_TIMEOUT)
    if running.metric(ACTIONS_METRIC) > 0:
        # The first pass labelled the sub-namespaces; the next one plans each namespace it
        # wrote once more (a write is a change). Timing starts after both, on a settled
        # controller, as on the cluster that the Go Accurate had long managed.
        controller.wait_for_pass(running, after=1, timeout=FIRST_PASS_TIMEOUT)
    kube = target.kube()
    picks = random.Random(size)
    created: list[str] = []
    target.on_cleanup(lambda: population.delete_namespaces(target, created), removes=True)

    def series(label: str) -> tuple[list[float], list[float]]:
        """``writes`` creations without the webhook, each followed by one with it."""
        plain, hooked = [], []
        for index in range(writes):
            names = target.name(f"{label}-plain{index}"), target.name(f"{label}-hooked{index}")
            created.extend(names)
            plain.append(_create(kube, names[0], picks.choice(parents), {}))
            hooked.append(_create(kube, names[1], picks.choice(parents), HOOKED))
        return plain, hooked

    _register(target, kube, f"https://127.0.0.1:{port}", ca)
    series("warm")  # connections and the controller's first passes, on both sides alike
    reviews_before = running.metric(REVIEWS_METRIC)
    timed_before = review_times(running)
    cpu_before = controller.cpu_seconds(running)
    target.start_counting()
    plain, hooked = series("timed")
    cpu = controller.cpu_seconds(running) - cpu_before
    reviews = running.metric(REVIEWS_METRIC) - reviews_before
    timed_after = review_times(running)
    answered, fast = (timed_after[i] - timed_before[i] for i in (0, 1))
    reads = target.count(controller.AGENT, frozenset({"get", "list"}), population.NAMESPACES)
    running.stop()
    name = f"10 admission, {len(parents)} ns"
    speed = Row(
        name, "reviews the webhook itself took <= 1 ms for", f"{fast:.0f} of {answered:.0f}"
    )
    # The reconcile passes those creations started, and their writes: what the pass costs per
    # change, which should not grow with the cluster (its webhook process is not counted).
    spent = Row(name, f"controller CPU during the {2 * writes} timed creations", f"{cpu:.2f} s")
    rows = added_latency(name, plain, hooked)
    return [*rows, speed, spent, *_counts(name, writes, reviews, reads)]


def review_times(running: Process, path: str = NAMESPACE_REVIEW_PATH) -> tuple[float, float]:
    """Reviews on ``path`` answered so far, and how many of them took the webhook itself at most
    FAST_REVIEW_BUCKET seconds (its histogram): what the client sees beyond that is transport,
    the API server and waiting for a CPU."""
    buckets: dict[str, float] = {}
    for family in text_string_to_metric_families(running.get(f"{running.metrics}/metrics")[1]):
        if family.name != REVIEW_SECONDS_METRIC:
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket") and sample.labels["path"] == path:
                buckets[sample.labels["le"]] = sample.value
    return buckets.get("+Inf", 0.0), buckets.get(FAST_REVIEW_BUCKET, 0.0)


def _create(kube: Kube, name: str, parent: str, labels: dict[str, str]) -> float:
    """One namespace creation under ``parent``, timed from request to answer."""
    body = {"metadata": {"name": name, "labels": {**labels, LABEL_PARENT: parent}}}
    started = time.perf_counter()
    kube.create(population.NAMESPACES, body)
    return time.perf_counter() - started


def _register(target: Target, kube: Kube, base_url: str, ca: trustme.CA) -> None:
    """The deploy manifests' webhook configurations, pointed at the controller, for the
    namespaces labelled HOOKED; effective once the namespace webhook refuses such a namespace
    that is its own parent."""
    objects = render(MANIFESTS / "default")
    bundle = ca_bundle(ca)
    for configuration in registration(objects, base_url, bundle, target.prefix, scope=HOOKED):
        plural = configuration["kind"].lower() + "s"
        collection = resource_path("admissionregistration.k8s.io", "v1", plural)
        kube.create(collection, configuration)
        path = f"{collection}/{configuration['metadata']['name']}"
        target.on_cleanup(functools.partial(population.delete, kube, path), removes=True)
    probe = target.name("probe")
    wait_for(
        lambda: namespace_hook_answers(kube, probe, HOOKED), REGISTRATION_TIMEOUT, "the webhook"
    )


def added_latency(
    name: str,
    plain: Sequence[float],
    hooked: Sequence[float],
    series: tuple[str, str] = ("no webhook", "with webhook"),
) -> list[Row]:
    """p50 and p99 of both series, named ``series``, and what the second adds, against the
    goal."""
    added = {share: percentile(hooked, share) - percentile(plain, share) for share in (0.5, 0.99)}
    rows = []
    for share, label in ((0.5, "p50"), (0.99, "p99")):
        rows += [
            Row(name, f"{series[0]} {label}", _ms(percentile(plain, share))),
            Row(name, f"{series[1]} {label}", _ms(percentile(hooked, share))),
        ]
    return [
        *rows,
        Row(name, "added p50", _ms(added[0.5]), f"<= {_ms(GOAL_P50)}", added[0.5] <= GOAL_P50),
        Row(name, "added p99", _ms(added[0.99]), f"<= {_ms(GOAL_P99)}", added[0.99] <= GOAL_P99),
    ]


def _counts(name: str, writes: int, reviews: float, reads: int | None) -> list[Row]:
    """Every timed creation went through the webhook (which also reviews the controller's own
    namespace writes, hence at least), and no review read a namespace back from the API server:
    the cache knew every parent."""
    return [
        Row(
            name,
            f"namespace reviews during {writes} creations",
            f"{reviews:.0f}",
            f">= {writes}",
            reviews >= writes,
            checked=True,
        ),
        Row(
            name,
            "namespace reads by the controller meanwhile",
            "n/a (real cluster)" if reads is None else str(reads),
            "0",
            None if reads is None else reads == 0,
            checked=True,
        ),
    ]


def _ms(value: float) -> str:
    return f"{value * 1000:.2f} ms"
