"""Contract: CRDs registered at run time, custom objects, status, generation, apply and patches."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as k8s_client

from accurate_testbed.cluster import Cluster
from accurate_testbed.leftovers import HOLD
from accurate_testbed.tests.helpers import error_of, request
from accurate_testbed.waiting import CONTROLLER_TIMEOUT, wait_for

GROUP = "contract.example.com"


def widget_crd(plural: str) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": plural, "singular": plural[:-1]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "size": {"type": "integer", "default": 3},
                                        "color": {"type": "string"},
                                        "replicas": {
                                            "x-kubernetes-int-or-string": True,
                                            "anyOf": [{"type": "integer"}, {"type": "string"}],
                                        },
                                        "extra": {
                                            "type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True,
                                        },
                                    },
                                },
                                "status": {
                                    "type": "object",
                                    "properties": {"ready": {"type": "boolean"}},
                                },
                            },
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture
def widgets(cluster: Cluster) -> str:
    """Register a Widget CRD (unique plural, the test's labels) and return its plural."""
    plural = f"{cluster.unique('widgets').replace('-', '')}s"
    extensions: Any = k8s_client.ApiextensionsV1Api(cluster.api_client)
    extensions.create_custom_resource_definition(cluster.owned(widget_crd(plural)))

    def established() -> bool:
        crd = extensions.read_custom_resource_definition(f"{plural}.{GROUP}")
        conditions = {c.type: c.status for c in crd.status.conditions or []}
        return conditions.get("Established") == "True"

    wait_for(established, 30, "the CRD to be established")
    return plural


def collection(ns: str, plural: str) -> str:
    return f"/apis/{GROUP}/v1/namespaces/{ns}/{plural}"


def test_crd_appears_in_discovery(cluster: Cluster, widgets: str) -> None:
    listed = request(cluster.api_client, "GET", f"/apis/{GROUP}/v1")
    names = {entry["name"]: entry for entry in listed["resources"]}
    assert names[widgets]["kind"] == "Widget"
    assert names[widgets]["namespaced"] is True
    assert f"{widgets}/status" in names
    groups = request(cluster.api_client, "GET", "/apis")["groups"]
    assert GROUP in [group["name"] for group in groups]


def test_custom_object_is_pruned_and_defaulted(cluster: Cluster, widgets: str) -> None:
    ns = cluster.namespace()
    created = request(
        cluster.api_client,
        "POST",
        collection(ns, widgets),
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"color": "red", "unknown": 1, "extra": {"anything": {"goes": True}}},
        },
    )
    assert created["spec"] == {"color": "red", "size": 3, "extra": {"anything": {"goes": True}}}
    assert created["metadata"]["generation"] == 1


def refused_widget(cluster: Cluster, widgets: str, spec: dict[str, Any]) -> Any:
    """The error a Widget with this spec is refused with."""
    with pytest.raises(k8s_client.ApiException) as caught:
        request(
            cluster.api_client,
            "POST",
            collection(cluster.namespace(), widgets),
            {
                "apiVersion": f"{GROUP}/v1",
                "kind": "Widget",
                "metadata": {"name": "w"},
                "spec": spec,
            },
        )
    return caught.value


def test_custom_object_type_errors_are_invalid(cluster: Cluster, widgets: str) -> None:
    refused = refused_widget(cluster, widgets, {"size": "big"})
    status = error_of(refused)
    assert refused.status == 422
    assert status["details"]["causes"][0]["field"] == "spec.size"
    assert "spec.size in body must be of type integer" in status["message"]


def test_an_int_or_string_field_of_another_type_is_invalid(cluster: Cluster, widgets: str) -> None:
    """apiextensions validates x-kubernetes-int-or-string as the types integer and string
    (validation.go, ConvertJSONSchemaPropsWithPostProcess), so kube-openapi's type error joins
    them."""
    refused = refused_widget(cluster, widgets, {"replicas": [1]})
    assert refused.status == 422
    message = error_of(refused)["message"]
    assert 'spec.replicas in body must be of type integer,string: "array"' in message


def test_status_subresource_and_generation(cluster: Cluster, widgets: str) -> None:
    ns = cluster.namespace()
    base = collection(ns, widgets)
    body = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"color": "red"},
        "status": {"ready": True},
    }
    created = request(cluster.api_client, "POST", base, body)
    assert "status" not in created  # status is dropped on create

    merge = "application/merge-patch+json"
    labelled = request(
        cluster.api_client, "PATCH", f"{base}/w", {"metadata": {"labels": {"a": "b"}}}, merge
    )
    assert labelled["metadata"]["generation"] == 1  # metadata changes do not bump it
    ignored = request(cluster.api_client, "PATCH", f"{base}/w", {"status": {"ready": True}}, merge)
    assert "status" not in ignored  # the main endpoint ignores status
    with_status = request(
        cluster.api_client,
        "PATCH",
        f"{base}/w/status",
        {"status": {"ready": True}, "spec": {"color": "blue"}},
        merge,
    )
    assert with_status["status"] == {"ready": True}
    assert with_status["spec"]["color"] == "red"  # /status ignores everything else
    assert with_status["metadata"]["generation"] == 1
    respecced = request(
        cluster.api_client, "PATCH", f"{base}/w", {"spec": {"color": "blue"}}, merge
    )
    assert respecced["metadata"]["generation"] == 2
    assert respecced["status"] == {"ready": True}
    with pytest.raises(k8s_client.ApiException) as stale:
        request(cluster.api_client, "PUT", f"{base}/w/status", {**created, "status": {}})
    assert stale.value.status == 409


def test_put_without_resource_version_is_refused_for_custom_objects(
    cluster: Cluster, widgets: str
) -> None:
    ns = cluster.namespace()
    base = collection(ns, widgets)
    body = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}
    request(cluster.api_client, "POST", base, body)
    with pytest.raises(k8s_client.ApiException) as caught:
        request(cluster.api_client, "PUT", f"{base}/w", body)
    assert caught.value.status == 422
    assert (
        "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
        in (error_of(caught.value)["message"])
    )


def test_strategic_merge_patch_is_unsupported_for_custom_objects(
    cluster: Cluster, widgets: str
) -> None:
    ns = cluster.namespace()
    base = collection(ns, widgets)
    body = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}
    request(cluster.api_client, "POST", base, body)
    with pytest.raises(k8s_client.ApiException) as caught:
        request(
            cluster.api_client,
            "PATCH",
            f"{base}/w",
            {"spec": {"color": "red"}},
            "application/strategic-merge-patch+json",
        )
    assert caught.value.status == 415
    assert error_of(caught.value)["reason"] == "UnsupportedMediaType"


def test_server_side_apply_tracks_ownership(cluster: Cluster) -> None:
    ns = cluster.namespace()
    path = f"/api/v1/namespaces/{ns}/configmaps/a"
    apply = "application/apply-patch+yaml"

    def applied(manager: str, data: dict, force: bool = False) -> dict:
        query = [("fieldManager", manager)] + ([("force", "true")] if force else [])
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": data}
        return request(cluster.api_client, "PATCH", path, json.dumps(body), apply, query)

    applied("one", {"x": "1", "y": "2"})
    applied("two", {"z": "3"})
    after = applied("one", {"x": "1"})
    assert after["data"] == {"x": "1", "z": "3"}  # y dropped by its owner, z kept
    with pytest.raises(k8s_client.ApiException) as caught:
        applied("two", {"x": "9"})
    assert caught.value.status == 409
    assert error_of(caught.value)["reason"] == "Conflict"
    forced = applied("two", {"x": "9"}, force=True)
    assert forced["data"] == {"x": "9"}  # "two" took x and no longer applies z
    managers = {entry["manager"] for entry in forced["metadata"]["managedFields"]}
    assert managers == {"two"}  # "one" lost its last field to the forced apply


def test_repeated_identical_apply_does_not_write(cluster: Cluster) -> None:
    ns = cluster.namespace()
    path = f"/api/v1/namespaces/{ns}/configmaps/a"
    body = json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "1"}}
    )
    query = [("fieldManager", "me"), ("force", "true")]
    first = request(cluster.api_client, "PATCH", path, body, "application/apply-patch+yaml", query)
    second = request(cluster.api_client, "PATCH", path, body, "application/apply-patch+yaml", query)
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


def test_deleting_a_crd_deletes_its_objects(cluster: Cluster, widgets: str) -> None:
    ns = cluster.namespace()
    base = collection(ns, widgets)
    body = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}
    request(cluster.api_client, "POST", base, body)
    extensions: Any = k8s_client.ApiextensionsV1Api(cluster.api_client)
    extensions.delete_custom_resource_definition(f"{widgets}.{GROUP}")

    def crd_gone() -> bool:
        try:
            extensions.read_custom_resource_definition(f"{widgets}.{GROUP}")
        except k8s_client.ApiException as error:
            return error.status == 404
        return False

    wait_for(crd_gone, CONTROLLER_TIMEOUT, "the CRD to be deleted")
    with pytest.raises(k8s_client.ApiException) as caught:
        request(cluster.api_client, "GET", base)
    assert caught.value.status == 404


def test_a_held_custom_object_marked_deleting_gets_a_new_generation(
    cluster: Cluster, widgets: str
) -> None:
    ns = cluster.namespace()
    base = collection(ns, widgets)
    metadata = {"name": "w", "finalizers": [HOLD]}
    body = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": metadata, "spec": {}}
    created = request(cluster.api_client, "POST", base, body)

    dry = request(cluster.api_client, "DELETE", f"{base}/w", {"dryRun": ["All"]})
    stored = request(cluster.api_client, "GET", f"{base}/w")
    deleted = request(cluster.api_client, "DELETE", f"{base}/w", {})

    assert dry["metadata"]["generation"] == 2
    assert dry["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert stored == created
    assert deleted["metadata"]["generation"] == 2
    assert deleted["metadata"]["deletionTimestamp"]
    assert deleted["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]


def terminating_condition(crd: dict) -> dict:
    conditions = {c["type"]: c for c in crd["status"]["conditions"]}
    return conditions["Terminating"]


def test_a_crd_being_deleted_serves_its_held_objects_until_they_are_released(
    cluster: Cluster, widgets: str
) -> None:
    ns = cluster.namespace()
    base = collection(ns, widgets)
    crd_path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{widgets}.{GROUP}"
    merge = "application/merge-patch+json"

    def widget(name: str, **metadata: Any) -> dict:
        return {
            "apiVersion": f"{GROUP}/v1",
            "kind": "Widget",
            "metadata": {"name": name, **metadata},
        }

    request(cluster.api_client, "POST", base, widget("plain"))
    request(cluster.api_client, "POST", base, widget("held", finalizers=[HOLD]))
    release = {"metadata": {"finalizers": None}}
    before = request(cluster.api_client, "GET", crd_path)

    answer = request(cluster.api_client, "DELETE", crd_path)

    assert answer["metadata"]["deletionTimestamp"]
    assert "customresourcecleanup.apiextensions.k8s.io" in answer["metadata"]["finalizers"]
    assert "deletionGracePeriodSeconds" not in answer["metadata"]
    assert answer["metadata"]["generation"] == before["metadata"]["generation"]
    pending = terminating_condition(answer)
    assert (pending["status"], pending["reason"]) == ("True", "InstanceDeletionPending")
    assert pending["message"] == (
        "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"
    )

    def only_held_left() -> bool:
        items = request(cluster.api_client, "GET", base)["items"]
        return [item["metadata"]["name"] for item in items] == ["held"]

    wait_for(only_held_left, CONTROLLER_TIMEOUT, "the CRD's unheld objects to be deleted")
    in_progress = terminating_condition(request(cluster.api_client, "GET", crd_path))
    assert (in_progress["status"], in_progress["reason"]) == ("True", "InstanceDeletionInProgress")
    assert in_progress["message"] == "CustomResource deletion is in progress"
    held = request(cluster.api_client, "GET", f"{base}/held")
    assert held["metadata"]["deletionTimestamp"]

    with pytest.raises(k8s_client.ApiException) as refused:
        request(cluster.api_client, "POST", base, widget("late"))
    assert refused.value.status == 405
    assert error_of(refused.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "create not allowed while custom resource definition is terminating",
        "reason": "MethodNotAllowed",
        "details": {"group": GROUP, "kind": widgets},
        "code": 405,
    }

    def advertised_verbs() -> list[str] | None:
        listed = request(cluster.api_client, "GET", f"/apis/{GROUP}/v1")["resources"]
        verbs = sorted(next(r for r in listed if r["name"] == widgets)["verbs"])
        return verbs if verbs == ["delete", "deletecollection", "get", "list", "watch"] else None

    wait_for(advertised_verbs, 30, "discovery to drop create, patch and update")

    again = request(cluster.api_client, "DELETE", crd_path)
    assert again["metadata"]["deletionTimestamp"] == answer["metadata"]["deletionTimestamp"]
    assert again["metadata"]["deletionGracePeriodSeconds"] == 0

    labelled = request(
        cluster.api_client, "PATCH", f"{base}/held", {"metadata": {"labels": {"a": "b"}}}, merge
    )
    assert labelled["metadata"]["labels"] == {"a": "b"}
    request(cluster.api_client, "PATCH", f"{base}/held", release, merge)

    def gone(path: str) -> bool:
        try:
            request(cluster.api_client, "GET", path)
        except k8s_client.ApiException as error:
            return error.status == 404
        return False

    wait_for(
        lambda: gone(crd_path), CONTROLLER_TIMEOUT, "the CRD to go once its last object is released"
    )
    wait_for(lambda: gone(base), 30, "its objects to be served no more")
