"""The measurements of issues 8, 19 and 20, each filling a fresh cluster and returning its rows."""

from __future__ import annotations

import functools
import http.client
import json
import ssl
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import trustme

from accurate_testbed.certificates import write_serving_pair
from accurate_testbed.objects import secret, secret_data
from accurate_testbed.processes import environment, free_port
from accurate_testbed.waiting import wait_for
from bench import controller, population
from bench.admission import admission
from bench.keeper import keeper_passes
from bench.network import network
from bench.population import secrets_path
from bench.quota import quota_admission
from bench.reaction import long_pass, reaction
from bench.report import Row, median, percentile, seconds, timed
from bench.startup import startup
from bench.target import WRITE_VERBS, Target
from bench.watching import watch_until
from controller.throttle import Throttle
from controller.webhook import (
    MUTATE_SUBNAMESPACE_PATH,
    VALIDATE_NAMESPACE_PATH,
    VALIDATE_SUBNAMESPACE_PATH,
)
from kubectl_accurate.preconnect import USER_AGENT as CLI_AGENT
from libaccurate import subnamespaces
from libaccurate.constants import (
    FINALIZER,
    GROUP,
    LABEL_PARENT,
    LABEL_TYPE,
    SUBNAMESPACE_PLURAL,
)
from libaccurate.lifecycle import REASON_SYNCED, ready_reason
from libaccurate.network.kube import Kube, resource_path

CONVERGE_TIMEOUT = 600.0
# The Go Accurate's default request limit before 2026-04, and a value operators still give.
GO_QPS = 50
LIMITED = ("--apiserver-qps-throttle", str(GO_QPS))
# Go Accurate v0.4.0 converging the issue 31 population on a real API server, with the limit.
GO_CONVERGE = "Go v0.4.0 (real API server): 117 s"
GO_WRITES = "Go v0.4.0: 16,942-17,007"
ALL_VERBS = frozenset({"get", "list", "watch", *WRITE_VERBS})
NAMESPACES_PER_ROOT = 50
# What the controller logs for each action of a pass, before the pass's closing record.
ACTION_RECORDS = frozenset({"applied", "action failed", "action not applied"})


@dataclass(frozen=True)
class Sizes:
    """How big each scenario is; the defaults are issue 8's, quick mode's are tiny."""

    cli: tuple[int, ...] = (2000, 10000)
    runs: int = 5
    fanout: int = 1000
    new_sub_objects: int = 20
    steady_namespaces: int = 5000
    steady_objects: int = 50000
    steady_propagated: int = 2000
    quiet: float = 60.0
    webhook_requests: int = 1000
    converge_namespaces: int = 2000
    converge_objects: int = 20000
    converge_sources: int = 200
    tree_namespaces: int = 5000
    tree_subtree: int = 500
    admission: tuple[int, ...] = (2000, 10000)
    admission_writes: int = 200
    startup_namespaces: int = 100
    reaction_namespaces: int = 2000
    reaction_changes: int = 60
    quota: tuple[int, ...] = (2000, 10000)
    quota_hrqs: int = 1000
    quota_writes: int = 200
    keeper_namespaces: int = 2000
    keeper_passes: int = 300
    link: tuple[int, ...] = (100, 2000, 10000)
    link_controller: int = 2000
    # Scenario 13 also times the release binary's ``list``; quick mode leaves its build
    # (100 s of CPU) to scenario 11.
    link_binary: bool = True


QUICK = Sizes(
    cli=(200,),
    runs=1,
    fanout=50,
    new_sub_objects=5,
    steady_namespaces=200,
    steady_objects=1000,
    steady_propagated=100,
    quiet=3.0,
    webhook_requests=50,
    converge_namespaces=100,
    converge_objects=400,
    converge_sources=10,
    tree_namespaces=120,
    tree_subtree=30,
    admission=(100,),
    admission_writes=20,
    reaction_namespaces=100,
    reaction_changes=5,
    quota=(300,),
    quota_hrqs=20,
    quota_writes=20,
    keeper_namespaces=300,
    keeper_passes=20,
    link=(50,),
    link_controller=50,
    link_binary=False,
)


def _run(*command: str, env: dict[str, str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {result.stderr}")


def _counted(value: int | None) -> str:
    return "n/a (real cluster)" if value is None else str(value)


def cli_list(target: Target, sizes: Sizes) -> list[Row]:
    """1: ``kubectl accurate list`` (markers drawn: the namespaces LIST and the SubNamespaces
    LIST, sent together) and ``list --no-markers`` (one LIST) against ``kubectl get ns -o
    name``, runs interleaved, on trees whose sub-namespaces SubNamespaces made."""
    rows = []
    env = environment(
        KUBECONFIG=str(target.kubeconfig),
        KUBECACHEDIR=str(target.scratch("kubectl-")),
    )
    theirs: tuple[str, ...] = ("kubectl", "get", "ns", "-o", "name")
    ours: tuple[str, ...] = ("kubectl", "accurate", "list")
    plain = (*ours, "--no-markers")
    for size in sizes.cli:
        target.fresh()
        population.forest(target, max(1, size // NAMESPACES_PER_ROOT), size, subnamespaces=True)
        _run(*theirs, env=env)  # discovery caches warm for all three
        _run(*ours, env=env)
        name = f"1 CLI list, {size} ns"
        for label, command, wanted in (("list", ours, 2), ("list --no-markers", plain, 1)):
            target.start_counting()
            _run(*command, env=env)
            lists = target.count(CLI_AGENT, frozenset({"list"}))
            requests = target.count(CLI_AGENT, ALL_VERBS)
            rows += [
                Row(
                    name,
                    f"{label}: LIST requests",
                    _counted(lists),
                    str(wanted),
                    _is(lists, wanted),
                    checked=True,
                ),
                Row(name, f"{label}: requests in all", _counted(requests)),
            ]
        times: dict[tuple[str, ...], list[float]] = {theirs: [], ours: [], plain: []}
        for _ in range(sizes.runs):
            for command, taken in times.items():
                taken.append(timed(functools.partial(_run, *command, env=env)))
        kubectl = median(times[theirs])
        rows.append(Row(name, "kubectl get ns -o name (median)", seconds(kubectl)))
        for label, command in (("kubectl accurate list", ours), ("list --no-markers", plain)):
            ratio = median(times[command]) / kubectl
            rows += [
                Row(name, f"{label} (median)", seconds(median(times[command]))),
                Row(name, f"{label}: ratio", f"{ratio:.2f}", "<= 1.2", ratio <= 1.2),
            ]
    return rows


def _is(value: int | None, wanted: int) -> bool | None:
    return None if value is None else value == wanted


def _holding(name: str, value: str) -> Callable[[Mapping[str, Any]], bool]:
    """Objects called ``name`` that hold ``value``."""

    def holds(obj: Mapping[str, Any]) -> bool:
        return bool(
            obj["metadata"]["name"] == name and (secret_data(obj) or {}).get("value") == value
        )

    return holds


def _wait_for_copies(kube: Kube, name: str, value: str, copies: int) -> None:
    selector = {"fieldSelector": f"metadata.name={name}"}
    watch_until(kube, secrets_path(), _holding(name, value), copies, CONVERGE_TIMEOUT, **selector)


def fanout(target: Target, sizes: Sizes) -> list[Row]:
    """2: one update-mode Secret changed in a root of ``fanout`` descendants, against the
    same number of writes sent by a plain script with the controller's client and concurrency.
    The controller runs without its client-side rate limit (``--apiserver-qps-throttle 0``,
    the default), so that both are bounded by the server; one more change with a limit of 50
    requests a second (the Go default before 2026-04) shows what that limit costs."""
    target.fresh()
    trees = population.forest(target, 1, sizes.fanout + 1)
    (root, descendants), *_ = trees.items()
    kube = target.kube()

    def put(namespace: str, value: str) -> None:
        kube.replace(
            secrets_path(namespace, "plain"),
            secret(namespace, "plain", None, {"value": value}),
        )

    population.in_parallel(
        lambda ns: kube.create(secrets_path(ns), secret(ns, "plain", None, {"value": "0"})),
        ((ns,) for ns in descendants),
    )

    def script(value: str) -> float:
        return timed(lambda: population.in_parallel(put, ((ns, value) for ns in descendants)))

    plain = median([script(str(run)) for run in range(1, sizes.runs + 1)])
    kube.create(secrets_path(root), secret(root, "fan", "update", {"value": "0"}))
    copies = len(descendants) + 1
    running = controller.start(target, "--apiserver-qps-throttle", "0")
    _wait_for_copies(kube, "fan", "0", copies)
    _settle(running)
    target.start_counting()
    fan = median([_change(kube, running, root, f"v{run}", copies) for run in range(sizes.runs)])
    writes = target.writes(controller.AGENT)
    running.stop()
    throttled = controller.start(target, *LIMITED)
    limited = _change(kube, throttled, root, "limited", copies)
    throttled.stop()
    floor = Throttle.for_qps(GO_QPS).least_time(len(descendants))
    name = f"2 fan-out, {len(descendants)} ns"
    expected = str(len(descendants) * sizes.runs)
    return [
        Row(name, f"plain script, {population.WRITERS} writers (median)", seconds(plain)),
        Row(
            name,
            "controller, no client-side limit: change to all copies current (median)",
            seconds(fan),
        ),
        Row(name, "ratio", f"{fan / plain:.2f}", "<= 1.5", fan / plain <= 1.5),
        Row(name, f"controller writes for {sizes.runs} changes", _counted(writes), expected),
        Row(
            name,
            f"controller at {GO_QPS} requests/s for each kind",
            seconds(limited),
            f"the limit's floor: {seconds(floor)}",
        ),
    ]


def _change(kube: Kube, running: Any, root: str, value: str, copies: int) -> float:
    """Once the controller has nothing left to do, change the source to ``value``: the time
    until every copy holds it."""
    _settle(running)
    started = time.monotonic()
    kube.replace(secrets_path(root, "fan"), secret(root, "fan", "update", {"value": value}))
    _wait_for_copies(kube, "fan", value, copies)
    return time.monotonic() - started


def new_subnamespace(target: Target, sizes: Sizes) -> list[Row]:
    """3: SubNamespace created under a root holding propagated objects: time to Ready, and the
    writes the controller sends for it until it is quiet again (issues 19 and 30: at most one
    per copy and 3 more: the namespace's apply, the NamespaceCreated Event, the status). It is
    created with the finalizer, as the mutating webhook leaves it: the benchmark runs no
    webhook."""
    target.fresh()
    kube = target.kube()
    (root,) = population.forest(target, 1, 1)
    for index in range(sizes.new_sub_objects):
        kube.create(secrets_path(root), secret(root, f"s{index}", "update", {"value": "x"}))
    running = controller.start(target)
    _settle(running)
    subs = resource_path(GROUP, "v2", SUBNAMESPACE_PLURAL, root)
    times, writes = [], []
    for run in range(sizes.runs):
        name = target.name(f"sub{run}")
        metadata = {"name": name, "finalizers": [FINALIZER]}
        body = {"apiVersion": f"{GROUP}/v2", "kind": "SubNamespace", "metadata": metadata}
        target.start_counting()
        started = time.monotonic()
        kube.create(subs, body)
        watch_until(kube, subs, _ready(root, name), 1, CONVERGE_TIMEOUT)
        times.append(time.monotonic() - started)
        target.on_cleanup(functools.partial(kube.delete, f"{subs}/{name}"), removes=True)
        _settle(running)
        writes.append(target.writes(controller.AGENT))
    in_memory = target.server is not None
    took = median(times)
    most = None if None in writes else max(w for w in writes if w is not None)
    budget = sizes.new_sub_objects + 3
    name = f"3 new SubNamespace, {sizes.new_sub_objects} objects"
    return [
        Row(
            name,
            "time to Ready (median)",
            seconds(took),
            "< 1 s (in memory)",
            took < 1.0 if in_memory else None,
        ),
        Row(
            name,
            f"writes until quiet (most of {sizes.runs})",
            _counted(most),
            f"<= {budget}",
            None if most is None else most <= budget,
            checked=True,
        ),
    ]


def converge(target: Target, sizes: Sizes) -> list[Row]:
    """8: a controller meeting a populated cluster (issues 19 and 31), without a client-side
    limit (the default) and with the Go controller's old default of 50 requests a second for
    each kind."""
    return [*_converge(target, sizes, ()), *_converge(target, sizes, LIMITED)]


def _converge(target: Target, sizes: Sizes, flags: Sequence[str]) -> list[Row]:
    """Trees of 50 namespaces with a SubNamespace for each sub-namespace, as the Go Accurate
    leaves them, objects nothing propagates, and update-mode sources in every root, half of
    them Secrets and half ConfigMaps (a limit holds per kind), each copied to every namespace
    of its tree. The time until every copy is there, the writes until the controller is
    quiet against copies + 2 per sub-namespace (its metadata and its status), and the
    controller's peak memory."""
    target.fresh()
    roots = max(1, sizes.converge_namespaces // NAMESPACES_PER_ROOT)
    trees = population.forest(target, roots, sizes.converge_namespaces, subnamespaces=True)
    kube = target.kube()
    per_root = max(1, sizes.converge_sources // roots)
    # The kinds alternate over all sources, not within each root: 100 of each for 200.
    placed = [(root, index) for root in trees for index in range(per_root)]
    sources = [(root, index, _SOURCE_KINDS[n % 2]) for n, (root, index) in enumerate(placed)]
    population.in_parallel(
        lambda root, index, plural: kube.create(
            resource_path("", "v1", plural, root), _source(root, index, plural)
        ),
        sources,
    )
    namespaces = [ns for root, tree in trees.items() for ns in (root, *tree)]
    population.configmaps(target, namespaces, sizes.converge_objects)
    below = sum(len(tree) for tree in trees.values())
    copies = per_root * below
    target.start_counting()
    started = time.monotonic()
    running = controller.start(target, *flags)
    for plural in _SOURCE_KINDS:
        made = sum(1 for _, _, kind in sources if kind == plural) * (below // roots + 1)
        watch_until(
            kube,
            resource_path("", "v1", plural),
            lambda obj: obj["metadata"]["name"].startswith("source-"),
            made,
            CONVERGE_TIMEOUT,
        )
    present = time.monotonic() - started
    watch_until(kube, subnamespaces.path(), _synced, below, CONVERGE_TIMEOUT)
    ready = time.monotonic() - started
    _settle(running)
    quiet = time.monotonic() - started
    paths = target.write_paths(controller.AGENT)
    rss = controller.peak_rss_mib(running)
    running.stop()
    budget = copies + 2 * below
    limit = " ".join(flags) or "no client-side limit"
    scale = f"{len(namespaces)} ns, {sizes.converge_objects} objects, {copies} copies"
    name = f"8 converge, {scale}, {limit}"
    rows = [
        Row(name, "start to every copy present", seconds(present), GO_CONVERGE),
        Row(name, "start to every SubNamespace Ready", seconds(ready)),
        Row(name, "start to quiet (3 s without a log line)", seconds(quiet)),
        Row(
            name,
            "writes until quiet",
            _counted(None if paths is None else len(paths)),
            f"<= {budget} ({GO_WRITES})",
            None if paths is None else len(paths) <= budget,
            checked=True,
        ),
        Row(
            name, "controller peak RSS", f"{rss:.0f} MiB", "< 170 MiB (Go: 337-344 MiB)", rss < 170
        ),
    ]
    for kind, count in sorted(Counter(_write_kind(path) for path in paths or ()).items()):
        rows.append(Row(name, f"of which {kind}", str(count)))
    return rows


# The kinds the converge sources are of, alternately; both are watched (bench.controller).
_SOURCE_KINDS = ("secrets", "configmaps")


def _synced(sub: Mapping[str, Any]) -> bool:
    """Whether a SubNamespace says Ready: its namespace has all it should."""
    return ready_reason(sub) == REASON_SYNCED


def _source(root: str, index: int, plural: str) -> dict[str, Any]:
    """Update-mode source ``source-<index>`` of kind ``plural`` in ``root``."""
    made = secret(root, f"source-{index}", "update", {"value": "0"})
    if plural == "secrets":
        return made
    return {**made, "kind": "ConfigMap", "data": {"value": "0"}}


def _write_kind(path: str) -> str:
    """What a controller write at ``path`` changed, for the breakdown of a count."""
    parts = path.strip("/").split("/")
    if "events" in parts:
        return "events"
    if parts[-1] == "status":
        return "SubNamespace statuses"
    if SUBNAMESPACE_PLURAL in parts:
        return "SubNamespaces"
    if parts[:3] == ["api", "v1", "namespaces"] and len(parts) <= 4:
        return "namespaces"
    return "copies"


def _ready(namespace: str, name: str) -> Callable[[Mapping[str, Any]], bool]:
    def holds(obj: Mapping[str, Any]) -> bool:
        meta = obj["metadata"]
        if (meta.get("namespace"), meta["name"]) != (namespace, name):
            return False
        conditions = (obj.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    return holds


def steady_state(target: Target, sizes: Sizes) -> list[Row]:
    """4, 5, 6 and 7 on one cluster: quiet controller, its memory, a restart, its webhooks."""
    target.fresh()
    roots = max(1, sizes.steady_namespaces // NAMESPACES_PER_ROOT)
    trees = population.forest(target, roots, sizes.steady_namespaces)
    kube = target.kube()
    sources = [root for root in trees][: max(1, sizes.steady_propagated // NAMESPACES_PER_ROOT)]
    for root in sources:
        kube.create(secrets_path(root), secret(root, "shared", "update", {"value": "0"}))
    namespaces = [ns for root, tree in trees.items() for ns in (root, *tree)]
    propagated = len(sources) + sum(len(trees[root]) for root in sources)
    population.configmaps(target, namespaces, max(0, sizes.steady_objects - propagated))
    objects = max(sizes.steady_objects, propagated)
    running = controller.start(target)
    _wait_for_copies(kube, "shared", "0", propagated)
    _settle(running)
    scale = f"{len(namespaces)} ns, {objects} objects, {propagated} propagated"
    rows = _quiet(target, running, sizes.quiet, f"4 steady, {scale}")
    rss = controller.peak_rss_mib(running)
    rows.append(
        Row(
            f"5 memory, {scale}",
            "controller peak RSS",
            f"{rss:.0f} MiB",
            "< 150 MB",
            rss * 1.048576 < 150,
        )
    )
    running.stop()
    rows += _restart(
        target, sizes, f"6 restart, {scale}", f"7 webhook, {len(namespaces)} ns", namespaces
    )
    return rows


def _settle(running: Any, still: float = 3.0) -> None:
    """Until the controller has finished a pass and then logged nothing for ``still``
    seconds: a pass logs each action it applies as it goes and ends with "reconcile pass
    done" (a pass with nothing to do logs nothing), so a silent log that does not end on an
    action means no pass is at work. (The pass counter only moves when a pass ends.)"""
    controller.wait_for_pass(running)
    deadline = time.monotonic() + CONVERGE_TIMEOUT
    last: list[Any] = []
    since = time.monotonic()
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError("the controller never settled")
        records = running.records()
        if len(records) != len(last):
            last, since = records, time.monotonic()
        mid_pass = bool(last) and last[-1].get("msg") in ACTION_RECORDS
        if not mid_pass and time.monotonic() - since >= still:
            return
        time.sleep(0.2)


def _quiet(target: Target, running: Any, quiet: float, name: str) -> list[Row]:
    """Nothing changes for ``quiet`` seconds (the window itself is the measurement)."""
    target.start_counting()
    cpu = controller.cpu_seconds(running)
    time.sleep(quiet)
    share = (controller.cpu_seconds(running) - cpu) / quiet * 100
    lists = target.count(controller.AGENT, frozenset({"list"}))
    writes = target.writes(controller.AGENT)
    requests = target.count(controller.AGENT, ALL_VERBS)
    return [
        Row(
            name,
            f"LIST requests in {quiet:.0f} s",
            _counted(lists),
            "0",
            _is(lists, 0),
            checked=True,
        ),
        Row(name, f"writes in {quiet:.0f} s", _counted(writes), "0", _is(writes, 0), checked=True),
        Row(name, f"requests in all in {quiet:.0f} s", _counted(requests)),
        Row(name, "controller CPU", f"{share:.2f} % of a core", "< 2 %", share < 2),
    ]


def _restart(
    target: Target, sizes: Sizes, name: str, webhook_name: str, namespaces: Sequence[str]
) -> list[Row]:
    """6: new controllers (serving webhooks), one after the other, on the converged cluster;
    then 7 against the last one."""
    ca = trustme.CA()
    cert_dir = target.scratch("certs-")
    write_serving_pair(ca, cert_dir)
    target.start_counting()
    times = []
    for _ in range(sizes.runs):
        port = free_port()
        started = time.monotonic()
        running = controller.start(
            target, "--webhook-addr", f"127.0.0.1:{port}", "--cert-dir", str(cert_dir)
        )
        controller.wait_for_pass(running)
        times.append(time.monotonic() - started)
        if len(times) < sizes.runs:
            running.stop()
    took = median(times)
    writes = target.writes(controller.AGENT)
    rows = [
        Row(
            name,
            f"start to first pass done (median of {sizes.runs})",
            seconds(took),
            "< 10 s",
            took < 10,
        ),
        Row(name, "writes", _counted(writes), "0", _is(writes, 0), checked=True),
    ]
    rows += _webhooks(ca, port, sizes.webhook_requests, webhook_name, namespaces)
    running.stop()
    return rows


def _webhooks(
    ca: trustme.CA, port: int, requests: int, name: str, namespaces: Sequence[str]
) -> list[Row]:
    """7: admission reviews sent straight to the webhook server over one kept-alive
    connection, as kube-apiserver sends them; latency seen by the caller."""
    context = ssl.create_default_context()
    ca.configure_trust(context)
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context)
    parent = namespaces[-1]
    namespace = {"apiVersion": "v1", "kind": "Namespace"}
    subnamespace = {"apiVersion": f"{GROUP}/v2", "kind": "SubNamespace"}
    reviews = [
        (
            "namespace CREATE",
            [VALIDATE_NAMESPACE_PATH],
            ("", "v1", "Namespace"),
            {**namespace, "metadata": {"name": "new", "labels": {LABEL_PARENT: parent}}},
        ),
        (
            "SubNamespace CREATE (mutate + validate)",
            [MUTATE_SUBNAMESPACE_PATH, VALIDATE_SUBNAMESPACE_PATH],
            (GROUP, "v2", "SubNamespace"),
            {**subnamespace, "metadata": {"name": "new", "namespace": parent}},
        ),
    ]
    rows = []
    for figure, paths, kind, obj in reviews:
        latencies = [
            _review(connection, path, kind, obj) for _ in range(requests) for path in paths
        ]
        p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
        rows += [
            Row(name, f"{figure} p50", f"{p50 * 1000:.2f} ms"),
            Row(name, f"{figure} p99", f"{p99 * 1000:.2f} ms", "< 10 ms", p99 < 0.01),
        ]
    connection.close()
    return rows


def _review(
    connection: http.client.HTTPSConnection,
    path: str,
    kind: tuple[str, str, str],
    obj: dict[str, Any],
) -> float:
    group, version, kind_name = kind
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": group, "version": version, "kind": kind_name},
            "operation": "CREATE",
            "namespace": obj["metadata"].get("namespace", ""),
            "object": obj,
        },
    }
    payload = json.dumps(body).encode()
    started = time.perf_counter()
    connection.request("POST", path, payload, {"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = response.read()
    took = time.perf_counter() - started
    if response.status != 200 or "response" not in json.loads(answer):
        raise RuntimeError(f"{path}: {response.status} {answer[:200]!r}")
    return took


TREE_LABEL_SUFFIX = "tree.accurate.cybozu.com"
DEEPEST_TREE = 6


def tree_labels(target: Target, sizes: Sizes) -> list[Row]:
    """9: tree labels (issue 14) on trees of depth up to 6: once every namespace carries them,
    a quiet controller sends nothing; grafting a whole tree of ``tree_subtree`` namespaces
    under another root rewrites exactly the namespaces whose labels change, once each."""
    target.fresh()
    roots = max(2, sizes.tree_namespaces // sizes.tree_subtree)
    trees = population.forest(target, roots, sizes.tree_namespaces, deepest=DEEPEST_TREE)
    kube = target.kube()
    settings = {**controller.CONFIG, "treeLabels": {"suffix": TREE_LABEL_SUFFIX}}
    running = controller.start(target, "--apiserver-qps-throttle", "0", settings=settings)
    _settle(running)
    scale = f"{sum(len(tree) + 1 for tree in trees.values())} ns, depth <= {DEEPEST_TREE}"
    rows = _quiet(target, running, sizes.quiet, f"9 tree labels, {scale}")
    moved, host = list(trees)[:2]
    target.start_counting()
    kube.patch(
        resource_path("", "v1", "namespaces", name=moved),
        {"metadata": {"labels": {LABEL_TYPE: None, LABEL_PARENT: host}}},
    )
    below = trees[moved][-1]
    wait_for(
        lambda: f"{host}.{TREE_LABEL_SUFFIX}/depth" in _labels(kube, below),
        CONVERGE_TIMEOUT,
        "the moved tree's labels",
    )
    _settle(running)
    paths = target.write_paths(controller.AGENT)
    running.stop()
    expected = {moved, *trees[moved]}
    written = None if paths is None else [path.rsplit("/", 1)[-1] for path in paths]
    rows.append(
        Row(
            f"9 tree labels, a tree of {len(expected)} grafted under another root",
            "writes for the move",
            _counted(None if written is None else len(written)),
            f"{len(expected)}, one per moved namespace",
            None if written is None else sorted(written) == sorted(expected),
            checked=True,
        )
    )
    return rows


def _labels(kube: Kube, namespace: str) -> Mapping[str, str]:
    found = kube.get(resource_path("", "v1", "namespaces", name=namespace))
    return (found.get("metadata") or {}).get("labels") or {}


SCENARIOS: dict[str, Callable[[Target, Sizes], list[Row]]] = {
    "cli": cli_list,
    "fanout": fanout,
    "subnamespace": new_subnamespace,
    "steady": steady_state,
    "converge": converge,
    "treelabels": tree_labels,
    "admission": lambda target, sizes: admission(target, sizes.admission, sizes.admission_writes),
    "startup": startup,
    "reaction": lambda target, sizes: reaction(
        target, sizes.reaction_namespaces, sizes.reaction_changes
    ),
    "longpass": lambda target, sizes: [
        *long_pass(target, sizes.reaction_namespaces, ()),
        *long_pass(target, sizes.reaction_namespaces, LIMITED),
    ],
    "quota": lambda target, sizes: quota_admission(
        target, sizes.quota, sizes.quota_hrqs, sizes.quota_writes
    ),
    "network": network,
    "keeper": lambda target, sizes: keeper_passes(
        target, sizes.keeper_namespaces, sizes.quota_hrqs, sizes.keeper_passes
    ),
}
