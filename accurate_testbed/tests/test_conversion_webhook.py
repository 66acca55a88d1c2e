"""Contract: a CRD with a conversion webhook serves its objects at every served version.

A Widget CRD stores v1 and serves v2 too, converting through a real HTTPS webhook on
127.0.0.1 (as kube-apiserver reaches one registered with ``clientConfig.url``). Reading at v2
sends a ConversionReview (apiextensions.k8s.io/v1) with every object of the read; the answer
gives the v2 objects, of which only labels and annotations may change the metadata. A webhook
that fails the conversion fails the read with a 500 whose message is the webhook's reason.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
import trustme
from kubernetes import client as k8s_client

from accurate_testbed.cluster import Cluster
from accurate_testbed.tests.helpers import error_of, request
from accurate_testbed.tests.test_custom import GROUP, widget_crd
from accurate_testbed.tests.webhook_server import Raw, WebhookServer
from accurate_testbed.waiting import wait_for

REVIEW = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}


@pytest.fixture
def converter() -> Iterator[WebhookServer]:
    server = WebhookServer(trustme.CA())
    yield server
    server.close()


def to_v2(request_: dict[str, Any]) -> Raw:
    """A webhook that renames spec.color to spec.colour and labels what it converted (and
    tries to change the uid, which the server does not take)."""
    converted = []
    for obj in request_["objects"]:
        new = copy.deepcopy(obj)
        new["apiVersion"] = request_["desiredAPIVersion"]
        new["spec"]["colour"] = new["spec"].pop("color")
        new["metadata"].setdefault("labels", {})["converted"] = "yes"
        new["metadata"]["uid"] = "not-the-uid"
        converted.append(new)
    response = {"uid": request_["uid"], "result": {"status": "Success"}}
    body = {**REVIEW, "response": {**response, "convertedObjects": converted}}
    return Raw(200, json.dumps(body).encode())


def failing(request_: dict[str, Any]) -> Raw:
    result = {"status": "Failure", "message": "cannot convert that"}
    body = {**REVIEW, "response": {"uid": request_["uid"], "result": result}}
    return Raw(200, json.dumps(body).encode())


@pytest.fixture
def widgets(cluster: Cluster, converter: WebhookServer) -> str:
    """A Widget CRD storing v1, also serving v2 through the converter webhook."""
    plural = f"{cluster.unique('convwidgets').replace('-', '')}s"
    crd = widget_crd(plural)
    v1 = crd["spec"]["versions"][0]
    crd["spec"]["versions"].append({**copy.deepcopy(v1), "name": "v2", "storage": False})
    crd["spec"]["conversion"] = {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"url": converter.url("/convert"), "caBundle": converter.ca_bundle},
        },
    }
    extensions: Any = k8s_client.ApiextensionsV1Api(cluster.api_client)
    extensions.create_custom_resource_definition(cluster.owned(crd))
    wait_for(lambda: _served(cluster, f"/apis/{GROUP}/v2", plural), 30, "the CRD to serve v2")
    return plural


def _served(cluster: Cluster, path: str, plural: str) -> bool:
    try:
        listed = request(cluster.api_client, "GET", path)
    except k8s_client.ApiException:
        return False
    return plural in {entry["name"] for entry in listed["resources"]}


def _widget(cluster: Cluster, plural: str, name: str) -> dict[str, Any]:
    ns = cluster.namespace()
    body = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"color": "red"},
    }
    return request(cluster.api_client, "POST", f"/apis/{GROUP}/v1/namespaces/{ns}/{plural}", body)


def test_a_read_at_another_version_goes_through_the_webhook(
    cluster: Cluster, widgets: str, converter: WebhookServer
) -> None:
    converter.answer = to_v2
    created = _widget(cluster, widgets, "w")
    ns = created["metadata"]["namespace"]
    assert converter.reviews == []  # stored as sent: nothing to convert

    read = request(cluster.api_client, "GET", f"/apis/{GROUP}/v2/namespaces/{ns}/{widgets}/w")

    assert read["apiVersion"] == f"{GROUP}/v2"
    assert read["spec"] == {"colour": "red", "size": 3}
    assert read["metadata"]["labels"]["converted"] == "yes"
    assert read["metadata"]["uid"] == created["metadata"]["uid"]
    (review,) = converter.reviews
    assert (review["apiVersion"], review["kind"]) == (REVIEW["apiVersion"], REVIEW["kind"])
    assert review["request"]["desiredAPIVersion"] == f"{GROUP}/v2"
    assert [o["metadata"]["name"] for o in review["request"]["objects"]] == ["w"]
    assert converter.paths == ["/convert?timeout=30s"]


def test_a_list_converts_all_its_objects_in_one_review(
    cluster: Cluster, widgets: str, converter: WebhookServer
) -> None:
    converter.answer = to_v2
    ns = _widget(cluster, widgets, "a")["metadata"]["namespace"]
    body = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "b"}}
    request(
        cluster.api_client,
        "POST",
        f"/apis/{GROUP}/v1/namespaces/{ns}/{widgets}",
        {**body, "spec": {"color": "blue"}},
    )

    listed = request(cluster.api_client, "GET", f"/apis/{GROUP}/v2/namespaces/{ns}/{widgets}")

    assert [item["spec"]["colour"] for item in listed["items"]] == ["red", "blue"]
    assert len(converter.reviews) == 1


def test_a_failed_conversion_fails_the_read_with_the_webhook_s_reason(
    cluster: Cluster, widgets: str, converter: WebhookServer
) -> None:
    converter.answer = failing
    ns = _widget(cluster, widgets, "w")["metadata"]["namespace"]

    with pytest.raises(k8s_client.ApiException) as caught:
        request(cluster.api_client, "GET", f"/apis/{GROUP}/v2/namespaces/{ns}/{widgets}/w")

    assert caught.value.status == 500
    status = error_of(caught.value)
    assert "reason" not in status
    assert status["message"] == (
        f"conversion webhook for {GROUP}/v1, Kind=Widget failed: cannot convert that"
    )
