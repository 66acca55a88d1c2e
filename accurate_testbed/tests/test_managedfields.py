"""Field ownership and server-side apply as the in-memory API server records them.

The first tests are the scenarios the controller depends on (DESIGN.md 4.2): keys it applied
before and omits now disappear, keys someone set by hand stay, force takes a key back.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from accurate_testbed.apiserver.managedfields import ApplyConflict, record_update, server_side_apply
from accurate_testbed.apiserver.patching import PatchError

Obj = dict[str, Any]
CONTROLLER = "accurate-controller"


def _namespace(labels: dict[str, str] | None = None, **metadata: Any) -> Obj:
    meta: Obj = {"name": "team", **metadata}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def _apply(live: Obj | None, applied: Obj, manager: str = CONTROLLER, force: bool = False) -> Obj:
    return server_side_apply(live, applied, manager, force, "v1", "2024-01-01T00:00:00Z")


def _label(live: Obj, key: str, value: str | None, manager: str = "kubectl-label") -> Obj:
    """What `kubectl label` does: a merge patch, recorded as an Update by its manager."""
    new = copy.deepcopy(live)
    labels = new["metadata"].setdefault("labels", {})
    if value is None:
        labels.pop(key, None)
    else:
        labels[key] = value
    return record_update(live, new, manager, "v1", "2024-01-02T00:00:00Z")


def _owned(obj: Obj, manager: str, operation: str) -> Obj | None:
    """The fieldsV1 of one entry, or None when the manager has no such entry."""
    for entry in obj["metadata"].get("managedFields", []):
        if entry["manager"] == manager and entry["operation"] == operation:
            fields: Obj = entry["fieldsV1"]
            return fields
    return None


def _label_keys(fields: Obj | None) -> set[str]:
    labels = (fields or {}).get("f:metadata", {}).get("f:labels", {})
    return {key[2:] for key in labels if key.startswith("f:")}


# --- the scenarios the product depends on ----------------------------------------------------


def test_apply_then_apply_without_a_key_removes_that_key() -> None:
    first = _apply(None, _namespace({"a": "1", "b": "2"}))

    second = _apply(first, _namespace({"a": "1"}))

    assert second["metadata"]["labels"] == {"a": "1"}
    assert _label_keys(_owned(second, CONTROLLER, "Apply")) == {"a"}


def test_key_set_by_hand_survives_reapply_and_force_takes_it_over() -> None:
    applied = _apply(None, _namespace({"a": "1"}))
    labelled = _label(applied, "c", "mine")
    assert _label_keys(_owned(labelled, "kubectl-label", "Update")) == {"c"}

    again = _apply(labelled, _namespace({"a": "1"}))
    assert again["metadata"]["labels"] == {"a": "1", "c": "mine"}

    forced = _apply(again, _namespace({"a": "1", "c": "other"}), force=True)
    assert forced["metadata"]["labels"] == {"a": "1", "c": "other"}
    assert _label_keys(_owned(forced, CONTROLLER, "Apply")) == {"a", "c"}
    assert _owned(forced, "kubectl-label", "Update") is None, "an emptied entry is dropped"


def test_changing_a_field_another_manager_owns_is_a_conflict_without_force() -> None:
    labelled = _label(_apply(None, _namespace({"a": "1"})), "c", "mine")

    with pytest.raises(ApplyConflict) as raised:
        _apply(labelled, _namespace({"a": "1", "c": "other"}))

    assert raised.value.conflicts == [("kubectl-label", ".metadata.labels.c")]
    assert str(raised.value) == (
        'Apply failed with 1 conflict: conflict with "kubectl-label" using v1: .metadata.labels.c'
    )
    assert raised.value.causes == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "kubectl-label" using v1',
            "field": ".metadata.labels.c",
        }
    ]


def test_conflict_message_with_several_fields_and_managers() -> None:
    live = _apply(None, _namespace({"a": "1", "b": "1"}), manager="other-applier")
    live = _label(live, "c", "1")

    with pytest.raises(ApplyConflict) as raised:
        _apply(live, _namespace({"a": "2", "b": "2", "c": "2"}))

    assert str(raised.value) == (
        "Apply failed with 3 conflicts: "
        'conflicts with "kubectl-label" using v1:\n'
        "- .metadata.labels.c\n"
        'conflicts with "other-applier":\n'
        "- .metadata.labels.a\n"
        "- .metadata.labels.b"
    )


# --- apply ---------------------------------------------------------------------------------


def test_apply_on_a_missing_object_creates_it_and_records_the_applier() -> None:
    created = _apply(None, _namespace({"a": "1"}))

    assert created["metadata"]["labels"] == {"a": "1"}
    assert created["metadata"]["managedFields"] == [
        {
            "manager": CONTROLLER,
            "operation": "Apply",
            "apiVersion": "v1",
            "time": "2024-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}}}},
        }
    ]


def test_same_value_applied_by_two_appliers_is_shared_and_survives_one_leaving() -> None:
    live = _apply(None, _namespace({"a": "1"}), manager="first")
    shared = _apply(live, _namespace({"a": "1"}), manager="second")
    assert _label_keys(_owned(shared, "first", "Apply")) == {"a"}
    assert _label_keys(_owned(shared, "second", "Apply")) == {"a"}

    first_leaves = _apply(shared, _namespace({"z": "1"}), manager="first")

    assert first_leaves["metadata"]["labels"] == {"a": "1", "z": "1"}


def test_field_owned_by_an_updater_is_not_removed_when_the_applier_omits_it() -> None:
    live = _apply(None, _namespace({"a": "1", "b": "1"}))
    touched = _label(live, "b", "2")
    assert _label_keys(_owned(touched, CONTROLLER, "Apply")) == {"a"}, "b changed hands"

    result = _apply(touched, _namespace({"a": "1"}))

    assert result["metadata"]["labels"] == {"a": "1", "b": "2"}


def test_unchanged_fields_owned_by_others_are_left_to_them() -> None:
    live = _label(_apply(None, _namespace({"a": "1"})), "c", "1")

    result = _apply(live, _namespace({"a": "1", "c": "1"}))

    assert _label_keys(_owned(result, "kubectl-label", "Update")) == {"c"}
    assert _label_keys(_owned(result, CONTROLLER, "Apply")) == {"a", "c"}


def test_map_emptied_by_pruning_is_removed() -> None:
    live = _apply(None, _namespace({"a": "1"}, annotations={"x": "1"}))

    result = _apply(live, _namespace(annotations={"x": "1"}))

    assert "labels" not in result["metadata"]
    assert result["metadata"]["annotations"] == {"x": "1"}


def test_nested_maps_merge_and_lists_are_replaced_whole() -> None:
    live: Obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "finalizers": ["x"]},
        "data": {"kept": "1"},
    }
    applied: Obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "finalizers": ["y"]},
        "data": {"new": "2"},
    }

    result = _apply(live, applied, force=True)

    assert result["data"] == {"kept": "1", "new": "2"}
    assert result["metadata"]["finalizers"] == ["y"]
    assert _owned(result, CONTROLLER, "Apply") == {
        "f:data": {"f:new": {}},
        "f:metadata": {"f:finalizers": {}},
    }


def test_apply_does_not_own_server_set_metadata_or_type_fields() -> None:
    applied = _namespace(
        {"a": "1"}, uid="u", resourceVersion="5", creationTimestamp=None, namespace=""
    )

    result = _apply(None, applied)

    assert _owned(result, CONTROLLER, "Apply") == {"f:metadata": {"f:labels": {"f:a": {}}}}
    assert "uid" not in result["metadata"]


def test_reapplying_the_same_object_keeps_the_entry_time() -> None:
    live = _apply(None, _namespace({"a": "1"}))

    again = server_side_apply(live, _namespace({"a": "1"}), CONTROLLER, False, "v1", "later")

    assert again == live


def test_apply_with_an_empty_configuration_drops_the_appliers_entry() -> None:
    live = _apply(None, _namespace({"a": "1"}))

    result = _apply(live, _namespace())

    assert "labels" not in result["metadata"]
    assert "managedFields" not in result["metadata"]


@pytest.mark.parametrize(
    "applied",
    [
        {"kind": "Namespace", "metadata": {"name": "n"}},
        {"apiVersion": "v1", "metadata": {"name": "n"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "managedFields": [{}]}},
    ],
)
def test_apply_rejects_incomplete_configurations(applied: Obj) -> None:
    with pytest.raises(PatchError):
        _apply(None, applied)


def test_apply_reads_ownership_written_by_a_real_server() -> None:
    """A cluster taken over from the Go controller: entries with "." and list item keys."""
    live = _namespace({"a": "1", "gone": "1"}, finalizers=["f"])
    live["metadata"]["managedFields"] = [
        {
            "manager": CONTROLLER,
            "operation": "Apply",
            "apiVersion": "v1",
            "time": "2023-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:labels": {".": {}, "f:a": {}, "f:gone": {}},
                    "f:finalizers": {".": {}, 'v:"f"': {}},
                }
            },
        }
    ]

    result = _apply(live, _namespace({"a": "1"}))

    assert result["metadata"]["labels"] == {"a": "1"}
    assert "finalizers" not in result["metadata"]


def test_apply_inputs_are_not_mutated() -> None:
    live = _label(_apply(None, _namespace({"a": "1"})), "c", "1")
    applied = _namespace({"a": "2", "c": "2"})
    before = (copy.deepcopy(live), copy.deepcopy(applied))

    _apply(live, applied, force=True)

    assert (live, applied) == before


# --- update ----------------------------------------------------------------------------------


def test_create_by_an_updater_owns_everything_it_set_with_dots_for_new_maps() -> None:
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "uid": "u", "labels": {"a": "1"}},
        "data": {"k": "v"},
    }

    created = record_update(None, config_map, "kubectl-create", "v1", "t0")

    assert created["metadata"]["managedFields"] == [
        {
            "manager": "kubectl-create",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "t0",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:data": {".": {}, "f:k": {}},
                "f:metadata": {"f:labels": {".": {}, "f:a": {}}},
            },
        }
    ]


def test_create_of_a_builtin_kind_does_not_mark_its_struct_fields_added() -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}
    namespace["spec"] = {"finalizers": ["kubernetes"]}

    created = record_update(None, namespace, "kubectl-create", "v1", "t0")

    assert _owned(created, "kubectl-create", "Update") == {"f:spec": {"f:finalizers": {}}}


def test_update_takes_changed_fields_from_others_and_removal_clears_them() -> None:
    live = _apply(None, _namespace({"a": "1", "b": "1"}))
    changed = _label(live, "a", "2", manager="editor")
    assert _label_keys(_owned(changed, "editor", "Update")) == {"a"}
    assert _label_keys(_owned(changed, CONTROLLER, "Apply")) == {"b"}

    removed = _label(changed, "b", None, manager="editor")

    assert _label_keys(_owned(removed, "editor", "Update")) == {"a"}
    assert _owned(removed, CONTROLLER, "Apply") is None


def test_update_that_changes_nothing_leaves_managed_fields_alone() -> None:
    live = _apply(None, _namespace({"a": "1"}))

    result = record_update(live, copy.deepcopy(live), "someone", "v1", "later")

    assert result == live


def test_update_ignores_resource_version_and_other_server_fields() -> None:
    live = _namespace({"a": "1"}, resourceVersion="1", generation=1)
    new = _namespace({"a": "1"}, resourceVersion="2", generation=2)

    assert "managedFields" not in record_update(live, new, "m", "v1", "t")["metadata"]


def test_updates_are_recorded_per_manager_version_and_subresource() -> None:
    live = _namespace({"a": "1"})
    status = copy.deepcopy(live)
    status["status"] = {"phase": "Active"}
    with_status = record_update(live, status, "ctrl", "v1", "t1", subresource="status")
    relabelled = copy.deepcopy(with_status)
    relabelled["metadata"]["labels"]["b"] = "2"

    result = record_update(with_status, relabelled, "ctrl", "v1", "t2")

    entries = [
        (entry["manager"], entry.get("subresource"), entry["fieldsV1"])
        for entry in result["metadata"]["managedFields"]
    ]
    assert entries == [
        ("ctrl", "status", {"f:status": {".": {}, "f:phase": {}}}),
        ("ctrl", None, {"f:metadata": {"f:labels": {"f:b": {}}}}),
    ]


def test_update_sending_managed_fields_replaces_or_resets_them() -> None:
    live = _apply(None, _namespace({"a": "1"}))
    own: Obj = {
        "manager": "imported",
        "operation": "Update",
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}}}},
    }
    sent = copy.deepcopy(live)
    sent["metadata"]["managedFields"] = [own]
    assert record_update(live, sent, "m", "v1", "t")["metadata"]["managedFields"] == [own]

    reset = copy.deepcopy(live)
    reset["metadata"]["managedFields"] = [{}]
    assert "managedFields" not in record_update(live, reset, "m", "v1", "t")["metadata"]

    omitted = copy.deepcopy(live)
    del omitted["metadata"]["managedFields"]
    kept = record_update(live, omitted, "m", "v1", "t")["metadata"]["managedFields"]
    assert kept == live["metadata"]["managedFields"]


def test_update_inputs_are_not_mutated() -> None:
    live = _apply(None, _namespace({"a": "1"}))
    new = copy.deepcopy(live)
    new["metadata"]["labels"]["a"] = "2"
    before = (copy.deepcopy(live), copy.deepcopy(new))

    record_update(live, new, "m", "v1", "t")

    assert (live, new) == before


def test_a_managers_later_update_adds_to_what_it_owned() -> None:
    live = _label(_apply(None, _namespace({"a": "1"})), "b", "1")

    result = _label(live, "c", "1")

    assert _label_keys(_owned(result, "kubectl-label", "Update")) == {"b", "c"}


def test_update_sending_unreadable_managed_fields_keeps_the_live_ones() -> None:
    live = _apply(None, _namespace({"a": "1"}))
    sent = copy.deepcopy(live)
    sent["metadata"]["managedFields"] = [{"manager": "x", "operation": "Frobnicate"}]

    result = record_update(live, sent, "m", "v1", "t")

    assert result["metadata"]["managedFields"] == live["metadata"]["managedFields"]


def test_applied_null_removes_the_field_and_the_applier_owns_it() -> None:
    live = _label(_apply(None, _namespace({"a": "1"})), "c", "1")
    applied = _namespace({"a": "1"})
    applied["metadata"]["annotations"] = None

    result = _apply(live, applied)

    assert "annotations" not in result["metadata"]
    assert _owned(result, CONTROLLER, "Apply") == {
        "f:metadata": {"f:annotations": {}, "f:labels": {"f:a": {}}}
    }


def test_entries_written_alike_are_separate_objects() -> None:
    """Field sets are remembered between writes; what each write returns is its own, so a
    caller changing one result (or its input) changes no other."""
    live = _apply(None, _namespace({"a": "1"}))
    first = _label(live, "b", "1")
    second = _label(live, "b", "1")
    assert first["metadata"]["managedFields"] == second["metadata"]["managedFields"]

    _owned(first, "kubectl-label", "Update")["f:metadata"]["f:labels"]["f:x"] = {}  # type: ignore[index]
    _owned(live, CONTROLLER, "Apply")["f:metadata"]["f:labels"]["f:y"] = {}  # type: ignore[index]
    third = _label(_apply(None, _namespace({"a": "1"})), "b", "1")

    assert _label_keys(_owned(second, "kubectl-label", "Update")) == {"b"}
    assert third["metadata"]["managedFields"] == second["metadata"]["managedFields"]
    assert _label_keys(_owned(third, CONTROLLER, "Apply")) == {"a"}
