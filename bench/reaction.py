"""14 and 15: how soon the controller answers a change (issue 31), through the API server.

Each change is sent by a client and its effect seen through a watch kept open on a thread of
its own (``Stamps``), so a figure runs from the client's request to the controller's first
write for it as the API server publishes it: the request, the event reaching the controller,
its pass and its write, and that write's event reaching the watch. That is more than the Go
figure of issue 31 measures, never less. So 14 also takes that figure as it was taken, off the
API server's audit log (``bench.audit``): from the client's request received to the
controller's first write for it received (for the Go controller, 4-10 ms between the DELETE and
the finalizer's removal). The in-memory API server runs in a process of its own here, as a real
one does (see ``Target.apart``); a real cluster's audit log is out of reach, and those rows read
n/a there.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accurate_testbed.objects import secret
from bench import controller, population
from bench.audit import Reaction, Wanted, measure
from bench.report import Row, percentile, seconds
from bench.target import CLIENT_AGENT, Target
from libaccurate import subnamespaces
from libaccurate.constants import (
    CONDITION_READY,
    FINALIZER,
    LABEL_PARENT,
    SUBNAMESPACE_KIND,
    SUBNAMESPACE_PLURAL,
)
from libaccurate.network.kube import ApiError, Kube, KubeError, resource_path

NAMESPACES_PER_ROOT = 50
TIMEOUT = 120.0
# Go Accurate v0.4.0 on a real API server (issue 31): the old SubNamespace's finalizer removed
# 4 to 10 ms after its DELETE. The goal for every figure here: p50 and p99.
GOAL_P50 = 0.010
GOAL_P99 = 0.050
# A pause after each change's effect, so that the next one meets an idle controller.
IDLE = 0.3
# The figures, as a watch sees the effects and as the audit log has the requests.
SEEN_CREATED = "SubNamespace created -> namespace created"
SEEN_DELETED = "SubNamespace deleted -> namespace deleted"
SEEN_GONE = "SubNamespace deleted -> finalizer removed (gone)"
SEEN_MOVED = "Go plugin's move: old SubNamespace deleted -> gone"
LOGGED_CREATED = "audit log: SubNamespace POST -> namespace created"
LOGGED_DELETED = "audit log: SubNamespace DELETE -> namespace DELETE"
LOGGED_GONE = "audit log: SubNamespace DELETE -> finalizer removal"
LOGGED_MOVED = "audit log: Go plugin's move: DELETE -> finalizer removal"
LOGGED = (LOGGED_CREATED, LOGGED_DELETED, LOGGED_GONE, LOGGED_MOVED)
# The controller creates a namespace by server-side apply (a PATCH answered 201), the Go one
# by a POST: either is its first write of the namespace.
NAMESPACE_WRITES = frozenset({"create", "patch", "update"})
DELETE = frozenset({"delete"})
FINALIZER_WRITES = frozenset({"patch", "update"})
# The controller's lane that plans the whole cluster (controller/metrics.py LANES).
BULK_LANE = "bulk"
TREE_LABEL_SUFFIX = "tree.accurate.cybozu.com"
# What a watch event says about an object: the names of the moments it marks.
Marks = Callable[[str, Mapping[str, Any]], Sequence[str]]
Key = tuple[str, str, str]


class Stamps:
    """When each object at ``path`` first showed each mark, by (mark, namespace, name), as a
    watch on a thread of its own saw it; ``wait`` for one."""

    def __init__(self, kube: Kube, path: str, marks: Marks) -> None:
        self.kube = kube
        self.path = path
        self.marks = marks
        self._seen: dict[Key, float] = {}
        self._changed = threading.Condition()
        self._stop = threading.Event()
        listed = kube.list_objects(path)
        self._version = str(listed["metadata"]["resourceVersion"])
        threading.Thread(target=self._follow, name=f"stamps {path}", daemon=True).start()

    def close(self) -> None:
        self._stop.set()

    def wait(self, mark: str, namespace: str, name: str) -> float:
        """The moment (time.monotonic) the object showed ``mark``, waiting for it if need be."""
        key = (mark, namespace, name)
        with self._changed:
            if not self._changed.wait_for(lambda: key in self._seen, timeout=TIMEOUT):
                raise TimeoutError(f"{self.path}: no {mark} of {namespace}/{name}")
            return self._seen[key]

    def count(self, mark: str) -> int:
        with self._changed:
            return sum(1 for key in self._seen if key[0] == mark)

    def _follow(self) -> None:
        while not self._stop.is_set():
            try:
                for event in self.kube.watch(self.path, self._version, timeout_seconds=60):
                    self._take(event)
                    if self._stop.is_set():
                        return
            except (ApiError, KubeError):
                # Gone too far back, or the server is going away: from now on, if there is one.
                if self._stop.wait(0.1):
                    return
                try:
                    listed = self.kube.list_objects(self.path)
                except KubeError:
                    continue
                self._version = str(listed["metadata"]["resourceVersion"])

    def _take(self, event: Mapping[str, Any]) -> None:
        now = time.monotonic()
        obj = event["object"]
        metadata = obj.get("metadata") or {}
        self._version = str(metadata.get("resourceVersion") or self._version)
        if event["type"] == "BOOKMARK":
            return
        where = (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
        with self._changed:
            for mark in self.marks(event["type"], obj):
                self._seen.setdefault((mark, *where), now)
            self._changed.notify_all()


def _namespace_marks(kind: str, obj: Mapping[str, Any]) -> list[str]:
    marks = ["created"]
    metadata = obj.get("metadata") or {}
    if metadata.get("deletionTimestamp"):
        marks.append("terminating")
    if any(key.endswith(f".{TREE_LABEL_SUFFIX}/depth") for key in metadata.get("labels") or {}):
        marks.append("labelled")
    return marks if kind != "DELETED" else ["gone"]


def _subnamespace_marks(kind: str, obj: Mapping[str, Any]) -> list[str]:
    if kind == "DELETED":
        return ["gone"]
    conditions = (obj.get("status") or {}).get("conditions") or ()
    ready = any(c.get("type") == CONDITION_READY and c.get("status") == "True" for c in conditions)
    return ["ready"] if ready else []


def _new_subnamespace(kube: Kube, parent: str, name: str) -> None:
    """As the mutating webhook leaves it (the benchmark runs none): with the finalizer."""
    body = {
        "apiVersion": subnamespaces.api_version(),
        "kind": SUBNAMESPACE_KIND,
        "metadata": {"name": name, "namespace": parent, "finalizers": [FINALIZER]},
    }
    kube.create(subnamespaces.path(parent), body)


@dataclass
class Measured:
    """Scenario 14's samples by figure, as a watch saw the effects, and the reactions the
    audit log times once the changes are done."""

    seen: dict[str, list[float]] = field(default_factory=dict)
    reactions: list[Reaction] = field(default_factory=list)

    def add(self, figure: str, started: float, effect: float) -> None:
        self.seen.setdefault(figure, []).append(effect - started)


def _asked(verb: str, parent: str, name: str) -> Wanted:
    """The benchmark's own request ``verb`` on SubNamespace ``parent``/``name``."""
    return Wanted(CLIENT_AGENT, frozenset({verb}), (SUBNAMESPACE_PLURAL, parent, name, ""))


def _written(verbs: frozenset[str], resource: str, namespace: str, name: str) -> Wanted:
    """The controller's writes of ``verbs`` on one object (a namespace is "in" itself)."""
    return Wanted(controller.AGENT, verbs, (resource, namespace, name, ""))


def _latencies(rows: list[Row], name: str, figure: str, samples: list[float] | None) -> None:
    """p50 and p99 against the goal; n/a without samples (no audit log on a real cluster)."""
    if samples is None:
        for quantile in ("p50", "p99"):
            rows.append(Row(name, f"{figure} {quantile}", "n/a (real cluster)"))
        return
    p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
    rows += [
        Row(name, f"{figure} p50", f"{p50 * 1000:.1f} ms", "<= 10 ms", p50 <= GOAL_P50),
        Row(name, f"{figure} p99", f"{p99 * 1000:.1f} ms", "<= 50 ms", p99 <= GOAL_P99),
    ]


def reaction(target: Target, size: int, changes: int) -> list[Row]:
    """14: an idle controller on ``size`` namespaces (trees of 50 made by SubNamespaces, one
    update-mode Secret in each root); ``changes`` SubNamespaces created then deleted one at a
    time, and as many moved as the Go plugin moves them (the namespace's parent label
    changed, then the old SubNamespace deleted). Each timed as a watch sees the effect and,
    on the in-memory server, as its audit log has the requests."""
    measured = Measured()
    with target.apart(audit=True) as cluster:
        kube = cluster.kube()
        trees = population.forest(
            cluster, max(1, size // NAMESPACES_PER_ROOT), size, subnamespaces=True
        )
        for root in trees:
            kube.create(population.secrets_path(root), secret(root, "shared", "update", {"v": "x"}))
        running = controller.start(cluster)
        namespaces = Stamps(kube, population.NAMESPACES, _namespace_marks)
        subs = Stamps(kube, subnamespaces.path(), _subnamespace_marks)
        try:
            _wait(lambda: _first_pass_done(running))
            time.sleep(10 * IDLE)
            _create_and_delete(cluster, kube, trees, changes, (namespaces, subs), measured)
            _moves(kube, trees, changes, subs, measured)
            logged = None
            if cluster.audit_log is not None:
                logged = measure(cluster.audit_log, measured.reactions, TIMEOUT)
        finally:
            namespaces.close()
            subs.close()
            running.stop()
    name = f"14 reaction, {size} ns, idle controller"
    rows: list[Row] = []
    for figure, samples in measured.seen.items():
        _latencies(rows, name, figure, samples)
    for figure in LOGGED:
        _latencies(rows, name, figure, None if logged is None else logged.get(figure, []))
    return rows


def _create_and_delete(
    cluster: Target,
    kube: Kube,
    trees: Mapping[str, list[str]],
    changes: int,
    stamps: tuple[Stamps, Stamps],
    measured: Measured,
) -> None:
    """``changes`` SubNamespaces created under random namespaces, then deleted, one at a time;
    ``stamps`` follow namespaces and SubNamespaces."""
    namespaces, subs = stamps
    chooser = random.Random(31)
    parents = [ns for root, tree in trees.items() for ns in (root, *tree)]
    for index in range(changes):
        parent, name = chooser.choice(parents), cluster.name(f"react{index}")
        started = time.monotonic()
        _new_subnamespace(kube, parent, name)
        measured.add(SEEN_CREATED, started, namespaces.wait("created", "", name))
        created = _written(NAMESPACE_WRITES, "namespaces", name, name)
        measured.reactions.append(Reaction(LOGGED_CREATED, _asked("create", parent, name), created))
        subs.wait("ready", parent, name)
        time.sleep(IDLE)
        started = time.monotonic()
        kube.delete(subnamespaces.path(parent, name))
        measured.add(SEEN_DELETED, started, namespaces.wait("terminating", "", name))
        measured.add(SEEN_GONE, started, subs.wait("gone", parent, name))
        deleted = _asked("delete", parent, name)
        terminated = _written(DELETE, "namespaces", name, name)
        released = _written(FINALIZER_WRITES, SUBNAMESPACE_PLURAL, parent, name)
        measured.reactions += [
            Reaction(LOGGED_DELETED, deleted, terminated),
            Reaction(LOGGED_GONE, deleted, released),
        ]
        namespaces.wait("gone", "", name)
        time.sleep(IDLE)


def _moves(
    kube: Kube, trees: Mapping[str, list[str]], changes: int, subs: Stamps, measured: Measured
) -> None:
    """The Go plugin's ``sub move`` of the last sub-namespace of each tree (at most
    ``changes``): the namespace gets another root as parent, then its old SubNamespace is
    deleted, whose finalizer alone the controller then removes."""
    roots = list(trees)
    for index, root in enumerate(roots[:changes]):
        leaf = trees[root][-1]
        path = resource_path("", "v1", "namespaces", name=leaf)
        parent = kube.get(path)["metadata"]["labels"][LABEL_PARENT]
        other = roots[(index + 1) % len(roots)]
        kube.patch(path, {"metadata": {"labels": {LABEL_PARENT: other}}})
        started = time.monotonic()
        kube.delete(subnamespaces.path(parent, leaf))
        measured.add(SEEN_MOVED, started, subs.wait("gone", parent, leaf))
        released = _written(FINALIZER_WRITES, SUBNAMESPACE_PLURAL, parent, leaf)
        measured.reactions.append(Reaction(LOGGED_MOVED, _asked("delete", parent, leaf), released))
        time.sleep(IDLE)


def long_pass(target: Target, size: int, flags: Sequence[str]) -> list[Row]:
    """15: a controller turning tree labels on for ``size`` namespaces (a first pass that
    writes every one of them) with ``flags``; in the middle of that pass a tenant creates a
    SubNamespace. When its namespace is there and Ready, against when the pass is done."""
    with target.apart() as cluster:
        kube = cluster.kube()
        trees = population.forest(
            cluster, max(1, size // NAMESPACES_PER_ROOT), size, subnamespaces=True
        )
        everything = sum(len(tree) + 1 for tree in trees.values())
        namespaces = Stamps(kube, population.NAMESPACES, _namespace_marks)
        subs = Stamps(kube, subnamespaces.path(), _subnamespace_marks)
        settings = {**controller.CONFIG, "treeLabels": {"suffix": TREE_LABEL_SUFFIX}}
        started = time.monotonic()
        running = controller.start(cluster, *flags, settings=settings)
        try:
            _wait(lambda: namespaces.count("labelled") >= min(100, everything // 10))
            parent, name = next(iter(trees)), cluster.name("tenant")
            labelled_then = namespaces.count("labelled")
            asked = time.monotonic()
            _new_subnamespace(kube, parent, name)
            created = namespaces.wait("created", "", name) - asked
            ready = subs.wait("ready", parent, name) - asked
            originals = [name for root, tree in trees.items() for name in (root, *tree)]
            last = max(namespaces.wait("labelled", "", name) for name in originals)
            done, whole = last - asked, last - started
        finally:
            namespaces.close()
            subs.close()
            running.stop()
    limit = " ".join(flags) or "no client-side limit"
    name = f"15 long pass, tree labels on {everything} ns, {limit}"
    return [
        Row(name, "first pass, start to every namespace labelled", seconds(whole)),
        Row(name, "namespaces labelled when the SubNamespace came", str(labelled_then)),
        Row(name, "SubNamespace created -> its namespace created", seconds(created)),
        Row(name, "SubNamespace created -> Ready", seconds(ready)),
        Row(name, "SubNamespace created -> every other namespace labelled", seconds(done)),
        Row(
            name,
            "its namespace created before the others are labelled",
            "yes" if created < done else "no",
            "yes",
            created < done,
        ),
    ]


def _first_pass_done(running: Any) -> bool:
    """Whether the bulk lane's first pass (of the whole cluster) has ended, whatever it did:
    its count of passes goes up as any pass ends (the log says "reconcile pass done" only of
    a pass with writes to make), and the SubNamespace lane's passes are counted apart."""
    return controller.passes(running, BULK_LANE) >= 1


def _wait(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10 * TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the first pass did not get there")
        time.sleep(0.01)
