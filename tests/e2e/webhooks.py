"""Run accurate-controller's webhook server in the test process and register it with the cluster.

The registration is what the end-to-end suite does on a real cluster too: the webhook
configurations and the CRD come from the rendered deploy manifests (same rules, same
matchConditions), with each ``clientConfig`` pointed at ``https://127.0.0.1:<port>`` and the test
CA instead of the in-cluster Service, and a ``namespaceSelector`` on the run's label: a webhook
of this run never sees anyone else's namespaces, even if the run dies and leaves it behind.
The configurations are taken away before the server that answers them stops.
tests/conftest.py registers these fixtures for every test:

- ``webhooks``: the server, with the default flags, registered and answering;
- ``start_webhooks(allow_cascading_deletion=..., naming_policies=..., manifests=...)``: the same
  with other flags, or registered from another kustomize directory under controller/config;
- ``subnamespace_crd``: the SubNamespace CRD installed (also done by the two above).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme

from accurate_testbed.certificates import ca_bundle, write_serving_pair
from accurate_testbed.cluster import RUN_LABEL, Cluster
from accurate_testbed.kubectl import kubectl as run_kubectl
from accurate_testbed.manifests import (
    CRDS,
    MANIFESTS,
    namespace_hook_answers,
    registration,
    render,
    subnamespace_crd_manifest,
)
from accurate_testbed.processes import free_port
from accurate_testbed.waiting import wait_for
from controller.webhook import WebhookServer
from libaccurate.config import NamingPolicy
from libaccurate.constants import (
    FINALIZER,
    GROUP,
    LABEL_TYPE,
    SUBNAMESPACE_CRD_NAME,
    SUBNAMESPACE_PLURAL,
    TYPE_ROOT,
)
from libaccurate.forest import Forest
from libaccurate.network.kube import ApiError, ConnectionOptions, Kube, resource_path

NAMESPACES = resource_path("", "v1", "namespaces")
# A real API server may take a moment to see a new webhook configuration or CRD.
REGISTRATION_TIMEOUT = 30.0
DELETION_TIMEOUT = 120.0


def connect(cluster: Cluster) -> Kube:
    return Kube.connect(ConnectionOptions(kubeconfig=str(cluster.kubeconfig)))


class LiveNamespaces:
    """A NamespaceSource that lists every namespace on each call: slow, never stale."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube

    def forest(self) -> Forest:
        return Forest.build(self._kube.list_objects(NAMESPACES).get("items") or [])

    def reading(self) -> AbstractContextManager[Forest]:
        return nullcontext(self.forest())


def kubectl(cluster: Cluster, *args: str, stdin: Any = None) -> subprocess.CompletedProcess[str]:
    """Run the real kubectl against the cluster (see accurate_testbed.kubectl)."""
    return run_kubectl(cluster.kubeconfig, *args, stdin=stdin)


def assert_denied_by(webhook: str, result: subprocess.CompletedProcess[str], *words: str) -> None:
    """kubectl failed because ``webhook`` denied the request, with each of ``words`` said."""
    assert result.returncode == 1, result.stdout
    assert f'admission webhook "{webhook}" denied the request' in result.stderr
    for word in words:
        assert word in result.stderr


def assert_done(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr


def namespace(cluster: Cluster, prefix: str, labels: dict[str, str] | None = None) -> str:
    """Create a namespace of the test's own with a unique name (removed after the test)."""
    name = cluster.unique(prefix)
    connect(cluster).create(NAMESPACES, {"metadata": {"name": name, "labels": cluster.own(labels)}})
    return name


@dataclass
class Webhooks:
    """A running webhook server registered with the cluster; ``calls`` lists (path, allowed)
    for each request it answered."""

    server: WebhookServer
    ca: trustme.CA
    cert_dir: Path
    calls: list[tuple[str, bool]]

    def url(self, path: str = "") -> str:
        return f"https://127.0.0.1:{self.server.port}{path}"


@pytest.fixture(scope="session")
def webhook_ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def module_serving(
    webhook_ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, ...]:
    """The controller's flags for its webhook server: one address and serving pair for the whole
    module, so that a controller its tests share (``shared_controller``) serves each of them."""
    cert_dir = tmp_path_factory.mktemp("serving-certs")
    write_serving_pair(webhook_ca, cert_dir)
    return ("--webhook-addr", f"127.0.0.1:{free_port()}", "--cert-dir", str(cert_dir))


@pytest.fixture
def subnamespace_crd(cluster: Cluster) -> None:
    """Install the CRD from the manifests unless the cluster has it; wait until it is served.

    One the run installs carries the run's label and stays until the run ends: removing it
    after each test would take every SubNamespace with it, under the feet of a controller the
    next test shares (accurate_testbed.leftovers removes it with the run's other leftovers).
    """
    kube = connect(cluster)
    path = f"{CRDS}/{SUBNAMESPACE_CRD_NAME}"
    wait_for(lambda: not _being_deleted(kube, path), DELETION_TIMEOUT, "an earlier run's CRD")
    if not _exists(kube, path):
        crd = subnamespace_crd_manifest()
        crd["metadata"].setdefault("labels", {})[RUN_LABEL] = cluster.run
        # Only v2 is served, so no request needs conversion and the Service it names can
        # stay unreachable from here.
        kube.create(CRDS, crd)
    listing = resource_path(GROUP, "v2", SUBNAMESPACE_PLURAL)
    wait_for(lambda: _exists(kube, listing), REGISTRATION_TIMEOUT, "the SubNamespace CRD")


@pytest.fixture
def start_webhooks(
    cluster: Cluster, subnamespace_crd: None, webhook_ca: trustme.CA, tmp_path: Path
) -> Iterator[Callable[..., Webhooks]]:
    """Start a webhook server with the given flags and register it; stopped after the test."""
    started: list[WebhookServer] = []

    def start(
        allow_cascading_deletion: bool = False,
        naming_policies: Sequence[NamingPolicy] = (),
        manifests: str = "default",
    ) -> Webhooks:
        kube = connect(cluster)
        cert_dir = tmp_path / f"certs-{len(started)}"
        write_serving_pair(webhook_ca, cert_dir)
        calls: list[tuple[str, bool]] = []
        server = WebhookServer(
            "127.0.0.1:0",
            cert_dir,
            LiveNamespaces(kube),
            kube,
            naming_policies,
            allow_cascading_deletion,
            lambda path, allowed, _: calls.append((path, allowed)),
        )
        server.start()
        started.append(server)
        hooks = Webhooks(server, webhook_ca, cert_dir, calls)
        register_webhooks(cluster, hooks.url(), webhook_ca, manifests)
        return hooks

    yield start
    cluster.withdraw_webhooks()
    for server in started:
        server.stop()


@pytest.fixture
def webhooks(start_webhooks: Callable[..., Webhooks]) -> Webhooks:
    """The webhook server with the controller's default flags, registered and answering."""
    return start_webhooks()


def register_webhooks(
    cluster: Cluster, base_url: str, ca: trustme.CA, manifests: str = "default"
) -> None:
    """Register the manifests' webhook configurations for a server at ``base_url`` (trusted
    through ``ca``) and wait until the API server calls them. They carry the test's labels (the
    fixture that stops the server takes them away first) and see only the run's namespaces."""
    kube = connect(cluster)
    objects = render(MANIFESTS / manifests)
    bundle, suffix, scope = ca_bundle(ca), cluster.unique("test"), {RUN_LABEL: cluster.run}
    for configuration in registration(objects, base_url, bundle, suffix, cluster.labels, scope):
        kube.create(_configuration_path(configuration), configuration)
    _wait_until_effective(cluster, kube)


def _configuration_path(configuration: dict[str, Any]) -> str:
    plural = configuration["kind"].lower() + "s"
    return resource_path("admissionregistration.k8s.io", "v1", plural)


def _wait_until_effective(cluster: Cluster, kube: Kube) -> None:
    """Wait until the API server calls the new webhooks: a namespace that is its own parent
    is refused, and a new SubNamespace gets the finalizer (server-side dry runs)."""
    probe = cluster.unique("probe")
    wait_for(
        lambda: namespace_hook_answers(kube, probe, cluster.labels),
        REGISTRATION_TIMEOUT,
        "the namespace webhook",
    )
    root = namespace(cluster, "probe", {LABEL_TYPE: TYPE_ROOT})
    subnamespaces = resource_path(GROUP, "v2", SUBNAMESPACE_PLURAL, namespace=root)
    sub = {"apiVersion": f"{GROUP}/v2", "kind": "SubNamespace", "metadata": {"name": probe}}

    def finalized() -> bool:
        created = kube.create(subnamespaces, sub, dryRun="All")
        return FINALIZER in (created["metadata"].get("finalizers") or [])

    wait_for(finalized, REGISTRATION_TIMEOUT, "the SubNamespace webhooks")


def _exists(kube: Kube, path: str) -> bool:
    """Whether an object (or a collection: is the kind served yet?) is there."""
    return kube.find(path) is not None


def _being_deleted(kube: Kube, path: str) -> bool:
    found = kube.find(path)
    return found is not None and bool(found["metadata"].get("deletionTimestamp"))


def _delete(kube: Kube, path: str) -> None:
    try:
        kube.delete(path)
    except ApiError as error:
        if not error.not_found:
            raise
