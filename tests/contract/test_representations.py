"""The forms a LIST or GET answers in, chosen by the Accept header as kube-apiserver negotiates
it (handlers/response.go): ``as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`` gives every item's
metadata alone, for built-in and custom resources, which ``kubectl accurate list`` asks of the
SubNamespaces; a clause naming a form the server does not serve is skipped for the next one,
and with none left the answer is 406. Pinned through the ``kubernetes`` package's client, so the
same tests run against a real cluster."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from accurate_testbed.cluster import Cluster

METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


@pytest.fixture
def listed(cluster: Cluster, subnamespace_crd: None) -> Iterator[tuple[str, str]]:
    """A namespace of the test's holding a ConfigMap and a SubNamespace, both named ``team``;
    the paths of its ConfigMaps and SubNamespaces."""
    namespace = cluster.namespace("representations")
    kube = cluster.kube()
    configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
    subnamespaces = f"/apis/accurate.cybozu.com/v2/namespaces/{namespace}/subnamespaces"
    kube.create(configmaps, {"metadata": {"name": "team"}, "data": {"key": "value"}})
    child = cluster.unique("team")
    sub = {
        "apiVersion": "accurate.cybozu.com/v2",
        "kind": "SubNamespace",
        "metadata": {"name": child, "labels": {"tier": "web"}},
        "spec": {"labels": cluster.labels},
    }
    kube.create(subnamespaces, sub)
    yield configmaps, subnamespaces


def _get(api_client: Any, path: str, accept: str) -> tuple[int, Any]:
    """Status and decoded body of GET ``path`` with the Accept header given."""
    method, url, sent, _, _ = api_client.param_serialize(
        "GET", path, header_params={"Accept": accept}, auth_settings=["BearerToken"]
    )
    response = api_client.call_api(method, url, sent)
    return response.status, json.loads(response.read())


@pytest.mark.parametrize("which", [0, 1], ids=["built-in", "custom"])
def test_a_list_as_metadata_has_each_items_metadata_alone(
    api_client: Any, listed: tuple[str, str], which: int
) -> None:
    status, body = _get(api_client, listed[which], f"{METADATA_LIST},application/json")
    assert status == 200
    assert (body["kind"], body["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert body["metadata"]["resourceVersion"]
    [item] = body["items"]
    assert (item["kind"], item["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
    assert set(item) == {"kind", "apiVersion", "metadata"}
    assert item["metadata"]["namespace"] and item["metadata"]["uid"]
    if which == 1:
        assert item["metadata"]["labels"]["tier"] == "web"


def test_one_object_as_metadata(api_client: Any, listed: tuple[str, str]) -> None:
    status, body = _get(api_client, f"{listed[0]}/team", METADATA)
    assert status == 200
    assert body["kind"] == "PartialObjectMetadata"
    assert body["metadata"]["name"] == "team" and "data" not in body


def test_a_form_that_does_not_fit_is_not_acceptable(
    api_client: Any, listed: tuple[str, str]
) -> None:
    assert _get(api_client, f"{listed[0]}/team", METADATA_LIST)[0] == 406
    assert _get(api_client, listed[0], METADATA)[0] == 406


def test_a_form_not_served_falls_back_to_the_next_clause_or_is_refused(
    api_client: Any, listed: tuple[str, str]
) -> None:
    unknown = "application/json;as=PartialObjectMetadataList;g=example.com;v=v1"
    status, body = _get(api_client, listed[1], f"{unknown},application/json")
    assert status == 200
    assert body["kind"] == "SubNamespaceList"
    assert body["items"][0]["spec"]["labels"]
    status, body = _get(api_client, listed[1], unknown)
    assert status == 406
    assert body["reason"] == "NotAcceptable"


def test_the_adapter_lists_metadata_only(cluster: Cluster, listed: tuple[str, str]) -> None:
    """What ``list`` reads the SubNamespaces with: their names and namespaces, no spec."""
    found = cluster.kube().list_metadata(listed[1])
    [item] = found["items"]
    assert item["metadata"]["namespace"] == listed[1].split("/")[-2]
    assert "spec" not in item
