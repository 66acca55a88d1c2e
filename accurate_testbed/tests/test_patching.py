"""JSON merge patch, JSON patch and strategic merge patch as the in-memory API server applies them.

The strategic cases use the bodies kubectl sends: `kubectl apply` (client-side) and `kubectl
edit` compute two/three-way strategic patches with $setElementOrder, $retainKeys,
$deleteFromPrimitiveList and $patch directives; `kubectl label`/`annotate` send merge patches.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from accurate_testbed.apiserver.patching import (
    PatchError,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)


def _namespace(**metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", **metadata}}


def _deployment(containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": containers}}, **spec},
    }


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    containers: list[dict[str, Any]] = obj["spec"]["template"]["spec"]["containers"]
    return containers


# --- JSON merge patch ------------------------------------------------------------------------


def test_merge_patch_as_kubectl_label_sends_it_adds_and_removes_labels() -> None:
    live = _namespace(labels={"a": "1", "gone": "x"})
    patch = {"metadata": {"labels": {"b": "2", "gone": None}}}

    result = json_merge_patch(live, patch)

    assert result["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert live["metadata"]["labels"] == {"a": "1", "gone": "x"}, "input must not change"


def test_merge_patch_replaces_lists_and_non_objects() -> None:
    live = {"list": [1, 2], "scalar": {"nested": True}, "keep": 1}

    result = json_merge_patch(live, {"list": [3], "scalar": "text"})

    assert result == {"list": [3], "scalar": "text", "keep": 1}


def test_merge_patch_that_is_not_an_object_replaces_the_document() -> None:
    assert json_merge_patch({"a": 1}, ["whole"]) == ["whole"]


def test_merge_patch_creates_missing_maps_without_nulls() -> None:
    result = json_merge_patch({}, {"metadata": {"annotations": {"x": "1", "y": None}}})

    assert result == {"metadata": {"annotations": {"x": "1"}}}


# --- JSON patch ------------------------------------------------------------------------------


def test_json_patch_runs_every_operation_in_order() -> None:
    live = {"metadata": {"labels": {"a": "1"}}, "items": [1, 2]}
    operations = [
        {"op": "add", "path": "/items/-", "value": 3},
        {"op": "add", "path": "/items/0", "value": 0},
        {"op": "replace", "path": "/metadata/labels/a", "value": "2"},
        {"op": "copy", "from": "/metadata/labels/a", "path": "/metadata/labels/b"},
        {"op": "move", "from": "/metadata/labels/b", "path": "/moved"},
        {"op": "remove", "path": "/items/1"},
        {"op": "test", "path": "/moved", "value": "2"},
    ]

    result = json_patch(live, operations)

    assert result == {"metadata": {"labels": {"a": "2"}}, "items": [0, 2, 3], "moved": "2"}
    assert live == {"metadata": {"labels": {"a": "1"}}, "items": [1, 2]}


def test_json_patch_pointer_escapes_address_label_keys_with_slashes() -> None:
    live = _namespace(labels={"accurate.cybozu.com/type": "root", "a~b": "x"})
    operations = [
        {"op": "remove", "path": "/metadata/labels/accurate.cybozu.com~1type"},
        {"op": "replace", "path": "/metadata/labels/a~0b", "value": "y"},
    ]

    assert json_patch(live, operations)["metadata"]["labels"] == {"a~b": "y"}


def test_json_patch_failed_test_aborts_the_whole_patch() -> None:
    live = {"a": 1}
    operations = [
        {"op": "add", "path": "/b", "value": 2},
        {"op": "test", "path": "/a", "value": 2},
    ]

    with pytest.raises(PatchError, match="test failed"):
        json_patch(live, operations)
    assert live == {"a": 1}


def test_json_patch_test_distinguishes_true_from_one() -> None:
    with pytest.raises(PatchError):
        json_patch({"flag": True}, [{"op": "test", "path": "/flag", "value": 1}])
    assert json_patch({"n": 1}, [{"op": "test", "path": "/n", "value": 1.0}]) == {"n": 1}


def test_json_patch_replace_of_the_root_replaces_the_document() -> None:
    assert json_patch({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}]) == {"b": 2}


@pytest.mark.parametrize(
    "operation",
    [
        {"op": "remove", "path": "/missing"},
        {"op": "replace", "path": "/missing", "value": 1},
        {"op": "add", "path": "/missing/child", "value": 1},
        {"op": "add", "path": "/items/5", "value": 1},
        {"op": "add", "path": "/items/01", "value": 1},
        {"op": "remove", "path": "/items/-"},
        {"op": "add", "path": "no-slash", "value": 1},
        {"op": "move", "from": "/obj", "path": "/obj/inner"},
        {"op": "add", "path": "/x"},
        {"op": "frobnicate", "path": "/x"},
        {"path": "/x"},
    ],
)
def test_json_patch_rejects_operations_that_do_not_apply(operation: dict[str, Any]) -> None:
    with pytest.raises(PatchError):
        json_patch({"items": [1], "obj": {}}, [operation])


def test_json_patch_body_must_be_a_list() -> None:
    with pytest.raises(PatchError):
        json_patch({}, {"op": "add", "path": "/a", "value": 1})


# --- strategic merge patch: maps, nulls, plain lists -----------------------------------------


def test_smp_merges_maps_and_null_deletes_a_key() -> None:
    live = _namespace(labels={"a": "1", "b": "2"}, annotations={"x": "y"})
    patch = {"metadata": {"labels": {"b": None, "c": "3"}}}

    result = strategic_merge_patch(live, patch, "Namespace")

    assert result["metadata"]["labels"] == {"a": "1", "c": "3"}
    assert result["metadata"]["annotations"] == {"x": "y"}
    assert live["metadata"]["labels"] == {"a": "1", "b": "2"}, "input must not change"


def test_smp_replaces_lists_without_a_patch_strategy() -> None:
    live = {
        "kind": "Role",
        "metadata": {"name": "r"},
        "rules": [{"verbs": ["get"], "resources": ["pods"], "apiGroups": [""]}],
    }
    patch = {"rules": [{"verbs": ["list"], "resources": ["secrets"], "apiGroups": [""]}]}

    assert strategic_merge_patch(live, patch, "Role")["rules"] == patch["rules"]


def test_smp_namespace_spec_finalizers_are_replaced_not_merged() -> None:
    live = {"metadata": {"name": "n"}, "spec": {"finalizers": ["kubernetes"]}}

    result = strategic_merge_patch(live, {"spec": {"finalizers": []}}, "Namespace")

    assert result["spec"]["finalizers"] == []


def test_smp_is_refused_for_kinds_without_go_types() -> None:
    with pytest.raises(PatchError, match="strategic merge patch is not supported"):
        strategic_merge_patch({"metadata": {"name": "s"}}, {"spec": {}}, "SubNamespace")


# --- strategic merge patch: merge lists ------------------------------------------------------


def test_smp_metadata_finalizers_merge_as_a_set_and_new_items_come_first() -> None:
    live = _namespace(finalizers=["a", "b"])

    result = strategic_merge_patch(live, {"metadata": {"finalizers": ["b", "c"]}}, "Namespace")

    assert result["metadata"]["finalizers"] == ["a", "b", "c"]
    alone = strategic_merge_patch(live, {"metadata": {"finalizers": ["c"]}}, "Namespace")
    assert alone["metadata"]["finalizers"] == ["c", "a", "b"]


def test_smp_delete_from_primitive_list_removes_finalizers() -> None:
    live = _namespace(finalizers=["a", "b", "c"])
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "missing"]}}

    assert strategic_merge_patch(live, patch, "Namespace")["metadata"]["finalizers"] == ["a", "c"]


def test_smp_set_element_order_with_deletion_as_kubectl_apply_sends_it() -> None:
    live = _namespace(finalizers=["a", "b", "c"])
    patch = {
        "metadata": {
            "$setElementOrder/finalizers": ["c", "d", "a"],
            "$deleteFromPrimitiveList/finalizers": ["b"],
            "finalizers": ["d"],
        }
    }

    result = strategic_merge_patch(live, patch, "Namespace")

    assert result["metadata"]["finalizers"] == ["c", "d", "a"]


def test_smp_owner_references_merge_by_uid() -> None:
    live = _namespace(ownerReferences=[{"uid": "1", "name": "one"}, {"uid": "2", "name": "two"}])
    patch = {"metadata": {"ownerReferences": [{"uid": "2", "name": "renamed"}]}}

    result = strategic_merge_patch(live, patch, "Namespace")

    assert result["metadata"]["ownerReferences"] == [
        {"uid": "1", "name": "one"},
        {"uid": "2", "name": "renamed"},
    ]


def test_smp_deployment_containers_and_env_merge_by_name() -> None:
    live = _deployment(
        [
            {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
            {"name": "sidecar", "image": "side:1"},
        ]
    )
    patch = {
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "2"}]}]}
            }
        }
    }

    containers = _containers(strategic_merge_patch(live, patch, "Deployment"))

    assert containers == [
        {
            "name": "app",
            "image": "app:1",
            "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}],
        },
        {"name": "sidecar", "image": "side:1"},
    ]


def test_smp_patch_delete_element_and_set_element_order_for_containers() -> None:
    live = _deployment([{"name": "a", "image": "a"}, {"name": "b", "image": "b"}])
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "c"}, {"name": "b"}],
                    "containers": [{"name": "c", "image": "c"}, {"$patch": "delete", "name": "a"}],
                }
            }
        }
    }

    containers = _containers(strategic_merge_patch(live, patch, "Deployment"))

    assert containers == [{"name": "c", "image": "c"}, {"name": "b", "image": "b"}]


def test_smp_patch_replace_element_replaces_the_whole_list() -> None:
    live = _deployment([{"name": "a", "image": "a"}, {"name": "b", "image": "b"}])
    patch = {
        "spec": {
            "template": {
                "spec": {"containers": [{"$patch": "replace"}, {"name": "z", "image": "z"}]}
            }
        }
    }

    assert _containers(strategic_merge_patch(live, patch, "Deployment")) == [
        {"name": "z", "image": "z"}
    ]


def test_smp_service_ports_merge_by_port_and_webhooks_by_name() -> None:
    service = {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80, "name": "http"}]}}
    patched = strategic_merge_patch(
        service, {"spec": {"ports": [{"port": 443, "name": "https"}]}}, "Service"
    )
    assert [port["port"] for port in patched["spec"]["ports"]] == [443, 80]

    hooks = {"metadata": {"name": "h"}, "webhooks": [{"name": "a", "timeoutSeconds": 10}]}
    patched = strategic_merge_patch(
        hooks, {"webhooks": [{"name": "a", "timeoutSeconds": 5}]}, "ValidatingWebhookConfiguration"
    )
    assert patched["webhooks"] == [{"name": "a", "timeoutSeconds": 5}]


def test_smp_merge_list_item_without_its_merge_key_is_an_error() -> None:
    live = _deployment([{"name": "a"}])
    patch = {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}

    with pytest.raises(PatchError, match="merge key"):
        strategic_merge_patch(live, patch, "Deployment")


# --- strategic merge patch: map directives ---------------------------------------------------


def test_smp_retain_keys_clears_the_old_rolling_update() -> None:
    live = _deployment([], strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}})
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}

    assert strategic_merge_patch(live, patch, "Deployment")["spec"]["strategy"] == {
        "type": "Recreate"
    }


def test_smp_retain_keys_must_name_every_patched_key() -> None:
    live = _deployment([], strategy={"type": "RollingUpdate"})
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}}

    with pytest.raises(PatchError, match="retainKeys"):
        strategic_merge_patch(live, patch, "Deployment")


def test_smp_patch_replace_and_delete_on_maps() -> None:
    live = _namespace(labels={"a": "1", "b": "2"}, annotations={"x": "y"})
    patch = {
        "metadata": {
            "labels": {"$patch": "replace", "only": "this"},
            "annotations": {"$patch": "delete"},
        }
    }

    result = strategic_merge_patch(live, patch, "Namespace")

    assert result["metadata"]["labels"] == {"only": "this"}
    assert result["metadata"]["annotations"] == {}


def test_smp_unknown_directive_is_an_error() -> None:
    with pytest.raises(PatchError, match="unknown patch type"):
        strategic_merge_patch(_namespace(), {"metadata": {"$patch": "explode"}}, "Namespace")


def test_smp_client_side_apply_three_way_patch_as_kubectl_sends_it() -> None:
    """kubectl apply after removing label `old` from the file and adding `new`."""
    live = _namespace(
        labels={"old": "1", "keep": "1", "manual": "1"},
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{...old...}"},
    )
    patch = {
        "metadata": {
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...new...}"},
            "labels": {"new": "1", "old": None},
        }
    }

    result = strategic_merge_patch(live, patch, "Namespace")

    assert result["metadata"]["labels"] == {"keep": "1", "manual": "1", "new": "1"}
    assert result["metadata"]["annotations"] == {
        "kubectl.kubernetes.io/last-applied-configuration": "{...new...}"
    }


def test_smp_does_not_change_the_patch_it_was_given() -> None:
    patch = {"metadata": {"labels": {"$patch": "replace", "a": "1"}}}
    before = copy.deepcopy(patch)

    strategic_merge_patch(_namespace(labels={"b": "2"}), patch, "Namespace")

    assert patch == before


def test_smp_set_element_order_alone_reorders_the_live_list() -> None:
    """`kubectl edit` that only swaps two containers sends nothing but the order."""
    live = _deployment([{"name": "a", "image": "a"}, {"name": "b", "image": "b"}])
    patch = {
        "spec": {
            "template": {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}}
        }
    }

    assert [c["name"] for c in _containers(strategic_merge_patch(live, patch, "Deployment"))] == [
        "b",
        "a",
    ]


def test_smp_set_element_order_must_agree_with_the_patch_list() -> None:
    live = _namespace(finalizers=["a"])
    patch = {"metadata": {"$setElementOrder/finalizers": ["b", "a"], "finalizers": ["a", "b"]}}

    with pytest.raises(PatchError, match="doesn't match"):
        strategic_merge_patch(live, patch, "Namespace")


def test_smp_list_merge_directive_is_refused_as_the_server_does() -> None:
    live = _deployment([{"name": "a"}])
    patch = {"spec": {"template": {"spec": {"containers": [{"$patch": "merge"}]}}}}

    with pytest.raises(PatchError, match="merging lists cannot yet be specified"):
        strategic_merge_patch(live, patch, "Deployment")


def test_smp_adds_a_merge_list_the_object_did_not_have() -> None:
    live = _namespace()
    patch = {
        "metadata": {
            "$setElementOrder/ownerReferences": [{"uid": "1"}],
            "ownerReferences": [{"uid": "1", "name": "owner", "controller": None}],
        }
    }

    result = strategic_merge_patch(live, patch, "Namespace")

    assert result["metadata"]["ownerReferences"] == [{"uid": "1", "name": "owner"}]
