"""Moving the keys the controller keeps out of the Go Accurate's old update entries
(libaccurate/ownership.py), as client-go's csaupgrade does for the Go releases v1.4 to v1.8."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from libaccurate.constants import FIELD_MANAGER, LABEL_CREATED_BY, LABEL_PARENT
from libaccurate.ownership import (
    OwnedKeys,
    applied_by_controller,
    owned_keys,
    updated_by_go_controller,
    upgraded_managed_fields,
)

KEYS = ["team", "env", "x.glob/y", "hand", LABEL_PARENT, LABEL_CREATED_BY]


def entry(
    manager: str,
    operation: str,
    labels: list[str] | tuple[str, ...] = (),
    annotations: list[str] | tuple[str, ...] = (),
    subresource: str | None = None,
    time: str = "2023-01-01T00:00:00Z",
) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if labels:
        metadata["f:labels"] = {".": {}, **{f"f:{k}": {} for k in labels}}
    if annotations:
        metadata["f:annotations"] = {f"f:{k}": {} for k in annotations}
    found: dict[str, Any] = {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "time": time,
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": metadata} if metadata else {},
    }
    if subresource:
        found["subresource"] = subresource
    return found


def keys(labels: list[str] | tuple[str, ...] = (), annotations: tuple[str, ...] = ()) -> OwnedKeys:
    return OwnedKeys(frozenset(labels), frozenset(annotations))


def test_a_go_v1_2_namespace_hands_its_inherited_keys_to_a_new_apply_entry() -> None:
    # Created by the Go SubNamespace controller, then updated by its propagateMeta.
    created = entry(FIELD_MANAGER, "Update", [LABEL_PARENT, LABEL_CREATED_BY, "team"], ["memo"])
    by_hand = entry("kubectl-label", "Update", ["hand"])
    result = upgraded_managed_fields([created, by_hand], keys(["team", "hand"], ("memo",)))
    assert result is not None
    apply_entry, go_entry, hand_entry = result
    assert apply_entry == {
        "manager": FIELD_MANAGER,
        "operation": "Apply",
        "apiVersion": "v1",
        "time": created["time"],
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}, "f:annotations": {"f:memo": {}}}},
    }
    # parent and created-by stay where they were; the key set by hand is nobody's business.
    assert owned_keys([go_entry], updated_by_go_controller) == keys(
        [LABEL_PARENT, LABEL_CREATED_BY]
    )
    assert hand_entry == by_hand


def test_keys_join_an_existing_apply_entry_and_an_emptied_update_entry_goes() -> None:
    applied = entry(FIELD_MANAGER, "Apply", [LABEL_PARENT, "team"])
    old = entry(FIELD_MANAGER, "Update", ["team", "env"])
    emptied = copy.deepcopy(old)
    del emptied["fieldsV1"]["f:metadata"]["f:labels"]["."]
    result = upgraded_managed_fields([applied, emptied], keys(["team", "env"]))
    assert result is not None
    assert len(result) == 1
    # One that owned the labels map itself (it made it) keeps that, and nothing else.
    result = upgraded_managed_fields([applied, old], keys(["team", "env"]))
    assert result is not None
    assert result[1]["fieldsV1"] == {"f:metadata": {"f:labels": {".": {}}}}
    assert owned_keys(result, applied_by_controller) == keys([LABEL_PARENT, "team", "env"])


def test_nothing_to_do_without_a_go_update_entry_holding_a_kept_key() -> None:
    others = [
        entry(FIELD_MANAGER, "Apply", ["team"]),
        entry("manager", "Update", ["team"]),  # HNC's: the import's business
        entry(FIELD_MANAGER, "Update", ["team"], subresource="status"),
        entry(FIELD_MANAGER, "Update", [LABEL_PARENT, LABEL_CREATED_BY]),
    ]
    assert upgraded_managed_fields(others, keys(["team", "env"])) is None
    assert upgraded_managed_fields([], keys(["team"])) is None


entries_strategy = st.lists(
    st.builds(
        entry,
        st.sampled_from([FIELD_MANAGER, "kubectl", "manager"]),
        st.sampled_from(["Apply", "Update"]),
        st.lists(st.sampled_from(KEYS), unique=True),
        st.lists(st.sampled_from(["memo", "note"]), unique=True),
        st.sampled_from([None, "status"]),
    ),
    max_size=5,
).filter(
    # The server keeps one entry per manager, operation and subresource (per version for
    # updates, and every entry here is v1).
    lambda found: (
        len({(e["manager"], e["operation"], e.get("subresource")) for e in found}) == len(found)
    )
)
kept_strategy = st.builds(
    keys,
    st.lists(st.sampled_from(KEYS), unique=True),
    st.tuples() | st.tuples(st.sampled_from(["memo", "note"])),
)


@given(entries_strategy, kept_strategy)
def test_kept_keys_move_to_the_apply_entry_and_nothing_else_changes(
    entries: list[dict[str, Any]], kept: OwnedKeys
) -> None:
    before = copy.deepcopy(entries)
    result = upgraded_managed_fields(entries, kept)
    assert entries == before
    held = owned_keys(entries, updated_by_go_controller) & kept
    if not held:
        assert result is None
        return
    assert result is not None
    assert not owned_keys(result, updated_by_go_controller) & kept
    assert owned_keys(result, applied_by_controller) == (
        owned_keys(entries, applied_by_controller) | held
    )
    go_rest = owned_keys(entries, updated_by_go_controller)
    assert owned_keys(result, updated_by_go_controller) == OwnedKeys(
        go_rest.labels - held.labels, go_rest.annotations - held.annotations
    )

    def untouched(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e for e in found if not (applied_by_controller(e) or updated_by_go_controller(e))]

    assert untouched(result) == untouched(entries)
    assert upgraded_managed_fields(result, kept) is None
