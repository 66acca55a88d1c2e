"""12: what hierarchical quotas add to a write they count (issue 28), the way production sees it.

A cluster of trees of 50 namespaces, every tree but a few limited by an HRQ in its root, and
more HRQs in random namespaces of those trees, 1,000 in all; the controller keeps their
ResourceQuotas (kube-apiserver counts every pod written below them) and serves the quota
webhook, registered from controller/config/quota, which judges each of those counts against
the sums of the subtrees. Pods are then created one after the other and timed at the client:
one in a tree no HRQ limits (kube-apiserver's quota admission finds no quota: the baseline),
then one in a namespace under one or more HRQs (each of its ResourceQuotas is counted, its
status updated through the API and reviewed by the webhook). The difference of their p50 and
p99 is what the quotas add. Each counted pod changes the ResourceQuotas the controller caches
and starts a pass of the quota keeper, so the next review meets a moved cache and a busy
controller, as on a live cluster.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Sequence
from typing import Any

import trustme

from accurate_testbed.certificates import ca_bundle, write_serving_pair
from accurate_testbed.manifests import CRDS, MANIFESTS, registration, render
from accurate_testbed.processes import Process, free_port
from accurate_testbed.waiting import wait_for
from bench import controller, population
from bench.admission import added_latency, review_times
from bench.report import Row
from bench.target import Target
from libaccurate import quota
from libaccurate.network.kube import ApiError, Kube, resource_path

NAMESPACES_PER_ROOT = 50
# Trees no HRQ limits, where the baseline pods go.
FREE_TREES = 4
HARD = {"pods": "1000000", "requests.cpu": "100k"}
COUNTED_TIMEOUT = 900.0
REGISTRATION_TIMEOUT = 30.0
QUOTA_REVIEW_PATH = "/validate-v1-resourcequota-status"
REVIEWS_METRIC = "accurate_webhook_requests_total"


def quota_admission(target: Target, sizes: Sequence[int], hrqs: int, writes: int) -> list[Row]:
    """At each cluster size: ``writes`` timed pods in free trees, each followed by one under
    HRQs, with ``hrqs`` HRQs in the cluster."""
    rows: list[Row] = []
    for size in sizes:
        rows += _at_size(target, size, hrqs, writes)
    return rows


def _at_size(target: Target, size: int, hrqs: int, writes: int) -> list[Row]:
    target.fresh()
    kube = target.kube()
    _install_crd(target, kube)
    trees = population.forest(target, max(FREE_TREES + 1, size // NAMESPACES_PER_ROOT), size)
    roots = sorted(trees)
    free = [ns for root in roots[:FREE_TREES] for ns in (root, *trees[root])]
    limited = [ns for root in roots[FREE_TREES:] for ns in (root, *trees[root])]
    picks = random.Random(size)
    others = [ns for ns in limited if ns not in trees]
    holders = hrq_homes(roots, others, hrqs, picks)
    population.in_parallel(functools.partial(_create_hrq, kube), [(ns,) for ns in holders])

    ca = trustme.CA()
    cert_dir = target.scratch("certs-")
    write_serving_pair(ca, cert_dir)
    port = free_port()
    running = controller.start(
        target,
        "--webhook-addr",
        f"127.0.0.1:{port}",
        "--cert-dir",
        str(cert_dir),
        "--apiserver-qps-throttle",
        "0",
    )
    started = time.monotonic()
    wait_for(lambda: _all_counted(kube), COUNTED_TIMEOUT, "every HRQ to be counted")
    counted_in = time.monotonic() - started
    kept = len(kube.list_objects(_quotas(), labelSelector=quota.LABEL_HRQ_NAMESPACE)["items"])
    _register(target, kube, f"https://127.0.0.1:{port}", ca, running, picks.choice(limited))

    def series(label: str) -> tuple[list[float], list[float]]:
        plain, hooked = [], []
        for index in range(writes):
            plain.append(_pod(kube, picks.choice(free), target.name(f"{label}-p{index}")))
            hooked.append(_pod(kube, picks.choice(limited), target.name(f"{label}-h{index}")))
        return plain, hooked

    series("warm")
    reviews_before = _quota_reviews(running)
    timed_before = review_times(running, QUOTA_REVIEW_PATH)
    cpu_before = controller.cpu_seconds(running)
    plain, hooked = series("timed")
    cpu = controller.cpu_seconds(running) - cpu_before
    reviews = _quota_reviews(running) - reviews_before
    answered, fast = (review_times(running, QUOTA_REVIEW_PATH)[i] - timed_before[i] for i in (0, 1))
    rss = controller.peak_rss_mib(running)
    webhook_rss = controller.webhook_peak_rss_mib(running)
    running.stop()
    name = f"12 quota, {size} ns, {len(holders)} HRQs"
    return [
        *added_latency(name, plain, hooked, ("no HRQ", "under HRQs")),
        Row(name, "ResourceQuotas kept for HRQs", str(kept)),
        Row(name, "time until every HRQ was counted", f"{counted_in:.1f} s"),
        Row(name, "controller peak RSS", f"{rss:.0f} MiB"),
        Row(name, "webhook process peak RSS", f"{webhook_rss:.0f} MiB"),
        Row(
            name,
            "quota reviews the webhook itself took <= 1 ms for",
            f"{fast:.0f} of {answered:.0f}",
        ),
        Row(
            name,
            f"controller CPU (quota keeper passes) during the {2 * writes} timed pods",
            f"{cpu:.2f} s",
        ),
        Row(
            name,
            f"quota reviews during {writes} counted pods",
            f"{reviews:.0f}",
            f">= {writes}",
            reviews >= writes,
            checked=True,
        ),
    ]


def hrq_homes(
    roots: Sequence[str], others: Sequence[str], hrqs: int, chooser: random.Random
) -> list[str]:
    """The namespaces the ``hrqs`` HRQs go in: the root of every tree but the free ones, then
    namespaces below those roots (``others``) at random; never more than those trees hold, as
    in a run scaled down with ``--scale``."""
    limited = list(roots[FREE_TREES:])
    return limited + chooser.sample(others, min(len(others), max(0, hrqs - len(limited))))


def _install_crd(target: Target, kube: Kube) -> None:
    (crd,) = [o for o in render(MANIFESTS / "quota") if o["kind"] == "CustomResourceDefinition"]
    try:
        kube.create(CRDS, crd)
    except ApiError as error:
        if not error.already_exists:
            raise
    listing = resource_path(quota.GROUP, quota.VERSION, quota.PLURAL)
    wait_for(lambda: kube.find(listing) is not None, REGISTRATION_TIMEOUT, "the HRQ CRD")


def _create_hrq(kube: Kube, namespace: str) -> None:
    body = {
        "apiVersion": quota.API_VERSION,
        "kind": quota.KIND,
        "metadata": {"name": "compute", "namespace": namespace},
        "spec": {"hard": HARD},
    }
    kube.create(resource_path(quota.GROUP, quota.VERSION, quota.PLURAL, namespace), body)


def _quotas() -> str:
    return resource_path("", "v1", "resourcequotas")


def _all_counted(kube: Kube) -> bool:
    """Whether every HRQ says each namespace of its subtree is counted."""
    items = kube.list_objects(resource_path(quota.GROUP, quota.VERSION, quota.PLURAL))["items"]
    return all(_condition(item, quota.CONDITION_COUNTED) == "True" for item in items)


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    conditions = (obj.get("status") or {}).get("conditions") or ()
    return next((c.get("status") for c in conditions if c.get("type") == kind), None)


def _register(
    target: Target, kube: Kube, base_url: str, ca: trustme.CA, running: Process, probe: str
) -> None:
    """The quota webhook from controller/config/quota, pointed at the controller; effective
    once a pod created under an HRQ is reviewed."""
    objects = render(MANIFESTS / "quota")
    for configuration in registration(objects, base_url, ca_bundle(ca), target.prefix):
        collection = resource_path(
            "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations"
        )
        kube.create(collection, configuration)
        path = f"{collection}/{configuration['metadata']['name']}"
        target.on_cleanup(functools.partial(population.delete, kube, path), removes=True)
    before = _quota_reviews(running)
    probes = iter(range(1000))

    def reviewed() -> bool:
        _pod(kube, probe, target.name(f"probe{next(probes)}"))
        return _quota_reviews(running) > before

    wait_for(reviewed, REGISTRATION_TIMEOUT, "the quota webhook")


def _quota_reviews(running: Process) -> float:
    _, text = running.get(f"{running.metrics}/metrics")
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(REVIEWS_METRIC) and f'path="{QUOTA_REVIEW_PATH}"' in line
    )


def _pod(kube: Kube, namespace: str, name: str) -> float:
    """One pod creation (with a CPU request, as an HRQ tracking requests.cpu needs), timed
    from request to answer."""
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1m"}}}
    body = {"metadata": {"name": name}, "spec": {"containers": [container]}}
    started = time.perf_counter()
    kube.create(resource_path("", "v1", "pods", namespace), body)
    return time.perf_counter() - started
