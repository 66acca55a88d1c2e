"""Contract: admission webhooks as a kubectl user meets them.

Webhook configurations point at a real HTTPS webhook on 127.0.0.1; what the user types and reads
is the real kubectl's. Each webhook only looks at the namespaces its test names (a
matchCondition), so on a real cluster (ACCURATE_TEST_KUBECONFIG) it cannot disturb anything else.
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
from accurate_testbed.processes import free_port
from accurate_testbed.tests.webhook_server import WebhookServer, denied, patched


@pytest.fixture
def webhook() -> Iterator[WebhookServer]:
    server = WebhookServer(trustme.CA())
    yield server
    server.close()


def register(
    cluster: Cluster, kind: str, client_config: dict[str, Any], prefix: str, **fields: Any
) -> str:
    """Register a one-webhook configuration for namespaces whose name starts with ``prefix``."""
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
        "matchConditions": [{"name": "ours", "expression": f'request.name.startsWith("{prefix}")'}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
        **fields,
    }
    body: Any = {"metadata": {"name": name}, "webhooks": [spec]}
    api = k8s_client.AdmissionregistrationV1Api(cluster.api_client)
    mutating = kind == "Mutating"
    create = (
        api.create_mutating_webhook_configuration
        if mutating
        else api.create_validating_webhook_configuration
    )
    create(body)

    def unregister() -> None:
        if mutating:
            api.delete_mutating_webhook_configuration(name)
        else:
            api.delete_validating_webhook_configuration(name)

    cluster.on_cleanup(unregister)
    return str(spec["name"])


def at(server: WebhookServer) -> dict[str, str]:
    return {"url": server.url(), "caBundle": server.ca_bundle}


def namespace_exists(kubeconfig: Path, name: str) -> bool:
    return kubectl(kubeconfig, "get", "namespace", name).returncode == 0


def delete_later(cluster: Cluster, name: str) -> None:
    def delete() -> None:
        k8s_client.CoreV1Api(cluster.api_client).delete_namespace(name)

    cluster.on_cleanup(delete)


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
    prefix = cluster.unique("denied")
    webhook.answer = lambda _: {"allowed": False, "status": refusal}
    hook_name = register(cluster, "Validating", at(webhook), prefix)

    result = kubectl(kubeconfig, "create", "namespace", f"{prefix}-a")

    assert result.returncode == 1
    assert result.stderr == (
        f'{shown}admission webhook "{hook_name}" denied the request: tenants may not create '
        "namespaces\n"
    )
    assert not namespace_exists(kubeconfig, f"{prefix}-a")
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


def answered(cluster: Cluster, name: str) -> tuple[int, str, str]:
    """The HTTP status, Content-Type and body of creating namespace ``name``."""
    core: Any = k8s_client.CoreV1Api(cluster.api_client)
    with pytest.raises(k8s_client.ApiException) as refused:
        core.create_namespace({"metadata": {"name": name}})
    headers = refused.value.headers or {}
    return int(refused.value.status), headers.get("Content-Type", ""), str(refused.value.body)


@pytest.mark.parametrize("kind", ["Validating", "Mutating"])
def test_a_refusal_reaches_the_client_as_kube_apiserver_converts_it(
    cluster: Cluster, webhook: WebhookServer, kind: str
):
    prefix = cluster.unique("refused")
    refusals = {f"{prefix}-{index}": refusal for index, (refusal, _) in enumerate(REFUSALS)}
    webhook.answer = lambda request: {
        "allowed": False,
        **({} if refusals[request["name"]] is None else {"status": refusals[request["name"]]}),
    }
    hook_name = register(cluster, kind, at(webhook), prefix)

    seen, expected = {}, {}
    for name, (_, wanted) in zip(refusals, REFUSALS, strict=True):
        code, content_type, body = answered(cluster, name)
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
    prefix = cluster.unique("refused")
    webhook.answer = lambda _: denied("no", code=1000)
    register(cluster, "Validating", at(webhook), prefix)

    code, content_type, body = answered(cluster, f"{prefix}-a")

    assert (code, content_type) == (500, "text/plain; charset=utf-8")
    assert body == "This request caused apiserver to panic. Look in the logs for details.\n"


def test_a_denied_label_change_leaves_the_namespace_as_it_was(
    cluster: Cluster, kubeconfig: Path, webhook: WebhookServer
):
    name = cluster.namespace("labelled")
    webhook.answer = lambda review: (
        denied("team labels are managed by the platform")
        if "team" in review["object"]["metadata"].get("labels", {})
        else {"allowed": True}
    )
    hook_name = register(cluster, "Validating", at(webhook), name)

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
    prefix = cluster.unique("mutated")
    label = {"op": "add", "path": "/metadata/labels/stamped-by", "value": "webhook"}
    webhook.answer = lambda _: patched(label)
    register(cluster, "Mutating", at(webhook), prefix)

    created = kubectl(kubeconfig, "create", "namespace", f"{prefix}-a")

    assert created.returncode == 0, created.stderr
    delete_later(cluster, f"{prefix}-a")
    stored = json.loads(kubectl(kubeconfig, "get", "namespace", f"{prefix}-a", "-o", "json").stdout)
    assert stored["metadata"]["labels"]["stamped-by"] == "webhook"


def test_a_webhook_that_is_down_refuses_requests_under_failure_policy_fail(
    cluster: Cluster, kubeconfig: Path
):
    prefix = cluster.unique("down")
    down = {"url": f"https://127.0.0.1:{free_port()}/validate"}
    hook_name = register(cluster, "Validating", down, prefix)

    result = kubectl(kubeconfig, "create", "namespace", f"{prefix}-a")

    assert result.returncode == 1
    assert result.stderr.startswith(
        "Error from server (InternalError): Internal error occurred: "
        f'failed calling webhook "{hook_name}": failed to call webhook: '
    )
    assert not namespace_exists(kubeconfig, f"{prefix}-a")


def test_a_webhook_that_is_down_is_skipped_under_failure_policy_ignore(
    cluster: Cluster, kubeconfig: Path
):
    prefix = cluster.unique("down")
    down = {"url": f"https://127.0.0.1:{free_port()}/validate"}
    register(cluster, "Validating", down, prefix, failurePolicy="Ignore")

    result = kubectl(kubeconfig, "create", "namespace", f"{prefix}-a")

    assert result.returncode == 0, result.stderr
    delete_later(cluster, f"{prefix}-a")
    assert namespace_exists(kubeconfig, f"{prefix}-a")


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
        "metadata": {"name": name},
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
    prefix = cluster.unique("invalid")
    webhook.answer = lambda _: denied("the webhook should not have been asked")
    register(cluster, "Validating", at(webhook), prefix)
    manifest = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": f"{prefix}-a", "labels": {"team": "~"}},
    }

    result = kubectl(kubeconfig, "apply", "-f", "-", stdin=json.dumps(manifest))

    assert result.returncode == 1
    assert "is invalid" in result.stderr
    assert 'metadata.labels: Invalid value: "~"' in result.stderr
    assert webhook.reviews == []


def test_a_webhooks_warnings_reach_the_kubectl_user(
    cluster: Cluster, kubeconfig: Path, webhook: WebhookServer
):
    prefix = cluster.unique("warned")
    webhook.answer = lambda _: {"allowed": True, "warnings": ['quota "small" is nearly used']}
    register(cluster, "Validating", at(webhook), prefix)

    created = kubectl(kubeconfig, "create", "namespace", f"{prefix}-a")

    assert created.returncode == 0, created.stderr
    delete_later(cluster, f"{prefix}-a")
    assert 'Warning: quota "small" is nearly used' in created.stderr.splitlines()
