"""Contract: deleting a namespace is asynchronous.

kube-apiserver only marks a namespace ``Terminating``; the namespace controller (in
kube-controller-manager) then deletes what is inside and, once nothing is left, removes the
``kubernetes`` finalizer from ``spec.finalizers``, and only then is the namespace gone. Until
then the name is taken. A client that needs the namespace gone has to wait for it, even when it
held nothing. The same tests run against a real cluster when ACCURATE_TEST_KUBECONFIG is set.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s_client

from accurate_testbed.cluster import Cluster
from accurate_testbed.leftovers import HOLD
from accurate_testbed.tests.helpers import error_of, request
from accurate_testbed.waiting import CONTROLLER_TIMEOUT, wait_for


@pytest.fixture
def core(cluster: Cluster) -> Any:
    return k8s_client.CoreV1Api(cluster.api_client)


def gone(core: Any, name: str) -> bool:
    try:
        core.read_namespace(name)
    except k8s_client.ApiException as error:
        return bool(error.status == 404)
    return False


def release(core: Any, name: str) -> None:
    core.patch_namespace(name, {"metadata": {"finalizers": None}})


def test_an_empty_namespace_is_terminating_before_it_goes(cluster: Cluster, core: Any) -> None:
    # A finalizer of the test's own holds the (empty) namespace while the test looks: a real
    # namespace controller may otherwise remove it before the second look. (Should the test
    # fail first, its clean-up lets go of the hold.)
    ns = cluster.unique("test")
    core.create_namespace(
        {"metadata": {"name": ns, "labels": cluster.labels, "finalizers": [HOLD]}}
    )
    answer = request(cluster.api_client, "DELETE", f"/api/v1/namespaces/{ns}")
    assert answer["status"]["phase"] == "Terminating"
    assert answer["spec"]["finalizers"] == ["kubernetes"]

    still = core.read_namespace(ns)
    assert still.status.phase == "Terminating"
    assert still.metadata.deletion_timestamp is not None
    with pytest.raises(k8s_client.ApiException) as caught:
        core.create_namespace({"metadata": {"name": ns, "labels": cluster.labels}})
    assert (caught.value.status, error_of(caught.value)["reason"]) == (409, "AlreadyExists")

    release(core, ns)
    wait_for(lambda: gone(core, ns), CONTROLLER_TIMEOUT, f"namespace {ns} to go")


def test_its_contents_go_first_then_the_namespace(cluster: Cluster, core: Any) -> None:
    ns = cluster.namespace()
    core.create_namespaced_config_map(ns, {"metadata": {"name": "inside"}})
    core.delete_namespace(ns)
    seen_empty_and_terminating = []

    def gone_after_emptied() -> bool:
        try:
            found = core.read_namespace(ns)
        except k8s_client.ApiException as error:
            assert error.status == 404
            return True
        if not core.list_namespaced_config_map(ns).items:
            seen_empty_and_terminating.append(found.status.phase)
        return False

    wait_for(gone_after_emptied, CONTROLLER_TIMEOUT, f"namespace {ns} to go")
    assert seen_empty_and_terminating
    assert set(seen_empty_and_terminating) == {"Terminating"}


def test_only_the_finalize_subresource_changes_the_spec_finalizers(
    cluster: Cluster, core: Any
) -> None:
    """The namespace strategy adds ``kubernetes`` on create and keeps the old finalizers on any
    other update (pkg/registry/core/namespace/strategy.go, PrepareForCreate and
    PrepareForUpdate); the finalize subresource sets them, and a terminating namespace left
    with none goes."""
    ns = cluster.unique("test")
    body = {"metadata": {"name": ns, "labels": cluster.labels}, "spec": {"finalizers": ["a/b"]}}
    created = core.create_namespace(body)
    assert created.spec.finalizers == ["a/b", "kubernetes"]

    core.patch_namespace(ns, {"spec": {"finalizers": None}})
    assert core.read_namespace(ns).spec.finalizers == ["a/b", "kubernetes"]

    path = f"/api/v1/namespaces/{ns}/finalize"
    current = request(cluster.api_client, "GET", f"/api/v1/namespaces/{ns}")
    current["spec"]["finalizers"] = ["a/b"]
    finalized = request(cluster.api_client, "PUT", path, current)
    assert finalized["spec"]["finalizers"] == ["a/b"]

    core.delete_namespace(ns)
    assert core.read_namespace(ns).spec.finalizers == ["a/b"]  # not the namespace controller's
    current = request(cluster.api_client, "GET", f"/api/v1/namespaces/{ns}")
    current["spec"]["finalizers"] = []
    del current["metadata"]["resourceVersion"]  # the namespace controller may write meanwhile
    request(cluster.api_client, "PUT", path, current)
    wait_for(lambda: gone(core, ns), CONTROLLER_TIMEOUT, f"namespace {ns} to go")


def test_the_finalizer_and_phase_a_new_namespace_gets_are_nobodys_fields(
    cluster: Cluster, core: Any
) -> None:
    """PrepareForCreate adds them after the field manager recorded the request, so no
    manager owns ``spec.finalizers`` or ``status.phase``."""
    ns = cluster.namespace()
    created = request(cluster.api_client, "GET", f"/api/v1/namespaces/{ns}")
    assert created["spec"]["finalizers"] == ["kubernetes"]
    assert created["status"]["phase"] == "Active"
    (entry,) = created["metadata"]["managedFields"]
    assert set(entry["fieldsV1"]) == {"f:metadata"}
