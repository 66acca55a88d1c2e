"""Contract: the namespace controller and the garbage collector are API clients like any other.

In kube-controller-manager both call the API as their own ServiceAccounts
(``--use-service-account-credentials``), so each deletion and patch they send passes the
admission webhooks, which may refuse it; the controller then tries again later, with a delay
that doubles per failure (a rate-limited work queue), and the namespace controller says in the
namespace's status conditions what failed or what is left (pkg/controller/namespace/deletion/
namespaced_resources_deleter.go and status_condition_utils.go; pkg/controller/garbagecollector/
garbagecollector.go, operations.go, patch.go). A DeleteCollection is admitted object by object
(apiserver's rest.AdmissionToValidateObjectDeleteFunc, called by the registry for each item).

The webhooks here only see the test's namespaces (a namespaceSelector on its labels), so the
same tests run against a real cluster when ACCURATE_TEST_KUBECONFIG is set.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s_client

from accurate_testbed.cluster import Cluster
from accurate_testbed.leftovers import HOLD
from accurate_testbed.tests.helpers import held_config_map, release
from accurate_testbed.tests.test_namespace_termination import gone
from accurate_testbed.tests.test_webhooks import SCOPE, at, register, webhook  # noqa: F401
from accurate_testbed.tests.webhook_server import WebhookServer, denied
from accurate_testbed.waiting import CONTROLLER_TIMEOUT, wait_for

NAMESPACE_CONTROLLER = "system:serviceaccount:kube-system:namespace-controller"
GARBAGE_COLLECTOR = "system:serviceaccount:kube-system:generic-garbage-collector"


@pytest.fixture
def core(cluster: Cluster) -> Any:
    return k8s_client.CoreV1Api(cluster.api_client)


def watch(
    cluster: Cluster, server: WebhookServer, resources: str, *operations: str
) -> tuple[str, str]:
    """Register ``server`` as a validating webhook for ``operations`` on ``resources`` in a
    fresh scope; the webhook's name, and a namespace of the test's in that scope."""
    scope = cluster.unique("scope")
    rules = [
        {
            "operations": list(operations),
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": [resources],
        }
    ]
    name = register(cluster, "Validating", at(server), scope, rules=rules)
    return name, cluster.namespace("admitted", {SCOPE: scope})


def condition(core: Any, ns: str, kind: str) -> dict[str, Any] | None:
    namespace = core.read_namespace(ns)
    for found in namespace.status.conditions or []:
        if found.type == kind:
            return {"status": found.status, "reason": found.reason, "message": found.message}
    return None


def reviews_of(server: WebhookServer, name: str, operation: str) -> list[dict[str, Any]]:
    return [
        review["request"]
        for review in list(server.reviews)
        if review["request"]["name"] == name and review["request"]["operation"] == operation
    ]


class Refusing:
    """The webhook's answers: refuse every request about ``name`` with ``message`` until
    lifted, allow the rest."""

    def __init__(self, message: str, name: str) -> None:
        self.message, self.name, self.on = message, name, True

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.on and request["name"] == self.name:
            return denied(self.message)
        return {"allowed": True}


def refused_twice(server: WebhookServer, refusing: Refusing, operation: str) -> dict[str, Any]:
    """Wait until the request refused has been tried again; the first one."""
    wait_for(
        lambda: len(reviews_of(server, refusing.name, operation)) >= 2,
        CONTROLLER_TIMEOUT,
        f"the refused {operation} of {refusing.name} to be tried again",
    )
    return reviews_of(server, refusing.name, operation)[0]


def config_map_exists(core: Any, ns: str, name: str) -> bool:
    try:
        core.read_namespaced_config_map(name, ns)
    except k8s_client.ApiException as error:
        assert error.status == 404
        return False
    return True


def test_the_namespace_controller_deletes_each_object_through_the_webhooks(
    cluster: Cluster,
    core: Any,
    webhook: WebhookServer,  # noqa: F811
) -> None:
    _, ns = watch(cluster, webhook, "configmaps", "DELETE")
    core.create_namespaced_config_map(ns, {"metadata": {"name": "inside"}})

    core.delete_namespace(ns)
    wait_for(lambda: gone(core, ns), CONTROLLER_TIMEOUT, f"namespace {ns} to go")

    (review,) = reviews_of(webhook, "inside", "DELETE")
    assert review["userInfo"]["username"] == NAMESPACE_CONTROLLER
    assert review["namespace"] == ns
    assert review["oldObject"]["metadata"]["name"] == "inside"
    assert review["options"]["kind"] == "DeleteOptions"
    assert review["options"]["propagationPolicy"] == "Background"


def test_a_refused_deletion_holds_the_namespace_says_why_and_is_tried_again(
    cluster: Cluster,
    core: Any,
    webhook: WebhookServer,  # noqa: F811
) -> None:
    webhook.answer = refusing = Refusing("kept on purpose", "kept")
    hook, ns = watch(cluster, webhook, "configmaps", "DELETE")
    core.create_namespaced_config_map(ns, {"metadata": {"name": "kept"}})

    core.delete_namespace(ns)

    def failure() -> dict[str, Any] | None:
        found = condition(core, ns, "NamespaceDeletionContentFailure")
        return found if found and found["status"] == "True" else None

    reported = wait_for(failure, CONTROLLER_TIMEOUT, "the namespace to report the refusal")
    assert reported["reason"] == "ContentDeletionFailed"
    assert reported["message"] == (
        "Failed to delete all resource types, 1 remaining: "
        f'admission webhook "{hook}" denied the request: kept on purpose'
    )
    assert core.read_namespace(ns).status.phase == "Terminating"
    assert config_map_exists(core, ns, "kept")
    refused_twice(webhook, refusing, "DELETE")

    refusing.on = False
    wait_for(lambda: gone(core, ns), CONTROLLER_TIMEOUT, f"namespace {ns} to go once allowed")


def test_content_held_by_finalizers_is_reported_while_the_namespace_waits(
    cluster: Cluster, core: Any
) -> None:
    ns = cluster.namespace()
    held_config_map(cluster, ns, "held")

    core.delete_namespace(ns)

    def remaining() -> dict[str, Any] | None:
        found = condition(core, ns, "NamespaceFinalizersRemaining")
        return found if found and found["status"] == "True" else None

    finalizers = wait_for(remaining, CONTROLLER_TIMEOUT, "the namespace to report the hold")
    assert finalizers == {
        "status": "True",
        "reason": "SomeFinalizerRemain",
        "message": f"Some finalizers are remaining: {HOLD} in 1 resource instances",
    }
    assert condition(core, ns, "NamespaceContentRemaining") == {
        "status": "True",
        "reason": "SomeResourcesRemain",
        "message": "Some resources are remaining: configmaps. has 1 resource instances",
    }
    assert condition(core, ns, "NamespaceDeletionContentFailure") == {
        "status": "False",
        "reason": "ContentDeleted",
        "message": "All content successfully deleted, may be waiting on finalization",
    }

    release(cluster, ns, "held")
    wait_for(lambda: gone(core, ns), CONTROLLER_TIMEOUT, f"namespace {ns} to go")


def test_the_namespace_is_finalized_through_the_webhooks(
    cluster: Cluster,
    core: Any,
    webhook: WebhookServer,  # noqa: F811
) -> None:
    _, ns = watch(cluster, webhook, "namespaces/finalize", "UPDATE")
    webhook.answer = refusing = Refusing("not yet", ns)

    core.delete_namespace(ns)
    review = refused_twice(webhook, refusing, "UPDATE")
    held = core.read_namespace(ns)
    assert held.status.phase == "Terminating"
    assert held.spec.finalizers == ["kubernetes"]
    assert review["subResource"] == "finalize"
    assert review["userInfo"]["username"] == NAMESPACE_CONTROLLER
    assert review["oldObject"]["spec"]["finalizers"] == ["kubernetes"]
    assert not review["object"]["spec"].get("finalizers")

    refusing.on = False
    wait_for(lambda: gone(core, ns), CONTROLLER_TIMEOUT, f"namespace {ns} to go once allowed")


def owner_and_dependent(
    cluster: Cluster, core: Any, server: WebhookServer, operation: str, message: str
) -> tuple[str, Any, Refusing]:
    """ConfigMaps ``owner`` and ``dependent`` (owned by it) in a namespace where ``server``
    refuses any ``operation`` on the dependent with ``message``: the namespace, the owner as
    created, and the refusal (to lift)."""
    server.answer = refusing = Refusing(message, "dependent")
    _, ns = watch(cluster, server, "configmaps", operation)
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})
    meta = owner.metadata
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": meta.name, "uid": meta.uid}
    body = {"metadata": {"name": "dependent", "ownerReferences": [ref]}}
    core.create_namespaced_config_map(ns, body)
    return ns, owner, refusing


def test_the_garbage_collector_deletes_through_the_webhooks_and_tries_again(
    cluster: Cluster,
    core: Any,
    webhook: WebhookServer,  # noqa: F811
) -> None:
    ns, _, refusing = owner_and_dependent(cluster, core, webhook, "DELETE", "still needed")

    core.delete_namespaced_config_map("owner", ns)
    review = refused_twice(webhook, refusing, "DELETE")
    assert config_map_exists(core, ns, "dependent")
    assert review["userInfo"]["username"] == GARBAGE_COLLECTOR
    assert review["options"]["propagationPolicy"] == "Background"
    assert review["options"]["preconditions"]["uid"] == review["oldObject"]["metadata"]["uid"]

    refusing.on = False
    wait_for(
        lambda: not config_map_exists(core, ns, "dependent"),
        CONTROLLER_TIMEOUT,
        "the dependent to be collected once allowed",
    )


def test_orphaning_patches_each_dependent_through_the_webhooks(
    cluster: Cluster,
    core: Any,
    webhook: WebhookServer,  # noqa: F811
) -> None:
    ns, owner, refusing = owner_and_dependent(cluster, core, webhook, "UPDATE", "frozen")

    core.delete_namespaced_config_map("owner", ns, propagation_policy="Orphan")
    review = refused_twice(webhook, refusing, "UPDATE")
    assert review["userInfo"]["username"] == GARBAGE_COLLECTOR
    assert review["oldObject"]["metadata"]["ownerReferences"][0]["uid"] == owner.metadata.uid
    assert "ownerReferences" not in review["object"]["metadata"]
    assert "orphan" in core.read_namespaced_config_map("owner", ns).metadata.finalizers

    refusing.on = False
    wait_for(
        lambda: not config_map_exists(core, ns, "owner"),
        CONTROLLER_TIMEOUT,
        "the owner to go once its dependent is let go",
    )
    assert core.read_namespaced_config_map("dependent", ns).metadata.owner_references is None


def test_a_dependent_that_does_not_block_lets_a_foreground_owner_go(
    cluster: Cluster, core: Any
) -> None:
    ns = cluster.namespace()
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})
    meta = owner.metadata
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": meta.name, "uid": meta.uid}
    held_config_map(cluster, ns, "dependent", ownerReferences=[reference])

    core.delete_namespaced_config_map("owner", ns, propagation_policy="Foreground")

    wait_for(
        lambda: not config_map_exists(core, ns, "owner"),
        CONTROLLER_TIMEOUT,
        "the owner to go without waiting for its non-blocking dependent",
    )
    wait_for(
        lambda: core.read_namespaced_config_map("dependent", ns).metadata.deletion_timestamp,
        CONTROLLER_TIMEOUT,
        "the dependent to be deleted too",
    )
    release(cluster, ns, "dependent")


def test_an_owner_in_another_namespace_counts_as_gone(cluster: Cluster, core: Any) -> None:
    """Owner references never cross namespaces: the collector looks for the owner in the
    dependent's namespace (isDangling), finds none, and collects the dependent."""
    elsewhere, ns = cluster.namespace("elsewhere"), cluster.namespace()
    owner = core.create_namespaced_config_map(elsewhere, {"metadata": {"name": "owner"}})
    meta = owner.metadata
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": meta.name, "uid": meta.uid}
    core.create_namespaced_config_map(
        ns, {"metadata": {"name": "dependent", "ownerReferences": [ref]}}
    )

    wait_for(
        lambda: not config_map_exists(core, ns, "dependent"),
        CONTROLLER_TIMEOUT,
        "the dependent of an owner in another namespace to be collected",
    )
    assert config_map_exists(core, elsewhere, "owner")
