"""The cluster a test talks to: the in-memory API server, or a real one named by
ACCURATE_TEST_KUBECONFIG, and what the test must clean up there.

Every namespace, webhook configuration and cluster-scoped object (CRD, ClusterRole,
ClusterRoleBinding) a test run makes carries two labels: the run's and the test's
(``Cluster.labels``). The webhooks the run registers only see namespaces with the run's label,
the end of a test removes what carries the test's, and the start of a run removes what an
earlier, interrupted or killed, run left (accurate_testbed.leftovers).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client as k8s_client

from accurate_testbed import leftovers
from accurate_testbed.apiserver.server import ApiServer
from libaccurate.network.kube import ConnectionOptions, Kube

REAL_KUBECONFIG_ENV = "ACCURATE_TEST_KUBECONFIG"
RUN_LABEL = "e2e.accurate.cybozu.com/run"
TEST_LABEL = "e2e.accurate.cybozu.com/test"
# The glob a controller's labelKeys needs to pass both labels on to the namespaces it makes.
SUITE_LABEL_KEYS = "e2e.accurate.cybozu.com/*"


def real_kubeconfig() -> Path | None:
    value = os.environ.get(REAL_KUBECONFIG_ENV)
    return Path(value) if value else None


def new_run() -> str:
    """A run's label value: unique, and sortable by start time for whoever reads the cluster."""
    return f"{int(time.time())}-{uuid.uuid4().hex[:6]}"


def new_test() -> str:
    """A test's label value. It starts with a letter: a bare hex id such as ``1e5234`` is a
    number to kubectl's YAML reader, so a manifest carrying it unquoted would be refused."""
    return f"t{uuid.uuid4().hex[:11]}"


def older_runs(run: str) -> str:
    """The label selector for what runs other than ``run`` left behind."""
    return f"{RUN_LABEL},{RUN_LABEL}!={run}"


@dataclass
class Cluster:
    """The API a test talks to. ``server`` is None on a real cluster."""

    kubeconfig: Path
    api_client: Any
    server: ApiServer | None
    run: str
    test: str = field(default_factory=new_test)
    _cleanups: list[Callable[[], object]] = field(default_factory=list)

    @property
    def is_real(self) -> bool:
        return self.server is None

    @property
    def labels(self) -> dict[str, str]:
        """The labels that make an object this test's own (see the module docstring)."""
        return {RUN_LABEL: self.run, TEST_LABEL: self.test}

    @property
    def selector(self) -> str:
        """The label selector for what this test made."""
        return f"{TEST_LABEL}={self.test}"

    def own(self, labels: Mapping[str, str] | None = None) -> dict[str, str]:
        """``labels`` plus the test's own."""
        return {**(labels or {}), **self.labels}

    def owned(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``manifest`` that carries the test's labels too, so that the test's clean-up
        (or, should the run be killed, the next run's) removes what it describes."""
        metadata = dict(manifest["metadata"])
        metadata["labels"] = self.own(metadata.get("labels"))
        return {**manifest, "metadata": metadata}

    def kube(self) -> Kube:
        return Kube.connect(ConnectionOptions(kubeconfig=str(self.kubeconfig)))

    def unique(self, prefix: str) -> str:
        """A name no other test (or earlier run on a real cluster) uses."""
        return f"{prefix}-{uuid.uuid4().hex[:8]}"

    def on_cleanup(self, action: Callable[[], object]) -> None:
        """Run ``action`` after the test on a real cluster (the in-memory one is reset anyway),
        before the test's namespaces are removed."""
        self._cleanups.append(action)

    def namespace(self, prefix: str = "test", labels: dict[str, str] | None = None) -> str:
        """Create a namespace of the test's own with a unique name."""
        name = self.unique(prefix)
        core: Any = k8s_client.CoreV1Api(self.api_client)
        core.create_namespace({"metadata": {"name": name, "labels": self.own(labels)}})
        return name

    def withdraw_webhooks(self) -> None:
        """Take the test's webhook configurations away; done before whatever serves them stops,
        so no request of anyone's is ever sent to a server that is gone."""
        leftovers.remove_webhook_configurations(self.kube(), self.selector)

    def clean_up(self) -> None:
        """Remove what the test made: its webhook configurations first (then nothing refuses
        a deletion or calls a stopped server), its own cleanups, then its namespaces, without
        waiting for them to go, and its cluster-scoped objects. A cleanup that fails is reported
        only once the rest is done: one mistake must not leave the test's objects behind."""
        self.withdraw_webhooks()
        failures = []
        for action in reversed(self._cleanups):
            try:
                action()
            except Exception as failure:  # reported below, after the rest of the clean-up
                failures.append(failure)
        self._cleanups.clear()
        kube = self.kube()
        leftovers.remove_namespaces(kube, self.selector)
        leftovers.remove_cluster_objects(kube, self.selector)
        if failures:
            raise failures[0]
