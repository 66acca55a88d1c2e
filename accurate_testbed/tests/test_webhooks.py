"""Contract: admission webhooks as a kubectl user meets them.

Webhook configurations point at a real HTTPS webhook on 127.0.0.1; what the user types and reads
is the real kubectl's. Each webhook only sees the namespaces its test labels for it (a
namespaceSelector on the test's labels and a scope of its own, which every Kubernetes version
honours, unlike matchConditions), so on a real cluster (ACCURATE_TEST_KUBECONFIG) it cannot
disturb anything else; the configurations carry the test's labels and are withdrawn before the
server that answers them stops.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from kubernetes import client as k8s_client

from accurate_testbed.cluster import Cluster
from accurate_testbed.kubectl import kubectl
from accurate_testbed.objects import namespace_manifest
from accurate_testbed.processes import free_port
from accurate_testbed.tests.helpers import request
from accurate_testbed.tests.webhook_server import WebhookServer, denied, patched

MERGE = "application/merge-patch+json"

# The label that puts a namespace in view of one test webhook.
SCOPE = "webhook-contract.example.com/scope"


@pytest.fixture
def webhook(cluster: Cluster) -> Iterator[WebhookServer]:
    server = WebhookServer(trustme.CA())
    yield server
    cluster.withdraw_webhooks()
    server.close()


def scoped(cluster: Cluster, scope: str) -> dict[str, str]:
    """The labels of a namespace of the test's that the webhook registered for ``scope`` sees."""
    return cluster.own({SCOPE: scope})


def register(
    cluster: Cluster, kind: str, client_config: dict[str, Any], scope: str, **fields: Any
) -> str:
    """Register a one-webhook configuration for the namespaces labelled ``scoped(scope)``."""
    name = cluster.unique("webhook-contract")
    spec = {
        "name": f"{name}.example.com",
        "clientConfig": client_config,
        "rules": [
            {
                "operations": ["CREATE", "UPDATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["namespaces"],
            }
        ],
        "namespaceSelector": {"matchLabels": scoped(cluster, scope)},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
        **fields,
    }
    body: Any = {"metadata": {"name": name, "labels": cluster.labels}, "webhooks": [spec]}
    api = k8s_client.AdmissionregistrationV1Api(cluster.api_client)
    if kind == "Mutating":
        api.create_mutating_webhook_configuration(body)
    else:
        api.create_validating_webhook_configuration(body)
    return str(spec["name"])


def at(server: WebhookServer) -> dict[str, str]:
    return {"url": server.url(), "caBundle": server.ca_bundle}


def namespace_exists(kubeconfig: Path, name: str) -> bool:
    return kubectl(kubeconfig, "get", "namespace", name).returncode == 0


def create_namespace(cluster: Cluster, name: str, scope: str) -> Any:
    """``kubectl create`` a namespace the webhook registered for ``scope`` sees."""
    manifest = namespace_manifest(name, scoped(cluster, scope))
    return kubectl(cluster.kubeconfig, "create", "-f", "-", stdin=manifest)


@pytest.mark.parametrize(
    ("refusal", "shown"),
    [
        ({"message": "tenants may not create namespaces"}, "Error from server: "),
        (
            {"code": 403, "reason": "Forbidden", "message": "tenants may not create namespaces"},
            "Error from server (Forbidden): ",
        ),
    ],
    ids=["no code or reason", "forbidden"],
)
def test_a_denied_create_shows_the_webhooks_message(
    cluster: Cluster, kubeconfig: Path, webhook: WebhookServer, refusal: dict, shown: str
):
    scope, name = cluster.unique("denied"), cluster.unique("denied")
    webhook.answer = lambda _: {"allowed": False, "status": refusal}
    hook_name = register(cluster, "Validating", at(webhook), scope)

    result = create_namespace(cluster, name, scope)

    assert result.returncode == 1
    assert result.stderr == (
        f'{shown}error when creating "STDIN": admission webhook "{hook_name}" denied the '
        "request: tenants may not create namespaces\n"
    )
    assert not namespace_exists(kubeconfig, name)
    assert cluster.namespace("other")


# A webhook's refusal (its response.status) and the Status kube-apiserver answers with, built by
# the webhook admission plugin's ToStatusErr: the code is kept from 400 up (anything lower,
# none included, is 400), status Failure unless the webhook chose another, reason and details
# only when the webhook gave them, and the message names the webhook and nothing else.
REFUSALS: list[tuple[dict[str, Any] | None, dict[str, Any]]] = [
    (None, {"code": 400, "said": " without explanation"}),
    ({}, {"code": 400, "said": " without explanation"}),
    ({"message": "no"}, {"code": 400, "said": ": no"}),
    ({"reason": "NotYours"}, {"code": 400, "reason": "NotYours", "said": ": NotYours"}),
    (
        {"code": 403, "reason": "Forbidden", "message": "no"},
        {"code": 403, "reason": "Forbidden", "said": ": no"},
    ),
    (
        {"code": 422, "reason": "Invalid", "message": "bad", "details": {"name": "x"}},
        {"code": 422, "reason": "Invalid", "said": ": bad", "details": {"name": "x"}},
    ),
    ({"code": 500, "message": "broken"}, {"code": 500, "said": ": broken"}),
    ({"code": 599, "message": "odd"}, {"code": 599, "said": ": odd"}),
    ({"code": 200, "message": "fine?"}, {"code": 400, "said": ": fine?"}),
    ({"code": 302}, {"code": 400, "said": " without explanation"}),
    ({"code": -7, "message": "no"}, {"code": 400, "said": ": no"}),
    ({"code": 701, "message": "no"}, {"code": 701, "said": ": no"}),
    ({"status": "Success", "message": "no"}, {"code": 400, "said": ": no"}),
    ({"status": "Custom", "message": "no"}, {"code": 400, "status": "Custom", "said": ": no"}),
]


def answered(cluster: Cluster, name: str, scope: str) -> tuple[int, str, str]:
    """The HTTP status, Content-Type and body of creating namespace ``name`` in ``scope``."""
    core: Any = k8s_client.CoreV1Api(cluster.api_client)
    with pytest.raises(k8s_client.ApiException) as refused:
        core.create_namespace(namespace_manifest(name, scoped(cluster, scope)))
    headers = refused.value.headers or {}
    return int(refused.value.status), headers.get("Content-Type", ""), str(refused.value.body)


@pytest.mark.parametrize("kind", ["Validating", "Mutating"])
def test_a_refusal_reaches_the_client_as_kube_apiserver_converts_it(
    cluster: Cluster, webhook: WebhookServer, kind: str
):
    scope = cluster.unique("refused")
    refusals = {f"{scope}-{index}": refusal for index, (refusal, _) in enumerate(REFUSALS)}
    webhook.answer = lambda request: {
        "allowed": False,
        **({} if refusals[request["name"]] is None else {"status": refusals[request["name"]]}),
    }
    hook_name = register(cluster, kind, at(webhook), scope)

    seen, expected = {}, {}
    for name, (_, wanted) in zip(refusals, REFUSALS, strict=True):
        code, content_type, body = answered(cluster, name, scope)
        seen[name] = (code, content_type, json.loads(body))
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": wanted.get("status", "Failure"),
            "message": f'admission webhook "{hook_name}" denied the request{wanted["said"]}',
            "code": wanted["code"],
        }
        status.update({key: wanted[key] for key in ("reason", "details") if key in wanted})
        expected[name] = (wanted["code"], "application/json", status)

    assert seen == expected


def test_a_refusal_code_http_cannot_carry_makes_kube_apiserver_answer_a_plain_500(
    cluster: Cluster, webhook: WebhookServer
):
    """Go's net/http panics on a status code above 999 and kube-apiserver's panic recovery
    answers instead."""
    scope = cluster.unique("refused")
    webhook.answer = lambda _: denied("no", code=1000)
    register(cluster, "Validating", at(webhook), scope)

    code, content_type, body = answered(cluster, cluster.unique("refused"), scope)

    assert (code, content_type) == (500, "text/plain; charset=utf-8")
    assert body == "This request caused apiserver to panic. Look in the logs for details.\n"


def test_a_denied_label_change_leaves_the_namespace_as_it_was(
    cluster: Cluster, kubeconfig: Path, webhook: WebhookServer
):
    scope = cluster.unique("labelled")
    name = cluster.namespace("labelled", {SCOPE: scope})
    webhook.answer = lambda review: (
        denied("team labels are managed by the platform")
        if "team" in review["object"]["metadata"].get("labels", {})
        else {"allowed": True}
    )
    hook_name = register(cluster, "Validating", at(webhook), scope)

    result = kubectl(kubeconfig, "label", "namespace", name, "team=a")

    assert result.returncode == 1
    assert (
        f'admission webhook "{hook_name}" denied the request: team labels are managed by the '
        "platform" in result.stderr
    )
    labels = json.loads(kubectl(kubeconfig, "get", "namespace", name, "-o", "json").stdout)
    assert "team" not in labels["metadata"].get("labels", {})
    [review] = [r["request"] for r in webhook.reviews]
    assert (review["operation"], review["name"]) == ("UPDATE", name)
    assert review["oldObject"]["metadata"]["name"] == name


def test_a_mutating_webhooks_patch_is_stored(
    cluster: Cluster, kubeconfig: Path, webhook: WebhookServer
):
    scope, name = cluster.unique("mutated"), cluster.unique("mutated")
    label = {"op": "add", "path": "/metadata/labels/stamped-by", "value": "webhook"}
    webhook.answer = lambda _: patched(label)
    register(cluster, "Mutating", at(webhook), scope)

    created = create_namespace(cluster, name, scope)

    assert created.returncode == 0, created.stderr
    stored = json.loads(kubectl(kubeconfig, "get", "namespace", name, "-o", "json").stdout)
    assert stored["metadata"]["labels"]["stamped-by"] == "webhook"


def test_the_options_name_a_field_manager_only_when_the_request_does(
    cluster: Cluster, webhook: WebhookServer
):
    """The handlers (``apiserver/pkg/endpoints/handlers/{create,update,patch}.go``) hand
    admission the options decoded from the query; the manager they take from the User-Agent
    when the query names none (``managerOrUserAgent``) goes to managedFields only. kubectl
    names one (``kubectl-create``); a client that names none sends none to the webhook."""
    scope, name = cluster.unique("options"), cluster.unique("options")
    register(cluster, "Validating", at(webhook), scope)
    assert create_namespace(cluster, name, scope).returncode == 0
    path = f"/api/v1/namespaces/{name}"
    for query in ([], [("fieldManager", "labeller")]):
        label = {"metadata": {"labels": {"step": str(len(query))}}}
        request(cluster.api_client, "PATCH", path, label, MERGE, query)

    options = [review["request"]["options"] for review in webhook.reviews]
    bare = {"apiVersion": "meta.k8s.io/v1"}
    assert options == [
        {**bare, "kind": "CreateOptions", "fieldManager": "kubectl-create"},
        {**bare, "kind": "UpdateOptions"},
        {**bare, "kind": "UpdateOptions", "fieldManager": "labeller"},
    ]
    stored = request(cluster.api_client, "GET", path)["metadata"]["managedFields"]
    assert "labeller" in {entry["manager"] for entry in stored}


def test_a_webhook_that_is_down_refuses_requests_under_failure_policy_fail(
    cluster: Cluster, kubeconfig: Path
):
    scope, name = cluster.unique("down"), cluster.unique("down")
    down = {"url": f"https://127.0.0.1:{free_port()}/validate"}
    hook_name = register(cluster, "Validating", down, scope)

    result = create_namespace(cluster, name, scope)

    assert result.returncode == 1
    assert result.stderr.startswith(
        'Error from server (InternalError): error when creating "STDIN": Internal error '
        f'occurred: failed calling webhook "{hook_name}": failed to call webhook: '
    )
    assert not namespace_exists(kubeconfig, name)


def test_a_webhook_that_is_down_is_skipped_under_failure_policy_ignore(
    cluster: Cluster, kubeconfig: Path
):
    scope, name = cluster.unique("down"), cluster.unique("down")
    down = {"url": f"https://127.0.0.1:{free_port()}/validate"}
    register(cluster, "Validating", down, scope, failurePolicy="Ignore")

    result = create_namespace(cluster, name, scope)

    assert result.returncode == 0, result.stderr
    assert namespace_exists(kubeconfig, name)


def test_a_configuration_the_api_would_not_store_is_refused(cluster: Cluster, kubeconfig: Path):
    name = cluster.unique("webhook-contract")
    spec = {
        "name": f"{name}.example.com",
        "clientConfig": {"url": "http://127.0.0.1:8443/validate"},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }
    manifest = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": cluster.labels},
        "webhooks": [spec],
    }

    result = kubectl(
        kubeconfig, "create", "--validate=false", "-f", "-", stdin=json.dumps(manifest)
    )

    assert result.returncode == 1
    assert result.stderr.strip() == (
        f'The ValidatingWebhookConfiguration "{name}" is invalid: webhooks[0].clientConfig.url: '
        "Invalid value: \"http://127.0.0.1:8443/validate\": 'https' is the only allowed URL scheme"
    )


def test_an_object_the_server_finds_invalid_never_reaches_a_validating_webhook(
    cluster: Cluster, kubeconfig: Path, webhook: WebhookServer
):
    scope = cluster.unique("invalid")
    webhook.answer = lambda _: denied("the webhook should not have been asked")
    register(cluster, "Validating", at(webhook), scope)
    labels = {**scoped(cluster, scope), "team": "~"}
    manifest = namespace_manifest(cluster.unique("invalid"), labels)

    result = kubectl(kubeconfig, "apply", "-f", "-", stdin=json.dumps(manifest))

    assert result.returncode == 1
    assert "is invalid" in result.stderr
    assert 'metadata.labels: Invalid value: "~"' in result.stderr
    assert webhook.reviews == []


def test_a_webhooks_warnings_reach_the_kubectl_user(
    cluster: Cluster, kubeconfig: Path, webhook: WebhookServer
):
    scope, name = cluster.unique("warned"), cluster.unique("warned")
    webhook.answer = lambda _: {"allowed": True, "warnings": ['quota "small" is nearly used']}
    register(cluster, "Validating", at(webhook), scope)

    created = create_namespace(cluster, name, scope)

    assert created.returncode == 0, created.stderr
    assert 'Warning: quota "small" is nearly used' in created.stderr.splitlines()
