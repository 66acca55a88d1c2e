"""Contract: object semantics seen through the kubernetes Python client.

Each test states what a real kube-apiserver answers; the same tests run against a real cluster
when ACCURATE_TEST_KUBECONFIG is set.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s_client

from accurate_testbed.cluster import Cluster
from accurate_testbed.leftovers import HOLD
from accurate_testbed.tests.helpers import error_of, held_config_map, release, request
from accurate_testbed.waiting import CONTROLLER_TIMEOUT, wait_for

RBAC = "rbac.authorization.k8s.io"


@pytest.fixture
def core(cluster: Cluster) -> Any:
    return k8s_client.CoreV1Api(cluster.api_client)


@pytest.fixture
def rbac(cluster: Cluster) -> Any:
    return k8s_client.RbacAuthorizationV1Api(cluster.api_client)


def test_created_object_gets_server_metadata(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    created = core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    assert created.metadata.uid
    assert created.metadata.creation_timestamp is not None
    assert int(created.metadata.resource_version) > 0
    assert created.metadata.generation is None  # ConfigMaps have no generation
    fetched = core.read_namespaced_config_map("a", ns)
    assert fetched.metadata.uid == created.metadata.uid
    assert fetched.data == {"k": "v"}


def test_namespace_gets_name_label_and_kubernetes_finalizer(cluster: Cluster, core) -> None:
    name = cluster.namespace()
    ns = core.read_namespace(name)
    assert ns.metadata.labels["kubernetes.io/metadata.name"] == name
    assert ns.spec.finalizers == ["kubernetes"]
    assert ns.status.phase == "Active"


def test_create_existing_name_is_already_exists(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    with pytest.raises(k8s_client.ApiException) as caught:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    status = error_of(caught.value)
    assert (caught.value.status, status["reason"]) == (409, "AlreadyExists")
    assert status["message"] == 'configmaps "a" already exists'
    assert status["details"] == {"name": "a", "kind": "configmaps"}


def test_missing_object_is_not_found(cluster: Cluster, core) -> None:
    missing = cluster.unique("missing")
    with pytest.raises(k8s_client.ApiException) as caught:
        core.read_namespace(missing)
    status = error_of(caught.value)
    assert (caught.value.status, status["reason"]) == (404, "NotFound")
    assert status["message"] == f'namespaces "{missing}" not found'


def test_create_in_missing_namespace_is_not_found(cluster: Cluster, core) -> None:
    missing = cluster.unique("missing")
    with pytest.raises(k8s_client.ApiException) as caught:
        core.create_namespaced_config_map(missing, {"metadata": {"name": "a"}})
    assert caught.value.status == 404
    assert error_of(caught.value)["message"] == f'namespaces "{missing}" not found'


def test_stale_update_is_conflict(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    first = core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}, "data": {"k": "1"}})
    core.patch_namespaced_config_map("a", ns, {"data": {"k": "2"}})
    first.data = {"k": "3"}
    with pytest.raises(k8s_client.ApiException) as caught:
        core.replace_namespaced_config_map("a", ns, first)
    status = error_of(caught.value)
    assert (caught.value.status, status["reason"]) == (409, "Conflict")
    assert status["message"] == (
        'Operation cannot be fulfilled on configmaps "a": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert core.read_namespaced_config_map("a", ns).data == {"k": "2"}


def test_update_that_changes_nothing_keeps_resource_version(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    created = core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    patched = core.patch_namespaced_config_map("a", ns, {"data": {"k": "v"}})
    assert patched.metadata.resource_version == created.metadata.resource_version


def test_invalid_name_is_unprocessable_with_causes(cluster: Cluster, core) -> None:
    with pytest.raises(k8s_client.ApiException) as caught:
        core.create_namespace({"metadata": {"name": "Bad_Name"}})
    status = error_of(caught.value)
    assert (caught.value.status, status["reason"]) == (422, "Invalid")
    assert status["message"].startswith(
        'Namespace "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
        "a lowercase RFC 1123 label must consist of"
    )
    assert status["details"]["causes"][0]["field"] == "metadata.name"
    assert status["details"]["causes"][0]["reason"] == "FieldValueInvalid"


def test_invalid_label_is_unprocessable(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    with pytest.raises(k8s_client.ApiException) as caught:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "a", "labels": {"team": "~"}}})
    status = error_of(caught.value)
    assert caught.value.status == 422
    assert 'metadata.labels: Invalid value: "~"' in status["message"]


def test_defaults_that_comparisons_must_tolerate(cluster: Cluster, core, rbac) -> None:
    ns = cluster.namespace()
    secret = core.create_namespaced_secret(ns, {"metadata": {"name": "s"}})
    assert secret.type == "Opaque"
    binding = rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "b"},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "alice"}],
        },
    )
    assert binding.subjects[0].api_group == RBAC
    networking: Any = k8s_client.NetworkingV1Api(cluster.api_client)
    policy = networking.create_namespaced_network_policy(
        ns, {"metadata": {"name": "p"}, "spec": {"podSelector": {}}}
    )
    assert policy.spec.policy_types == ["Ingress"]
    assert policy.metadata.generation == 1


def test_role_ref_is_immutable(cluster: Cluster, rbac) -> None:
    ns = cluster.namespace()
    body = {
        "metadata": {"name": "b"},
        "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "r"},
        "subjects": [{"kind": "User", "name": "alice"}],
    }
    rbac.create_namespaced_role_binding(ns, body)
    with pytest.raises(k8s_client.ApiException) as caught:
        rbac.patch_namespaced_role_binding("b", ns, {"roleRef": {"name": "other"}})
    status = error_of(caught.value)
    assert caught.value.status == 422
    assert status["message"].endswith("cannot change roleRef")
    assert status["details"]["causes"][0]["field"] == "roleRef"


def test_immutable_secret_refuses_data_changes(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    core.create_namespaced_secret(
        ns, {"metadata": {"name": "s"}, "data": {"a": "YQ=="}, "immutable": True}
    )
    with pytest.raises(k8s_client.ApiException) as caught:
        core.patch_namespaced_secret("s", ns, {"data": {"a": "Yg=="}})
    assert caught.value.status == 422
    assert (
        "data: Forbidden: field is immutable when `immutable` is set"
        in (error_of(caught.value)["message"])
    )


def test_label_selectors_and_name_field_selector(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    for name, labels in (("a", {"team": "x"}), ("b", {"team": "y"}), ("c", {})):
        core.create_namespaced_config_map(ns, {"metadata": {"name": name, "labels": labels}})

    def names(**selectors: str) -> list[str]:
        return [
            item.metadata.name for item in core.list_namespaced_config_map(ns, **selectors).items
        ]

    assert names(label_selector="team=x") == ["a"]
    assert names(label_selector="team") == ["a", "b"]
    assert names(label_selector="!team") == ["c"]
    assert names(label_selector="team in (x,y),team!=y") == ["a"]
    assert names(field_selector="metadata.name=b") == ["b"]
    with pytest.raises(k8s_client.ApiException) as caught:
        names(field_selector="spec.nothing=1")
    assert caught.value.status == 400


def test_finalizers_delay_deletion_until_removed(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    held_config_map(cluster, ns, "a")
    core.delete_namespaced_config_map("a", ns)
    held = core.read_namespaced_config_map("a", ns)
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.deletion_grace_period_seconds == 0
    with pytest.raises(k8s_client.ApiException) as caught:
        core.patch_namespaced_config_map(
            "a", ns, {"metadata": {"finalizers": [HOLD, "example.com/more"]}}
        )
    assert caught.value.status == 422
    release(cluster, ns, "a")
    with pytest.raises(k8s_client.ApiException) as gone:
        core.read_namespaced_config_map("a", ns)
    assert gone.value.status == 404


def test_namespace_deletion_empties_it_then_removes_it(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    core.create_namespaced_config_map(ns, {"metadata": {"name": "plain"}})
    held_config_map(cluster, ns, "held")
    core.delete_namespace(ns)
    terminating = core.read_namespace(ns)
    assert terminating.status.phase == "Terminating"
    assert terminating.metadata.deletion_timestamp is not None

    def held_only() -> bool:
        names = [i.metadata.name for i in core.list_namespaced_config_map(ns).items]
        return names == ["held"]

    wait_for(held_only, CONTROLLER_TIMEOUT, "the namespace's plain objects to be deleted")
    with pytest.raises(k8s_client.ApiException) as caught:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "late"}})
    status = error_of(caught.value)
    assert (caught.value.status, status["reason"]) == (403, "Forbidden")
    assert status["message"] == (
        f'configmaps "late" is forbidden: unable to create new content in namespace {ns} '
        "because it is being terminated"
    )
    assert status["details"]["causes"] == [
        {
            "reason": "NamespaceTerminating",
            "message": f"namespace {ns} is being terminated",
            "field": "metadata.namespace",
        }
    ]
    release(cluster, ns, "held")

    def namespace_gone() -> bool:
        try:
            core.read_namespace(ns)
        except k8s_client.ApiException as error:
            return error.status == 404
        return False

    wait_for(namespace_gone, CONTROLLER_TIMEOUT, "the namespace to disappear")


def test_deleting_terminating_namespace_again_is_conflict(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    held_config_map(cluster, ns, "held")
    core.delete_namespace(ns)
    with pytest.raises(k8s_client.ApiException) as caught:
        core.delete_namespace(ns)
    assert caught.value.status == 409


def test_owner_deletion_collects_dependents(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner.metadata.uid,
    }
    core.create_namespaced_config_map(
        ns, {"metadata": {"name": "dependent", "ownerReferences": [reference]}}
    )
    core.create_namespaced_config_map(ns, {"metadata": {"name": "bystander"}})
    core.delete_namespaced_config_map("owner", ns)

    def only_bystander() -> bool:
        return [i.metadata.name for i in core.list_namespaced_config_map(ns).items] == ["bystander"]

    wait_for(only_bystander, CONTROLLER_TIMEOUT, "the dependent to be garbage-collected")


def test_orphan_deletion_keeps_dependents(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner.metadata.uid,
    }
    core.create_namespaced_config_map(
        ns, {"metadata": {"name": "dependent", "ownerReferences": [reference]}}
    )
    core.delete_namespaced_config_map("owner", ns, propagation_policy="Orphan")

    def orphaned() -> bool:
        names = [i.metadata.name for i in core.list_namespaced_config_map(ns).items]
        return names == ["dependent"]

    wait_for(orphaned, CONTROLLER_TIMEOUT, "the owner to go and the dependent to stay")
    assert core.read_namespaced_config_map("dependent", ns).metadata.owner_references is None


def test_dry_run_validates_but_does_not_persist(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    created = core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}}, dry_run="All")
    assert created.metadata.name == "a"
    assert core.list_namespaced_config_map(ns).items == []


def test_default_field_manager_comes_from_user_agent(cluster: Cluster) -> None:
    ns = cluster.namespace()
    original = cluster.api_client.user_agent
    cluster.api_client.user_agent = "my-tool/1.2.3 (linux)"
    try:
        core: Any = k8s_client.CoreV1Api(cluster.api_client)
        created = core.create_namespaced_config_map(
            ns, {"metadata": {"name": "a"}, "data": {"k": "v"}}
        )
    finally:
        cluster.api_client.user_agent = original
    assert [entry.manager for entry in created.metadata.managed_fields] == ["my-tool"]


def test_merge_and_json_patch(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}, "data": {"x": "1", "y": "2"}})
    path = f"/api/v1/namespaces/{ns}/configmaps/a"
    merged = request(
        cluster.api_client, "PATCH", path, {"data": {"x": None}}, "application/merge-patch+json"
    )
    assert merged["data"] == {"y": "2"}
    patched = request(
        cluster.api_client,
        "PATCH",
        path,
        [{"op": "add", "path": "/data/z", "value": "3"}],
        "application/json-patch+json",
    )
    assert patched["data"] == {"y": "2", "z": "3"}


def test_generate_name_makes_a_unique_name(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    first = core.create_namespaced_config_map(ns, {"metadata": {"generateName": "gen-"}})
    second = core.create_namespaced_config_map(ns, {"metadata": {"generateName": "gen-"}})
    assert first.metadata.name.startswith("gen-")
    assert len(first.metadata.name) == len("gen-") + 5
    assert first.metadata.name != second.metadata.name


def test_delete_collection_honours_the_selector(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a", "labels": {"drop": "yes"}}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "b"}})
    core.delete_collection_namespaced_config_map(ns, label_selector="drop=yes")
    assert [i.metadata.name for i in core.list_namespaced_config_map(ns).items] == ["b"]


def test_foreground_deletion_waits_for_dependents(cluster: Cluster, core) -> None:
    """Only a dependent whose reference says ``blockOwnerDeletion`` holds the owner up (the
    collector's blockingDependents, pkg/controller/garbagecollector/graph.go)."""
    ns = cluster.namespace()
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner.metadata.uid,
        "blockOwnerDeletion": True,
    }
    held_config_map(cluster, ns, "dependent", ownerReferences=[reference])
    core.delete_namespaced_config_map("owner", ns, propagation_policy="Foreground")

    def dependent_deleting() -> bool:
        return core.read_namespaced_config_map("dependent", ns).metadata.deletion_timestamp

    wait_for(dependent_deleting, CONTROLLER_TIMEOUT, "the dependent to be deleted first")
    waiting = core.read_namespaced_config_map("owner", ns)
    assert "foregroundDeletion" in waiting.metadata.finalizers
    release(cluster, ns, "dependent")

    def all_gone() -> bool:
        return core.list_namespaced_config_map(ns).items == []

    wait_for(all_gone, CONTROLLER_TIMEOUT, "the owner to go after its dependent")


def test_a_dry_run_delete_of_a_held_object_answers_it_deleting_and_stores_nothing(
    cluster: Cluster, core
) -> None:
    ns = cluster.namespace()
    created = held_config_map(cluster, ns, "a")
    path = f"/api/v1/namespaces/{ns}/configmaps/a"

    answer = request(cluster.api_client, "DELETE", path, {"dryRun": ["All"]})

    assert answer["metadata"]["deletionTimestamp"]
    assert answer["metadata"]["deletionGracePeriodSeconds"] == 0
    assert answer["metadata"]["finalizers"] == [HOLD]
    assert answer["metadata"]["resourceVersion"] == created.metadata.resource_version
    stored = core.read_namespaced_config_map("a", ns)
    assert stored.metadata.deletion_timestamp is None
    assert stored.metadata.resource_version == created.metadata.resource_version


def test_a_delete_with_options_in_its_body_ignores_the_query(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    core.create_namespaced_config_map(ns, {"metadata": {"name": "kept"}})
    gone = core.create_namespaced_config_map(ns, {"metadata": {"name": "gone"}})
    path = f"/api/v1/namespaces/{ns}/configmaps"
    dry_run = [("dryRun", "All")]

    request(cluster.api_client, "DELETE", f"{path}/kept", query=dry_run)
    preconditions = {"preconditions": {"uid": gone.metadata.uid}}
    request(cluster.api_client, "DELETE", f"{path}/gone", preconditions, query=dry_run)

    assert core.read_namespaced_config_map("kept", ns).metadata.name == "kept"
    with pytest.raises(k8s_client.ApiException) as caught:
        core.read_namespaced_config_map("gone", ns)
    assert caught.value.status == 404


def test_a_dry_run_namespace_delete_answers_it_terminating_and_stores_nothing(
    cluster: Cluster, core
) -> None:
    ns = cluster.namespace()
    before = core.read_namespace(ns)

    answer = request(cluster.api_client, "DELETE", f"/api/v1/namespaces/{ns}", {"dryRun": ["All"]})

    assert answer["status"]["phase"] == "Terminating"
    assert answer["metadata"]["deletionTimestamp"]
    assert answer["metadata"]["resourceVersion"] == before.metadata.resource_version
    after = core.read_namespace(ns)
    assert (after.status.phase, after.metadata.deletion_timestamp) == ("Active", None)
    assert after.metadata.resource_version == before.metadata.resource_version


def test_a_name_held_by_an_object_being_deleted_says_so(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    held_config_map(cluster, ns, "a")
    core.delete_namespaced_config_map("a", ns)

    for dry_run in (None, "All"):
        with pytest.raises(k8s_client.ApiException) as caught:
            core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}}, dry_run=dry_run)
        status = error_of(caught.value)
        assert (caught.value.status, status["reason"]) == (409, "AlreadyExists")
        assert status["message"] == 'object is being deleted: configmaps "a" already exists'
        assert status["details"] == {"name": "a", "kind": "configmaps"}


def test_a_namespace_name_still_terminating_says_so(cluster: Cluster, core) -> None:
    ns = cluster.namespace()
    held_config_map(cluster, ns, "held")
    core.delete_namespace(ns)

    with pytest.raises(k8s_client.ApiException) as caught:
        core.create_namespace({"metadata": {"name": ns, "labels": cluster.own()}})

    status = error_of(caught.value)
    assert (caught.value.status, status["reason"]) == (409, "AlreadyExists")
    assert status["message"] == f'object is being deleted: namespaces "{ns}" already exists'
    assert status["details"] == {"name": ns, "kind": "namespaces"}
