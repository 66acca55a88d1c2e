"""SubNamespace conversion between v1, v2alpha1 and v2, as the conversion webhook serves it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from libaccurate.constants import ANNOTATION_V1_CONDITIONS, ANNOTATION_V1_OBSERVED_GENERATION
from libaccurate.conversion import V1, V2, V2ALPHA1, ConversionError, convert_subnamespace
from libaccurate.forest import Problem
from libaccurate.lifecycle import State, Verdict, status_for

STALLED = {
    "type": "Stalled",
    "status": "True",
    "lastTransitionTime": "2024-01-02T03:04:05Z",
    "reason": "Conflict",
    "message": "namespace sub1 exists and is not a child of root1",
}


def subnamespace(api_version: str = V2, **fields: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": "SubNamespace",
        "metadata": {"name": "sub1", "namespace": "root1", "generation": 2, "uid": "u-1"},
        "spec": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
    }
    obj.update(fields)
    return obj


def test_v2_status_goes_into_v1_annotations_and_status_string() -> None:
    obj = subnamespace(status={"observedGeneration": 2, "conditions": [STALLED]})

    v1 = convert_subnamespace(obj, V1)

    assert v1["apiVersion"] == V1
    assert v1["status"] == "conflict"
    assert v1["spec"] == obj["spec"]
    annotations = v1["metadata"]["annotations"]
    assert annotations[ANNOTATION_V1_OBSERVED_GENERATION] == "2"
    assert json.loads(annotations[ANNOTATION_V1_CONDITIONS]) == [STALLED]
    assert v1["metadata"]["uid"] == "u-1"


def test_v1_annotations_are_written_the_way_go_writes_them() -> None:
    condition = {"type": "Stalled", "status": "False", "reason": "A", "message": "<é&>"}
    obj = subnamespace(status={"observedGeneration": 1, "conditions": [condition]})
    obj["metadata"].pop("annotations", None)

    annotation = convert_subnamespace(obj, V1)["metadata"]["annotations"][ANNOTATION_V1_CONDITIONS]

    assert annotation == (
        '[{"type":"Stalled","status":"False","reason":"A","message":"\\u003cé\\u0026\\u003e"}]'
    )


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"observedGeneration": 2}, "ok"),
        ({"observedGeneration": 1}, None),
        ({}, None),
        ({"observedGeneration": 2, "conditions": [{**STALLED, "status": "False"}]}, None),
        ({"conditions": [STALLED]}, "conflict"),
    ],
)
def test_v1_status_string_follows_the_go_rules(
    status: dict[str, Any], expected: str | None
) -> None:
    v1 = convert_subnamespace(subnamespace(status=status), V1)

    assert v1.get("status") == expected


def written(state: State, problem: Problem | None = None, generation: int = 2) -> dict[str, Any]:
    """The status our controller writes for a SubNamespace in ``state``, in the wire form the
    controller's status patch gives it (controller/writes.py)."""
    status = status_for(Verdict("root1", "sub1", state, "why"), generation, problem)
    conditions = [
        {
            "type": c.type,
            "status": c.status,
            "observedGeneration": generation,
            "lastTransitionTime": "2024-01-02T03:04:05Z",
            "reason": c.reason,
            "message": c.message,
        }
        for c in status.conditions
    ]
    return {"observedGeneration": status.observed_generation, "conditions": conditions}


# Every status our controller writes, and what the Go controller's v1 status reads in the same
# state: it writes ok once it reconciled a SubNamespace, whatever the namespace holds, and
# conflict while another namespace has the name; a deletion leaves the last status in place.
WRITTEN = {
    "healthy (Ready True Synced)": (written("exists"), "ok"),
    "just created (Ready True Synced)": (written("create"), "ok"),
    "conflict (Stalled True, Ready False Conflict)": (written("conflict"), "conflict"),
    "deleting its subtree (Ready False DeletingSubtree)": (written("deleting"), "ok"),
    "terminating (Ready False NamespaceTerminating)": (written("terminating"), "ok"),
    "in a cycle (Ready False Cycle)": (
        written("exists", Problem("Cycle", ("sub1", "root1", "sub1"))),
        "ok",
    ),
    "missing parent (Ready False MissingReference)": (
        written("exists", Problem("MissingReference", ("sub1", "gone"))),
        "ok",
    ),
    "healthy, a generation behind": (written("exists", generation=1), None),
    "conflict, a generation behind": (written("conflict", generation=1), "conflict"),
    "not reconciled yet (no status)": (None, None),
}


@pytest.mark.parametrize(("status", "expected"), WRITTEN.values(), ids=WRITTEN.keys())
def test_every_status_we_write_reads_in_v1_as_the_go_controller_s_would(
    status: dict[str, Any] | None, expected: str | None
) -> None:
    obj = subnamespace() if status is None else subnamespace(status=status)

    v1 = convert_subnamespace(obj, V1)

    assert v1.get("status") == expected
    assert convert_subnamespace(v1, V2) == obj
    assert convert_subnamespace(convert_subnamespace(v1, V2), V1) == v1


def test_a_condition_the_go_controller_does_not_know_keeps_v1_status_unknown() -> None:
    """Only our own Ready is set aside: any other condition is a transitional state for the Go
    reading, as it would be on a Go-run cluster."""
    status = written("exists")
    status["conditions"].append({**STALLED, "type": "Progressing", "status": "True"})

    assert "status" not in convert_subnamespace(subnamespace(status=status), V1)


def test_v2_without_status_converts_to_v1_without_status_or_annotations() -> None:
    obj = subnamespace()

    v1 = convert_subnamespace(obj, V1)

    assert "status" not in v1
    assert "annotations" not in v1["metadata"]


def test_v1_annotations_become_v2_status_and_are_removed() -> None:
    obj = subnamespace(
        V1,
        status="ok",
        metadata={
            "name": "sub1",
            "namespace": "root1",
            "annotations": {
                ANNOTATION_V1_OBSERVED_GENERATION: "7",
                ANNOTATION_V1_CONDITIONS: json.dumps([STALLED]),
                "owner": "team-a",
            },
        },
    )

    v2 = convert_subnamespace(obj, V2)

    assert v2["status"] == {"observedGeneration": 7, "conditions": [STALLED]}
    assert v2["metadata"]["annotations"] == {"owner": "team-a"}


def test_v1_status_string_alone_is_not_carried_to_v2() -> None:
    v2 = convert_subnamespace(subnamespace(V1, status="ok"), V2)

    assert "status" not in v2


def test_v1_with_only_internal_annotations_loses_the_empty_annotation_map() -> None:
    obj = subnamespace(V1)
    obj["metadata"]["annotations"] = {ANNOTATION_V1_CONDITIONS: "null"}

    v2 = convert_subnamespace(obj, V2)

    assert "annotations" not in v2["metadata"]
    assert "status" not in v2


@pytest.mark.parametrize("value", ["abc", "1.5", " 3", "3_000", "", "99999999999999999999"])
def test_bad_observed_generation_annotation_is_an_error(value: str) -> None:
    obj = subnamespace(V1)
    obj["metadata"]["annotations"] = {ANNOTATION_V1_OBSERVED_GENERATION: value}

    with pytest.raises(ConversionError, match=ANNOTATION_V1_OBSERVED_GENERATION):
        convert_subnamespace(obj, V2)


@pytest.mark.parametrize("value", ["{", '{"type": "Stalled"}', "[1]"])
def test_bad_conditions_annotation_is_an_error(value: str) -> None:
    obj = subnamespace(V1)
    obj["metadata"]["annotations"] = {ANNOTATION_V1_CONDITIONS: value}

    with pytest.raises(ConversionError, match=ANNOTATION_V1_CONDITIONS):
        convert_subnamespace(obj, V2)


def test_signed_observed_generation_is_read_like_go_parseint() -> None:
    obj = subnamespace(V1)
    obj["metadata"]["annotations"] = {ANNOTATION_V1_OBSERVED_GENERATION: "+4"}

    assert convert_subnamespace(obj, V2)["status"] == {"observedGeneration": 4}


@pytest.mark.parametrize(("source", "target"), [(V2, V2ALPHA1), (V2ALPHA1, V2), (V2, V2), (V1, V1)])
def test_same_schema_versions_only_change_the_api_version(source: str, target: str) -> None:
    obj = subnamespace(source, status={"observedGeneration": 2, "conditions": [STALLED]})

    converted = convert_subnamespace(obj, target)

    assert converted == {**obj, "apiVersion": target}


def test_v2alpha1_to_v1_goes_through_v2() -> None:
    obj = subnamespace(V2ALPHA1, status={"observedGeneration": 2})

    assert convert_subnamespace(obj, V1)["status"] == "ok"


def test_unknown_versions_and_kinds_are_errors() -> None:
    with pytest.raises(ConversionError, match="target apiVersion"):
        convert_subnamespace(subnamespace(), "accurate.cybozu.com/v3")
    with pytest.raises(ConversionError, match="source apiVersion"):
        convert_subnamespace(subnamespace("v1"), V2)
    with pytest.raises(ConversionError, match="kind 'Namespace'"):
        convert_subnamespace({**subnamespace(), "kind": "Namespace"}, V1)


# Property tests: generated SubNamespaces survive round trips and are never mutated.

_text = st.text(st.characters(codec="utf-8"), max_size=12)
_keys = st.text("abcdefghijklmnopqrstuvwxyz./-", min_size=1, max_size=12).filter(
    lambda key: not key.startswith("internal.accurate.cybozu.com/")
)
_maps = st.dictionaries(_keys, _text, max_size=3)
_conditions = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["Stalled", "Ready", "Progressing"]),
            "status": st.sampled_from(["True", "False", "Unknown"]),
            "reason": st.from_regex(r"[A-Z][a-zA-Z]{0,8}", fullmatch=True),
            "message": _text,
            "lastTransitionTime": st.just("2024-05-06T07:08:09Z"),
        },
        optional={"observedGeneration": st.integers(1, 2**40)},
    ),
    max_size=3,
    unique_by=lambda condition: condition["type"],
)


@st.composite
def v2_objects(draw: st.DrawFn) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": "sub",
        "namespace": "root",
        "generation": draw(st.integers(1, 5)),
    }
    # Empty maps are absent on the wire (Go's omitempty), so the generator does not make them.
    annotations = draw(st.none() | _maps.filter(bool))
    if annotations is not None:
        metadata["annotations"] = annotations
    obj: dict[str, Any] = {"apiVersion": V2, "kind": "SubNamespace", "metadata": metadata}
    obj["spec"] = draw(st.fixed_dictionaries({}, optional={"labels": _maps, "annotations": _maps}))
    status = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "observedGeneration": st.integers(1, 2**63 - 1),
                "conditions": _conditions.filter(bool),
            },
        )
    )
    if status:
        obj["status"] = status
    return obj


@given(v2_objects())
def test_v2_to_v1_to_v2_is_lossless(obj: dict[str, Any]) -> None:
    before = copy.deepcopy(obj)

    v1 = convert_subnamespace(obj, V1)
    back = convert_subnamespace(v1, V2)

    assert back == before
    assert obj == before


@given(v2_objects())
def test_v1_to_v2_to_v1_is_lossless(obj: dict[str, Any]) -> None:
    v1 = convert_subnamespace(obj, V1)
    before = copy.deepcopy(v1)

    back = convert_subnamespace(convert_subnamespace(v1, V2), V1)

    assert back == before
    assert v1 == before


@given(v2_objects())
def test_v2alpha1_round_trip_is_lossless(obj: dict[str, Any]) -> None:
    assert convert_subnamespace(convert_subnamespace(obj, V2ALPHA1), V2) == obj


@pytest.mark.parametrize(
    ("source", "fields", "named"),
    [
        (V1, {"metadata": ["sub1"]}, "metadata must be an object"),
        (V1, {"metadata": {"annotations": ["a"]}}, "metadata.annotations must be a map"),
        (V1, {"metadata": {"annotations": {"a": 1}}}, "metadata.annotations must be a map"),
        (V2, {"metadata": {"generation": "2"}}, "metadata.generation must be an integer"),
        (V2, {"status": "ok"}, "status must be an object"),
        (V2, {"status": {"observedGeneration": True}}, "status.observedGeneration must be"),
        (V2, {"status": {"conditions": {"type": "Ready"}}}, "status.conditions must be a list"),
        (V2, {"status": {"conditions": ["Ready"]}}, "status.conditions must be a list"),
    ],
)
def test_fields_of_the_wrong_type_fail_the_conversion_naming_them(
    source: str, fields: dict[str, Any], named: str
) -> None:
    """The API server only sends objects of the CRD's schema; anyone else gets a reason."""
    with pytest.raises(ConversionError, match=named):
        convert_subnamespace(subnamespace(source, **fields), V1 if source == V2 else V2)
