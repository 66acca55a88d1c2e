"""Admission webhooks of the in-memory API server: matching, and calls to a real HTTPS webhook.

The matching rules are checked as plain functions; everything that involves a call goes to a
webhook server on 127.0.0.1 with a certificate from a test CA, as kube-apiserver would reach it.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import trustme

from accurate_testbed.apiserver.errors import ApiError
from accurate_testbed.apiserver.webhooks import (
    AdmissionDenied,
    AdmissionRequest,
    WebhookConfigurations,
    admit,
    rule_matches,
    selector_matches,
)
from accurate_testbed.processes import free_port
from accurate_testbed.tests.webhook_server import (
    EMPTY_REVIEW,
    Raw,
    WebhookServer,
    denied,
    patched,
)

# object is null on DELETE and oldObject on CREATE: selecting a field of null is an error, which
# failurePolicy Fail turns into a refused request, so both sides must be guarded.
ACCURATE_CONDITION = " || ".join(
    f"({side} != null && {side}.metadata.?labels.orValue({{}})"
    '.exists(k, k.startsWith("accurate.cybozu.com/")))'
    for side in ("object", "oldObject")
)
NAMESPACES = {"group": "", "version": "v1", "resource": "namespaces"}
CONFIGMAPS = {"group": "", "version": "v1", "resource": "configmaps"}
# For tests of matching alone: a call would fail, so a test that wrongly calls cannot pass.
NEVER_CALLED = "https://webhook.invalid/never-called"
ANY_RULE = {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def server(ca: trustme.CA) -> Iterator[WebhookServer]:
    webhook_server = WebhookServer(ca)
    yield webhook_server
    webhook_server.close()


def hook(server: WebhookServer | None, name: str = "check.example.com", **fields: Any) -> dict:
    """A webhook entry on every operation of namespaces and configmaps, overridable per field."""
    client = (
        {"url": server.url(), "caBundle": server.ca_bundle} if server else {"url": NEVER_CALLED}
    )
    rule = {"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"]}
    spec = {
        "name": name,
        "clientConfig": client,
        "rules": [{**rule, "resources": ["namespaces", "configmaps"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }
    return {**spec, **fields}


def config(*webhooks: dict, name: str = "checks") -> dict:
    return {"metadata": {"name": name}, "webhooks": list(webhooks)}


def validating(*webhooks: dict) -> WebhookConfigurations:
    return WebhookConfigurations.from_objects([], [config(*webhooks)])


def mutating(*configurations: dict) -> WebhookConfigurations:
    return WebhookConfigurations.from_objects(configurations, [])


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def configmap(name: str, **labels: str) -> dict[str, Any]:
    metadata = {"name": name, "namespace": "team", "labels": labels}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"a": "b"}}


def request(
    operation: str, new: dict | None = None, old: dict | None = None, **fields: Any
) -> AdmissionRequest:
    """A request as the server builds it: a Namespace unless the objects say otherwise."""
    obj = new or old or {}
    is_namespace = obj.get("kind", "Namespace") == "Namespace"
    name = obj.get("metadata", {}).get("name", "")
    values: dict[str, Any] = {
        "operation": operation,
        "kind": {"group": "", "version": "v1", "kind": obj.get("kind", "Namespace")},
        "resource": NAMESPACES if is_namespace else CONFIGMAPS,
        "sub_resource": None,
        "name": name,
        "namespace": (name if operation != "CREATE" else "") if is_namespace else "team",
        "obj": new,
        "old_obj": old,
        "user_info": {"username": "alice", "groups": ["tenants", "system:authenticated"]},
        "dry_run": False,
        "options": None,
    }
    return AdmissionRequest(**{**values, **fields})


def denial(configurations: WebhookConfigurations, req: AdmissionRequest) -> dict:
    """The Status of a request the webhooks refuse."""
    with pytest.raises(AdmissionDenied) as raised:
        admit(configurations, req, {})
    return raised.value.status


# --- rules -------------------------------------------------------------------------------------


def pod_request(sub_resource: str | None = None, namespace: str = "team") -> AdmissionRequest:
    pods = {"group": "", "version": "v1", "resource": "pods"}
    fields: dict[str, Any] = {"sub_resource": sub_resource, "namespace": namespace}
    return request("UPDATE", configmap("p"), resource=pods, **fields)


@pytest.mark.parametrize(
    ("resources", "sub_resource", "matches"),
    [
        (["pods"], None, True),
        (["pods"], "status", False),
        (["*"], None, True),
        (["*"], "status", False),
        (["*/*"], "status", True),
        (["pods/*"], "status", True),
        (["pods/*"], None, True),
        (["pods/status"], "status", True),
        (["pods/status"], "log", False),
        (["*/status"], "status", True),
        (["configmaps", "pods/log"], "log", True),
    ],
)
def test_resources_and_subresources(resources: list, sub_resource: str | None, matches: bool):
    rule = {**ANY_RULE, "resources": resources}
    assert rule_matches(rule, pod_request(sub_resource)) is matches


@pytest.mark.parametrize(
    ("field", "values", "matches"),
    [
        ("operations", ["CREATE", "DELETE"], False),
        ("operations", ["UPDATE"], True),
        ("apiGroups", ["apps"], False),
        ("apiGroups", ["apps", ""], True),
        ("apiVersions", ["v1beta1"], False),
        ("apiVersions", ["*"], True),
    ],
)
def test_operations_groups_and_versions(field: str, values: list, matches: bool):
    assert rule_matches({**ANY_RULE, field: values}, pod_request()) is matches


@pytest.mark.parametrize(
    ("scope", "namespaced_pod", "cluster_object", "namespace_object"),
    [("*", True, True, True), ("Namespaced", True, False, False), ("Cluster", False, True, True)],
)
def test_scope_treats_namespaces_as_cluster_scoped(
    scope: str, namespaced_pod: bool, cluster_object: bool, namespace_object: bool
):
    rule = {**ANY_RULE, "scope": scope}
    assert rule_matches(rule, pod_request()) is namespaced_pod
    assert rule_matches(rule, pod_request(namespace="")) is cluster_object
    # kube-apiserver sets a Namespace's own name as the request namespace on UPDATE.
    assert rule_matches(rule, request("UPDATE", namespace("a"), namespace("a"))) is namespace_object


# --- label selectors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        (None, True),
        ({}, True),
        ({"matchLabels": {"team": "a"}}, True),
        ({"matchLabels": {"team": "b"}}, False),
        ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}]}, False),
        ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, True),
        (
            {
                "matchLabels": {"team": "a"},
                "matchExpressions": [{"key": "tier", "operator": "Exists"}],
            },
            False,
        ),
    ],
)
def test_label_selectors(selector: dict | None, matches: bool):
    assert selector_matches(selector, {"team": "a"}) is matches


def test_namespace_selector_reads_the_namespace_of_the_object():
    webhook = validating(hook(None, namespaceSelector={"matchLabels": {"watched": "yes"}}))
    (check,) = webhook.validating
    assert check.should_call(request("CREATE", configmap("c")), {"watched": "yes"})
    assert not check.should_call(request("CREATE", configmap("c")), {"watched": "no"})


def test_namespace_selector_reads_a_namespaces_own_labels():
    (check,) = validating(
        hook(None, namespaceSelector={"matchLabels": {"watched": "yes"}})
    ).validating
    old, new = namespace("a"), namespace("a", watched="yes")
    assert check.should_call(request("CREATE", new), None)
    assert check.should_call(request("UPDATE", new, old), {})
    assert not check.should_call(request("UPDATE", old, new), {"watched": "yes"})
    assert check.should_call(request("DELETE", None, new), None)


def test_a_missing_namespace_is_not_found_only_when_a_rule_matches():
    selector = {"matchLabels": {"watched": "yes"}}
    (check,) = validating(hook(None, namespaceSelector=selector)).validating
    with pytest.raises(AdmissionDenied) as raised:
        check.should_call(request("CREATE", configmap("c")), None)
    assert raised.value.status["code"] == 404
    assert raised.value.status["message"] == 'namespaces "team" not found'
    secrets = {"group": "", "version": "v1", "resource": "secrets"}
    assert not check.should_call(request("CREATE", configmap("c"), resource=secrets), None)


def test_namespace_selector_does_not_apply_to_other_cluster_scoped_objects():
    selector = {"matchLabels": {"watched": "yes"}}
    (check,) = validating(hook(None, namespaceSelector=selector, rules=[ANY_RULE])).validating
    roles = {"group": "rbac.authorization.k8s.io", "version": "v1", "resource": "clusterroles"}
    role = {"kind": "ClusterRole", "metadata": {"name": "r"}}
    assert check.should_call(request("CREATE", role, resource=roles, namespace=""), None)


def test_object_selector_matches_the_new_or_the_old_object():
    (check,) = validating(hook(None, objectSelector={"matchLabels": {"app": "x"}})).validating
    assert check.should_call(request("CREATE", configmap("c", app="x")), {})
    assert not check.should_call(request("CREATE", configmap("c", app="y")), {})
    assert check.should_call(request("UPDATE", configmap("c"), configmap("c", app="x")), {})
    assert check.should_call(request("DELETE", None, configmap("c", app="x")), {})
    assert not check.should_call(request("DELETE", None, configmap("c")), {})


# --- match conditions --------------------------------------------------------------------------


def conditional(*expressions: str, **fields: Any) -> Any:
    conditions = [{"name": f"c{i}", "expression": e} for i, e in enumerate(expressions)]
    (check,) = validating(hook(None, matchConditions=conditions, **fields)).validating
    return check


def test_accurates_match_condition_selects_namespaces_with_accurate_labels():
    check = conditional(ACCURATE_CONDITION)
    ours = namespace("a", **{"accurate.cybozu.com/type": "root"})
    assert check.should_call(request("CREATE", ours), None)
    assert not check.should_call(request("CREATE", namespace("b", team="x")), None)
    assert not check.should_call(request("CREATE", namespace("c")), None)
    assert check.should_call(request("UPDATE", namespace("a"), ours), None)
    assert check.should_call(request("DELETE", None, ours), None)
    assert not check.should_call(request("DELETE", None, namespace("c")), None)


def test_selecting_from_the_null_object_of_a_delete_is_an_error():
    check = conditional('object.metadata.?labels.orValue({}).exists(k, k == "team")')
    with pytest.raises(AdmissionDenied) as raised:
        check.should_call(request("DELETE", None, namespace("a", team="x")), None)
    assert raised.value.status["code"] == 403


@pytest.mark.parametrize(
    ("expression", "matches"),
    [
        ("has(object.metadata.labels)", True),
        ("has(object.spec)", False),
        ('oldObject != null && oldObject.metadata.name == "a"', False),
        ('request.operation == "CREATE" && request.name == "a"', True),
        ('"tenants" in request.userInfo.groups', True),
        ('request.kind.kind == "Namespace" && request.resource.resource == "namespaces"', True),
        ('object.metadata.name.matches("^a$") && object.metadata.name.lowerAscii() == "a"', True),
    ],
)
def test_match_conditions_see_object_old_object_and_request(expression: str, matches: bool):
    assert (
        conditional(expression).should_call(request("CREATE", namespace("a", x="1")), None)
        is matches
    )


def test_every_condition_must_hold():
    assert not conditional("true", "false").should_call(request("CREATE", namespace("a")), None)


def test_a_failing_condition_with_failure_policy_fail_forbids_the_request():
    check = conditional("object.spec.finalizers.size() > 0")
    with pytest.raises(AdmissionDenied) as raised:
        check.should_call(request("CREATE", namespace("a")), None)
    status = raised.value.status
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    assert status["message"].startswith('namespaces "a" is forbidden: expression ')
    assert "resulted in error" in status["message"]


def test_a_failing_condition_with_failure_policy_ignore_skips_the_webhook():
    check = conditional("object.spec.finalizers.size() > 0", failurePolicy="Ignore")
    assert not check.should_call(request("CREATE", namespace("a")), None)


def test_a_false_condition_wins_over_a_failing_one():
    check = conditional("object.spec.finalizers.size() > 0", "false")
    assert not check.should_call(request("CREATE", namespace("a")), None)


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("object.metadata.name ==", "Syntax error"),
        ('authorizer.group("").resource("pods").check("get").allowed()', "no CEL authorizer"),
        ("1 + 1", "must evaluate to bool"),
    ],
)
def test_conditions_that_cannot_compile_are_refused_at_registration(expression: str, reason: str):
    with pytest.raises(ApiError) as raised:
        conditional(expression)
    status = raised.value.status
    assert status["code"] == 422
    assert "webhooks[0].matchConditions[0].expression: Invalid value" in status["message"]
    assert reason in status["message"]


# --- registration ------------------------------------------------------------------------------


def test_invalid_configurations_are_refused_with_every_problem():
    bad = hook(
        None,
        name="short.name",
        clientConfig={"url": "http://127.0.0.1:1/x"},
        sideEffects="Some",
        timeoutSeconds=31,
        namespaceSelector={"matchExpressions": [{"key": "a", "operator": "In"}]},
    )
    bad.pop("admissionReviewVersions")
    duplicate = hook(None, name="short.name", clientConfig={})
    with pytest.raises(ApiError) as raised:
        validating(bad, duplicate)
    status = raised.value.status
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert status["message"].startswith(
        'ValidatingWebhookConfiguration.admissionregistration.k8s.io "checks" is invalid: ['
    )
    assert {cause["field"] for cause in status["details"]["causes"]} == {
        "webhooks[0].name",
        "webhooks[0].sideEffects",
        "webhooks[0].timeoutSeconds",
        "webhooks[0].admissionReviewVersions",
        "webhooks[0].clientConfig.url",
        "webhooks[0].namespaceSelector.matchExpressions[0].values",
        "webhooks[1].name",
        "webhooks[1].clientConfig",
    }
    assert "'https' is the only allowed URL scheme" in status["message"]
    assert (
        'Unsupported value: "Some": supported values: "None", "NoneOnDryRun"' in status["message"]
    )


def test_webhook_configurations_themselves_are_never_admitted():
    kinds = {"group": "admissionregistration.k8s.io", "version": "v1"}
    vwc = {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "x"}}
    configurations = validating(hook(None, rules=[ANY_RULE]))
    req = request(
        "CREATE",
        vwc,
        kind={**kinds, "kind": "ValidatingWebhookConfiguration"},
        resource={**kinds, "resource": "validatingwebhookconfigurations"},
        namespace="",
    )
    assert admit(configurations, req, None) == vwc


# --- calls -------------------------------------------------------------------------------------


def test_the_review_carries_the_request_as_kube_apiserver_sends_it(server: WebhookServer):
    options = {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl"}
    old, new = namespace("a"), namespace("a", team="x")
    admit(
        validating(hook(server)), request("UPDATE", new, old, dry_run=True, options=options), None
    )
    (review,) = server.reviews
    assert (review["apiVersion"], review["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    sent = review["request"]
    assert sent["uid"]
    assert (
        sent["kind"] == sent["requestKind"] == {"group": "", "version": "v1", "kind": "Namespace"}
    )
    assert sent["resource"] == sent["requestResource"] == NAMESPACES
    assert (sent["name"], sent["namespace"], sent["operation"]) == ("a", "a", "UPDATE")
    assert sent["userInfo"]["username"] == "alice"
    assert (sent["object"], sent["oldObject"]) == (new, old)
    assert sent["dryRun"] is True
    assert sent["options"] == options
    assert server.paths == ["/validate?timeout=10s"]


def test_calls_to_a_webhook_share_one_kept_alive_connection(server: WebhookServer):
    for name in ("a", "b", "c"):
        admit(validating(hook(server)), request("CREATE", namespace(name)), None)
    assert len(server.reviews) == 3
    assert len(set(server.clients)) == 1


def test_a_connection_the_webhook_dropped_is_replaced_and_the_call_made(server: WebhookServer):
    admit(validating(hook(server)), request("CREATE", namespace("a")), None)
    server.drop_connections()
    admit(validating(hook(server)), request("CREATE", namespace("b")), None)
    assert [review["request"]["name"] for review in server.reviews] == ["a", "b"]
    assert len(set(server.clients)) == 2


def test_a_denial_reads_like_kube_apiservers(server: WebhookServer):
    server.answer = lambda _: denied("parent missing")
    status = denial(
        validating(hook(server, name="vnamespace.kb.io")), request("CREATE", namespace("a"))
    )
    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'admission webhook "vnamespace.kb.io" denied the request: parent missing',
        "code": 400,
    }


def test_a_denial_keeps_the_webhooks_code_and_reason(server: WebhookServer):
    server.answer = lambda _: denied("bad labels", code=422, reason="Invalid")
    status = denial(validating(hook(server)), request("CREATE", configmap("c")))
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert (
        status["message"] == 'admission webhook "check.example.com" denied the request: bad labels'
    )


def test_a_denial_without_a_message_says_so(server: WebhookServer):
    server.answer = lambda _: {"allowed": False}
    status = denial(validating(hook(server)), request("CREATE", namespace("a")))
    assert status["message"] == (
        'admission webhook "check.example.com" denied the request without explanation'
    )


def test_the_first_refusing_validating_webhook_in_order_is_reported(server: WebhookServer):
    server.answer = lambda _: denied("no")
    listed_first, listed_second = hook(server, name="zeta.example.com"), hook(server)
    status = denial(validating(listed_first, listed_second), request("CREATE", namespace("a")))
    assert 'admission webhook "zeta.example.com" denied' in status["message"]
    assert len(server.reviews) == 2


def test_warnings_are_collected_even_when_the_request_is_refused(server: WebhookServer):
    server.answer = lambda _: {"allowed": False, "warnings": ["label team is deprecated"]}
    warnings: list[str] = []
    with pytest.raises(AdmissionDenied):
        admit(validating(hook(server)), request("CREATE", namespace("a")), None, warnings=warnings)
    assert warnings == ["label team is deprecated"]


def test_mutating_patches_apply_in_configuration_order_and_validation_sees_the_result(
    server: WebhookServer,
):
    seen: list[dict] = []

    def answer(review: dict[str, Any]) -> dict[str, Any]:
        seen.append(review["object"]["metadata"].get("labels", {}))
        label = "first" if len(seen) == 1 else "second"
        return patched({"op": "add", "path": f"/metadata/labels/{label}", "value": "yes"})

    server.answer = answer
    configurations = mutating(
        config(hook(server, name="b.example.com"), name="b-config"),
        config(hook(server, name="a.example.com"), name="a-config"),
    )
    result = admit(configurations, request("CREATE", namespace("a", team="x")), None)
    assert result is not None
    assert result["metadata"]["labels"] == {"team": "x", "first": "yes", "second": "yes"}
    assert seen == [{"team": "x"}, {"team": "x", "first": "yes"}]
    assert len({review["request"]["uid"] for review in server.reviews}) == 2


def test_a_patch_that_cannot_apply_fails_the_request_whatever_the_failure_policy(
    server: WebhookServer,
):
    server.answer = lambda _: patched({"op": "remove", "path": "/spec/missing"})
    configurations = mutating(config(hook(server, failurePolicy="Ignore")))
    status = denial(configurations, request("CREATE", namespace("a")))
    assert (status["code"], status["reason"]) == (500, "InternalError")
    assert status["message"].startswith("Internal error occurred: ")


def test_a_patch_on_delete_is_refused(server: WebhookServer):
    server.answer = lambda _: patched({"op": "add", "path": "/metadata/labels/x", "value": "y"})
    status = denial(mutating(config(hook(server))), request("DELETE", None, namespace("a")))
    assert (
        'admission webhook "check.example.com" attempted to modify the object' in status["message"]
    )


def test_a_validating_webhook_may_not_patch(server: WebhookServer):
    server.answer = lambda _: patched({"op": "add", "path": "/metadata/labels/x", "value": "y"})
    status = denial(validating(hook(server)), request("CREATE", namespace("a")))
    assert status["message"] == (
        'Internal error occurred: failed calling webhook "check.example.com": received invalid '
        "webhook response: validating webhook may not return response.patch"
    )


def test_deletes_return_no_object(server: WebhookServer):
    assert admit(validating(hook(server)), request("DELETE", None, namespace("a")), None) is None
    assert server.reviews[0]["request"]["object"] is None


# --- call failures and failurePolicy -----------------------------------------------------------


def unreachable(**fields: Any) -> dict:
    return hook(None, clientConfig={"url": f"https://127.0.0.1:{free_port()}/v"}, **fields)


def test_an_unreachable_webhook_fails_the_request_by_default():
    status = denial(validating(unreachable()), request("CREATE", namespace("a")))
    assert (status["code"], status["reason"]) == (500, "InternalError")
    assert status["message"].startswith(
        'Internal error occurred: failed calling webhook "check.example.com": failed to call '
        'webhook: Post "https://127.0.0.1:'
    )
    assert status["message"].endswith("connect: connection refused")
    assert status["details"]["causes"][0]["message"].startswith("failed calling webhook")


def test_an_unreachable_webhook_with_failure_policy_ignore_is_skipped():
    new = namespace("a")
    assert (
        admit(validating(unreachable(failurePolicy="Ignore")), request("CREATE", new), None) == new
    )
    configurations = mutating(config(unreachable(failurePolicy="Ignore")))
    assert admit(configurations, request("CREATE", new), None) == new


def test_a_service_reference_cannot_be_reached():
    service = {"namespace": "accurate", "name": "webhook-service", "path": "/validate"}
    status = denial(
        validating(hook(None, clientConfig={"service": service})), request("CREATE", namespace("a"))
    )
    assert status["code"] == 500
    assert "https://webhook-service.accurate.svc:443/validate?timeout=10s" in status["message"]
    assert "register the webhook with clientConfig.url" in status["message"]


def test_a_certificate_from_another_ca_is_a_call_failure(server: WebhookServer):
    other = base64.b64encode(trustme.CA().cert_pem.bytes()).decode()
    webhook = hook(server, clientConfig={"url": server.url(), "caBundle": other})
    status = denial(validating(webhook), request("CREATE", namespace("a")))
    assert "tls: failed to verify certificate" in status["message"]
    assert server.reviews == []


def test_a_webhook_slower_than_its_timeout_is_a_call_failure(server: WebhookServer):
    release = threading.Event()

    def stall(_: dict[str, Any]) -> dict[str, Any]:
        release.wait(timeout=30)
        return {"allowed": True}

    server.answer = stall
    try:
        status = denial(
            validating(hook(server, timeoutSeconds=1)), request("CREATE", namespace("a"))
        )
    finally:
        release.set()
    assert status["message"].endswith("context deadline exceeded")
    assert server.paths == ["/validate?timeout=1s"]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (Raw(500, b""), "the server responded with the status code 500"),
        (Raw(503, json.dumps({"kind": "Status", "message": "overloaded"}).encode()), "overloaded"),
        (Raw(200, b"<html>"), "couldn't get version/kind; json parse error"),
        (Raw(200, json.dumps(EMPTY_REVIEW).encode()), "webhook response was absent"),
        ({"uid": "someone-else", "allowed": True}, 'got "someone-else"'),
    ],
)
def test_unusable_answers_are_call_failures(server: WebhookServer, answer: Any, reason: str):
    server.answer = lambda _: answer
    status = denial(validating(hook(server)), request("CREATE", namespace("a")))
    assert status["code"] == 500
    assert 'failed calling webhook "check.example.com"' in status["message"]
    assert reason in status["message"]
    new = namespace("a")
    assert (
        admit(validating(hook(server, failurePolicy="Ignore")), request("CREATE", new), None) == new
    )


def test_a_webhook_that_only_takes_v1beta1_reviews_is_a_call_failure(server: WebhookServer):
    webhook = hook(server, admissionReviewVersions=["v1beta1"])
    status = denial(validating(webhook), request("CREATE", namespace("a")))
    assert "sends only admission.k8s.io/v1 AdmissionReviews" in status["message"]
    assert server.reviews == []
