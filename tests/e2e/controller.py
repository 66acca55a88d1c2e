"""Run ``accurate-controller`` the way an operator does, as a process with its real flags, against
the test cluster, and set up what its end-to-end tests need.

tests/conftest.py registers these fixtures for every test:

- ``controllers``: starts controller processes (``start``) or runs one to its exit (``run``);
  every process still running is stopped with SIGTERM after the test;
- ``scene``: namespaces and SubNamespaces with names unique to the test. On a real cluster its
  cleanup removes everything the test made, also the namespaces the controller made, once the
  controller is gone: it lets go of SubNamespace finalizers nobody would remove any more.

The controller's log goes to a file; it is printed when the controller is stopped, so that a
failing test shows it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from accurate_testbed.cluster import Cluster
from accurate_testbed.objects import namespace_manifest
from accurate_testbed.processes import Process, environment, launch
from accurate_testbed.waiting import wait_for
from libaccurate import subnamespaces
from libaccurate.constants import LABEL_TYPE, TYPE_ROOT
from libaccurate.forest import Forest
from libaccurate.kube import ApiError, Kube, resource_path
from libaccurate.subnamespaces import path as subnamespaces_path
from tests.e2e.webhooks import connect, kubectl

SCRIPTS = Path(sys.executable).parent
PROGRAM = SCRIPTS / "accurate-controller"
NAMESPACES = resource_path("", "v1", "namespaces")
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
    """Starts controllers against ``cluster`` with a config file of the test's choice."""

    def __init__(self, cluster: Cluster, folder: Path) -> None:
        self.cluster = cluster
        self.folder = folder
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
        flags = [*FAST, *(FAST_LEASE if lease_namespace else ("--no-leader-election",)), *extra]
        log = self.folder / f"controller-{len(self.started)}.log"
        env = environment(**({"POD_NAMESPACE": lease_namespace} if lease_namespace else {}))
        running = launch(self.arguments(config), flags, log, env)
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
        return subprocess.run(
            self.arguments(config, *extra),
            env=environment(**(env or {})),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def stop_all(self) -> None:
        for running in self.started:
            if running.process.poll() is None:
                running.stop()
            print(f"--- {running.log.name} ---\n{running.output()}")


@pytest.fixture
def controllers(cluster: Cluster, subnamespace_crd: None, tmp_path: Path) -> Iterator[Controllers]:
    started = Controllers(cluster, tmp_path)
    try:
        yield started
    finally:
        started.stop_all()


class Scene:
    """Names unique to one test (one shared suffix), and what the test builds with them."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.kube: Kube = connect(cluster)
        self.suffix = uuid.uuid4().hex[:6]
        cluster.on_cleanup(self._cleanup)

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
        self.kubectl("apply", "-f", "-", stdin=namespace_manifest(name, labels))
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

    def get(self, path: str) -> dict[str, Any] | None:
        try:
            return self.kube.get(path)
        except ApiError as error:
            if error.not_found:
                return None
            raise

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

    def wait(self, condition: Any, what: str, timeout: float = CONVERGE) -> Any:
        return wait_for(condition, timeout, what)

    def ready(self, parent: str, name: str) -> bool:
        return (self.condition(parent, name, "Ready") or {}).get("status") == "True"

    def settle(self, parent: str, name: str) -> None:
        """Wait until SubNamespace ``parent/name`` is Ready."""
        self.wait(lambda: self.ready(parent, name), f"SubNamespace {parent}/{name} to be Ready")

    def _cleanup(self) -> None:
        """Delete every namespace of the test, deepest first, after letting go of the
        finalizers of SubNamespaces in them (no controller runs any more)."""
        mine = [
            ns
            for ns in self.kube.list_objects(NAMESPACES).get("items") or []
            if ns["metadata"]["name"].endswith(f"-{self.suffix}")
        ]
        for ns in mine:
            for sub in self.kube.list_objects(subnamespaces_path(ns["metadata"]["name"]))["items"]:
                if sub["metadata"].get("finalizers"):
                    path = subnamespaces_path(ns["metadata"]["name"], sub["metadata"]["name"])
                    self.kube.patch(path, {"metadata": {"finalizers": None}})
        for name in reversed(Forest.build(mine).top_down()):
            try:
                self.kube.delete(resource_path("", "v1", "namespaces", name=name))
            except ApiError as error:
                if not (error.not_found or error.code == 409):
                    raise
        paths = [resource_path("", "v1", "namespaces", name=ns["metadata"]["name"]) for ns in mine]
        wait_for(
            lambda: all(self.get(path) is None for path in paths), 120, "the test's namespaces"
        )


@pytest.fixture
def scene(cluster: Cluster) -> Scene:
    return Scene(cluster)
