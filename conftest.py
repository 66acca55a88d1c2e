"""Shared fixtures: a Kubernetes API for every test, in memory by default, real on request.

One in-memory API server runs per test session and is reset before each test that asks for the
``cluster`` fixture, which makes a fresh cluster cost milliseconds. With ACCURATE_TEST_KUBECONFIG
set, the same tests run against that cluster instead: they must then use ``cluster.unique(...)``
names and give what they create the test's labels (``cluster.own(...)``), or register a cleanup;
a run first removes what earlier runs left there (accurate_testbed.leftovers). Tests that need
the in-memory server's internals (fault injection, the request log) are skipped there.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from kubernetes import config as k8s_config

from accurate_testbed import leftovers
from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.cluster import (
    REAL_KUBECONFIG_ENV,
    RUN_LABEL,
    Cluster,
    new_run,
    older_runs,
    real_kubeconfig,
)
from libaccurate.network.kube import ConnectionOptions, Kube

# Fixtures that run our webhook server and register it with the cluster, for every test that
# needs admission as users meet it, and the controller's; the e2e cost line (tally); the release
# build started beside the tests (registered here for pytest-xdist's controller, which loads no
# other conftest.py). Registered here so pytest rewrites their asserts too.
pytest_plugins = [
    "tests.e2e.tally",
    "tests.e2e.webhooks",
    "tests.e2e.controller",
    "tests.release.build",
]
NEEDS_SERVER = "needs the in-memory API server's internals (not available on a real cluster)"

# Hypothesis's two clocks (an example's 200 ms deadline, and the health check on how fast inputs
# are drawn) time a test by the wall, which cores shared with pytest-xdist's other workers, or
# with anything else the machine runs, stretch many times over: they made property tests fail
# on a loaded machine while checking nothing about the code. Timing goals live in bench/.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


def pytest_configure(config: pytest.Config) -> None:
    """Give Ctrl-C its usual meaning back when the suite was started as a background job.

    Tests press Ctrl-C on programs they start (the demo, a nested test run), as a user does
    on a foreground command. A shell starts a background job (``pytest &``) with SIGINT
    ignored, and an ignored signal stays ignored in every program started from it, so those
    programs would never see the Ctrl-C the tests send.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if real_kubeconfig() is not None and config.getoption("numprocesses", None):
        raise pytest.UsageError(
            f"{REAL_KUBECONFIG_ENV} runs the tests one at a time: each pytest-xdist worker would "
            "take the others' objects for leftovers, and their controllers would fight (drop -n)"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if real_kubeconfig() is None:
        return
    skip = pytest.mark.skip(reason=NEEDS_SERVER)
    for item in items:
        if "fault_injection" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def _session_api(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, Any, ApiServer | None, str]]:
    run = new_run()
    real = real_kubeconfig()
    if real is not None:
        kube = Kube.connect(ConnectionOptions(kubeconfig=str(real)))
        leftovers.remove(kube, older_runs(run))
        try:
            yield real, k8s_config.new_client_from_config(config_file=str(real)), None, run
        finally:
            leftovers.remove(kube, f"{RUN_LABEL}={run}")
        return
    server = ApiServer().start()
    path = server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "kubeconfig")
    api_client = k8s_config.new_client_from_config(config_file=str(path))
    try:
        yield path, api_client, server, run
    finally:
        api_client.close()
        server.stop()


@pytest.fixture(autouse=True)
def _fresh_kubectl_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kubectl caches discovery per host:port for hours; test servers reuse ports and define
    different CRDs, so every test's kubectl starts from its own empty cache."""
    monkeypatch.setenv("KUBECACHEDIR", str(tmp_path / "kubectl-cache"))


@pytest.fixture
def cluster(_session_api: tuple[Path, Any, ApiServer | None, str]) -> Iterator[Cluster]:
    """A fresh cluster per test (in memory: reset; real: remove what the test made)."""
    path, api_client, server, run = _session_api
    if server is not None:
        server.reset()
    handle = Cluster(path, api_client, server, run)
    try:
        yield handle
    finally:
        if server is None:
            handle.clean_up()


@pytest.fixture
def kubeconfig(cluster: Cluster) -> Path:
    """A kubeconfig file for subprocesses (kubectl, the CLI, the controller)."""
    return cluster.kubeconfig


@pytest.fixture
def api_client(cluster: Cluster) -> Any:
    """A ``kubernetes.client.ApiClient`` for the cluster."""
    return cluster.api_client


@pytest.fixture
def apiserver(cluster: Cluster) -> ApiServer:
    """The in-memory server itself, for fault injection and the request log; skips on a real
    cluster."""
    if cluster.server is None:
        pytest.skip(NEEDS_SERVER)
    return cluster.server
