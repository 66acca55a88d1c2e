"""Run ``accurate-controller`` the way an operator does, as a process with its real flags, against
the test cluster, and set up what its end-to-end tests need.

tests/conftest.py registers these fixtures for every test:

- ``controllers``: starts controller processes (``start``) or runs one to its exit (``run``);
  every process still running is stopped with SIGTERM after the test;
- ``shared_controller``: ``shared_controller(config, *flags)`` makes sure a controller with that
  config and those flags runs, keeping the one an earlier test of the module started
  (SharedController);
- ``scene``: namespaces and SubNamespaces with names unique to the test, the namespaces with the
  test's labels. The controllers started here pass those labels on to the namespaces they make
  (their config's ``labelKeys`` gets them), so the run's webhooks serve those too and the end of
  the test removes them with the rest (accurate_testbed.leftovers).

The controller's log goes to a file; it is printed when the controller is stopped, so that a
failing test shows it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from accurate_testbed.cluster import SUITE_LABEL_KEYS, Cluster
from accurate_testbed.objects import namespace_manifest
from accurate_testbed.processes import Process, environment, launch
from accurate_testbed.waiting import wait_for
from libaccurate import subnamespaces
from libaccurate.constants import ANNOTATION_FROM, LABEL_TYPE, TYPE_ROOT
from libaccurate.network.kube import Kube, resource_path
from libaccurate.subnamespaces import path as subnamespaces_path
from tests.e2e.tally import CONTROLLERS, DELETIONS, count
from tests.e2e.webhooks import connect, kubectl

SCRIPTS = Path(sys.executable).parent
PROGRAM = SCRIPTS / "accurate-controller"
NAMESPACES = resource_path("", "v1", "namespaces")
# A config that propagates Secrets and nothing else.
SECRETS: dict[str, Any] = {"watches": [{"version": "v1", "kind": "Secret"}]}
# Generous: a real cluster, or two cores shared with other tests, may be slow.
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
CONVERGE = 30.0
# Quick settings for tests: passes and leases measured in seconds, not minutes.
FAST = ("--resync-period", "2s")
FAST_LEASE = (
    "--leader-election-lease-duration",
    "3s",
    "--leader-election-renew-deadline",
    "2s",
    "--leader-election-retry-period",
    "0.5s",
)


class Controllers:
    """Starts controllers against ``cluster`` with a config file of the test's choice; a
    controller some earlier test shared (``pool``) stops first, as two would fight."""

    def __init__(
        self, cluster: Cluster, folder: Path, pool: SharedController | None = None
    ) -> None:
        self.cluster = cluster
        self.folder = folder
        self.pool = pool
        self.started: list[Process] = []

    def config_file(self, document: Mapping[str, Any] | str) -> Path:
        path = self.folder / f"config-{uuid.uuid4().hex[:6]}.yaml"
        text = document if isinstance(document, str) else yaml.safe_dump(dict(document))
        path.write_text(text)
        return path

    def arguments(self, config: Mapping[str, Any] | str, *extra: str) -> list[str]:
        return [
            str(PROGRAM),
            "--kubeconfig",
            str(self.cluster.kubeconfig),
            "--config-file",
            str(self.config_file(config)),
            *extra,
        ]

    def start(
        self,
        config: Mapping[str, Any] | str = "",
        *extra: str,
        lease_namespace: str | None = None,
        wait: bool = True,
    ) -> Process:
        """A controller with ``config`` and flags ``extra`` (fast resyncs by default), leader
        election only when ``lease_namespace`` is given; waits until it is ready."""
        if self.pool is not None:
            self.pool.stop()
        flags = [*FAST, *(FAST_LEASE if lease_namespace else ("--no-leader-election",)), *extra]
        log = self.folder / f"controller-{len(self.started)}.log"
        env = environment(**({"POD_NAMESPACE": lease_namespace} if lease_namespace else {}))
        running = launch(self.arguments(passing_on_suite_labels(config)), flags, log, env)
        count(CONTROLLERS)
        process = running.process
        self.started.append(running)
        if wait:

            def ready() -> bool:
                if process.poll() is not None:
                    raise AssertionError(f"the controller exited:\n{running.output()}")
                return running.ready()

            wait_for(ready, READY_TIMEOUT, "the controller to be ready")
        return running

    def run(
        self, config: Mapping[str, Any] | str, *extra: str, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a controller expected to stop by itself (a startup failure)."""
        count(CONTROLLERS)
        return subprocess.run(
            self.arguments(config, *extra),
            env=environment(**(env or {})),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def stop_all(self) -> None:
        """Stop every controller, after taking away the webhook configurations that may point
        at one of them."""
        self.cluster.withdraw_webhooks()
        for running in self.started:
            if running.process.poll() is None:
                running.stop()
        self.show_logs()

    def show_logs(self) -> None:
        """Print the controllers' logs, which pytest shows when the test failed."""
        for running in self.started:
            print(f"--- {running.log.name} ---\n{running.output()}")


class SharedController:
    """One controller, kept running from one test to the next while they ask for the same
    config and flags: a real cluster takes seconds to start one, a test machine's cores a second
    or two of work, and most tests only need one to be there. A test that shares it must not
    depend on it being new (its metrics and log hold earlier tests' work too). The
    ``shared_controller`` fixture hands it out; it stops when a test starts a controller of its
    own, and at the end of each module."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.wanted: tuple[Mapping[str, Any] | str, tuple[str, ...]] | None = None
        self.running: Controllers | None = None

    def start(
        self, cluster: Cluster, config: Mapping[str, Any] | str = "", *flags: str
    ) -> Controllers:
        """The running controller's starter if it has ``config`` and ``flags``, else a new
        one's."""
        wanted = (config, flags)
        if self.running is None or self.wanted != wanted or not self._alive(self.running):
            self.stop()
            self.running = Controllers(cluster, self.folder)
            self.running.start(config, *flags)
            self.wanted = wanted
        return self.running

    def stop(self) -> None:
        if self.running is not None:
            for process in self.running.started:
                process.stop()
            self.running, self.wanted = None, None

    @staticmethod
    def _alive(running: Controllers) -> bool:
        return all(process.process.poll() is None for process in running.started)


def passing_on_suite_labels(config: Mapping[str, Any] | str) -> Mapping[str, Any] | str:
    """``config`` with the test suite's labels among the ``labelKeys``, so the namespaces the
    controller makes are the test's own too; a config that is no mapping is left as it is."""
    document = yaml.safe_load(config) if isinstance(config, str) else dict(config)
    if document is None:
        document = {}
    if not isinstance(document, dict):
        return config
    keys = list(document.get("labelKeys") or [])
    return {**document, "labelKeys": [*keys, SUITE_LABEL_KEYS]}


@pytest.fixture(scope="session")
def _controller_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedController]:
    pool = SharedController(tmp_path_factory.mktemp("shared-controller"))
    try:
        yield pool
    finally:
        pool.stop()


@pytest.fixture(scope="module")
def _module_controller(_controller_pool: SharedController) -> Iterator[SharedController]:
    """The shared controller, stopped at the end of the module: tests elsewhere may expect no
    controller at all."""
    try:
        yield _controller_pool
    finally:
        _controller_pool.stop()


@pytest.fixture
def controllers(
    cluster: Cluster, subnamespace_crd: None, tmp_path: Path, _controller_pool: SharedController
) -> Iterator[Controllers]:
    started = Controllers(cluster, tmp_path, _controller_pool)
    try:
        yield started
    finally:
        started.stop_all()


@pytest.fixture
def shared_controller(
    cluster: Cluster, subnamespace_crd: None, _module_controller: SharedController
) -> Iterator[Callable[..., Process]]:
    """``shared_controller(config, *flags)``: make sure a controller with ``config`` and
    ``flags`` (after the default ones) runs, started anew only when the last one had another
    config or other flags (see SharedController)."""
    used: list[Controllers] = []

    def start(config: Mapping[str, Any] | str = "", *flags: str) -> Process:
        used.append(_module_controller.start(cluster, config, *flags))
        return used[-1].started[0]

    yield start
    for running in used:
        running.show_logs()


class Scene:
    """Names unique to one test (one shared suffix), and what the test builds with them."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.kube: Kube = connect(cluster)
        self.suffix = uuid.uuid4().hex[:6]

    def name(self, prefix: str) -> str:
        return f"{prefix}-{self.suffix}"

    def kubectl(self, *args: str, stdin: Any = None) -> str:
        """Run kubectl as a user would; its output, or an AssertionError with its errors."""
        result = kubectl(self.cluster, *args, stdin=stdin)
        assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
        return result.stdout

    def apply(self, *manifests: Mapping[str, Any]) -> None:
        """``kubectl apply -f`` of a YAML file holding ``manifests``."""
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as file:
            yaml.safe_dump_all([dict(m) for m in manifests], file)
            file.flush()
            self.kubectl("apply", "-f", file.name)

    def namespace(self, prefix: str, labels: Mapping[str, str] | None = None) -> str:
        name = self.name(prefix)
        manifest = namespace_manifest(name, self.cluster.own(labels))
        self.kubectl("apply", "-f", "-", stdin=manifest)
        return name

    def root(self, prefix: str = "root", labels: Mapping[str, str] | None = None) -> str:
        return self.namespace(prefix, {LABEL_TYPE: TYPE_ROOT, **(labels or {})})

    def subnamespace(
        self,
        parent: str,
        prefix: str,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> str:
        """Ask for a sub-namespace with ``kubectl apply``; its name."""
        name = self.name(prefix)
        manifest = {
            "apiVersion": subnamespaces.api_version(),
            "kind": "SubNamespace",
            "metadata": {"name": name, "namespace": parent},
            "spec": {"labels": dict(labels or {}), "annotations": dict(annotations or {})},
        }
        self.kubectl("apply", "-f", "-", stdin=manifest)
        return name

    def chain(self, top: str, *prefixes: str) -> list[str]:
        """Sub-namespaces one below the other under ``top``, each Ready before the next is
        asked for; their names, the one under ``top`` first."""
        names = [top]
        for prefix in prefixes:
            names.append(self.subnamespace(names[-1], prefix))
            self.settle(names[-2], names[-1])
        return names[1:]

    def get(self, path: str) -> dict[str, Any] | None:
        return self.kube.find(path)

    def ns(self, name: str) -> dict[str, Any] | None:
        return self.get(resource_path("", "v1", "namespaces", name=name))

    def labels(self, name: str) -> dict[str, str]:
        found = self.ns(name) or {}
        return dict((found.get("metadata") or {}).get("labels") or {})

    def annotations(self, name: str) -> dict[str, str]:
        found = self.ns(name) or {}
        return dict((found.get("metadata") or {}).get("annotations") or {})

    def sub(self, parent: str, name: str) -> dict[str, Any] | None:
        return self.get(subnamespaces_path(parent, name))

    def condition(self, parent: str, name: str, type_: str) -> dict[str, Any] | None:
        found = self.sub(parent, name) or {}
        conditions = (found.get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c.get("type") == type_), None)

    def copies(self, namespace: str, source: str) -> int:
        """How many Secrets in ``namespace`` were copied from ``source``."""
        found = self.kube.list_objects(resource_path("", "v1", "secrets", namespace))
        return sum(
            1
            for item in found.get("items") or ()
            if (item["metadata"].get("annotations") or {}).get(ANNOTATION_FROM) == source
        )

    def wait(self, condition: Any, what: str, timeout: float = CONVERGE) -> Any:
        return wait_for(condition, timeout, what)

    def delete_namespace(self, name: str) -> None:
        """``kubectl delete namespace``, which waits until it is gone: seconds on a real cluster,
        so only for tests about deletion."""
        count(DELETIONS)
        self.kubectl("delete", "namespace", name)

    def wait_gone(self, name: str) -> None:
        """Wait until namespace ``name`` is gone (see ``delete_namespace``)."""
        count(DELETIONS)
        self.wait(lambda: self.ns(name) is None, f"namespace {name} to go")

    def ready(self, parent: str, name: str) -> bool:
        return (self.condition(parent, name, "Ready") or {}).get("status") == "True"

    def settle(self, parent: str, name: str) -> None:
        """Wait until SubNamespace ``parent/name`` is Ready."""
        self.wait(lambda: self.ready(parent, name), f"SubNamespace {parent}/{name} to be Ready")


@pytest.fixture
def scene(cluster: Cluster) -> Scene:
    return Scene(cluster)
