"""The SubNamespace wire facts: which version to speak to which cluster, the paths, and objects
built in v2 and sent or read in any served version."""

from __future__ import annotations

import pytest

from libaccurate import subnamespaces
from libaccurate.constants import ANNOTATION_V1_OBSERVED_GENERATION


def api_group(*versions: str) -> dict[str, object]:
    """An APIGroup discovery document as kube-apiserver serves it for the CRD's group."""
    entries = [{"groupVersion": f"accurate.cybozu.com/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "name": "accurate.cybozu.com", "versions": entries}


@pytest.mark.parametrize(
    ("served", "spoken"),
    [
        (("v1",), "v1"),  # the Go Accurate v0.x
        (("v2", "v2alpha1"), "v2"),  # v1.x
        (("v2alpha1",), "v2alpha1"),
        (("v2",), "v2"),  # today's controllers
        (("v3", "v1"), "v1"),
        (("v3",), None),
        ((), None),
    ],
)
def test_the_best_version_the_cluster_serves_is_spoken(
    served: tuple[str, ...], spoken: str | None
) -> None:
    assert subnamespaces.preferred(subnamespaces.served_versions(api_group(*served))) == spoken


def test_served_versions_are_the_ones_we_speak_best_first() -> None:
    assert subnamespaces.served_versions(api_group("v1", "v3", "v2")) == ("v2", "v1")
    assert subnamespaces.served_versions({}) == ()


def test_paths_per_version_with_names_quoted() -> None:
    assert subnamespaces.path() == "/apis/accurate.cybozu.com/v2/subnamespaces"
    assert subnamespaces.path("team", "dev", "v1") == (
        "/apis/accurate.cybozu.com/v1/namespaces/team/subnamespaces/dev"
    )
    assert subnamespaces.path("team", "a/b", subresource="status") == (
        "/apis/accurate.cybozu.com/v2/namespaces/team/subnamespaces/a%2Fb/status"
    )


def test_a_new_subnamespace_leaves_out_empty_spec_fields() -> None:
    assert subnamespaces.build("team", "dev", {"env": "dev"}, {}) == {
        "apiVersion": "accurate.cybozu.com/v2",
        "kind": "SubNamespace",
        "metadata": {"name": "dev", "namespace": "team"},
        "spec": {"labels": {"env": "dev"}},
    }


@pytest.mark.parametrize("version", subnamespaces.VERSIONS)
def test_objects_go_out_in_any_version_and_come_back_as_v2(version: str) -> None:
    built = subnamespaces.build("team", "dev", {"env": "dev"}, {"owner": "alice"})
    sent = subnamespaces.in_version(built, version)
    assert sent["apiVersion"] == f"accurate.cybozu.com/{version}"
    assert sent["spec"] == built["spec"]
    assert subnamespaces.read(sent) == built


def test_a_v1_object_read_as_v2_gets_its_status_back() -> None:
    stored = {
        "apiVersion": "accurate.cybozu.com/v1",
        "kind": "SubNamespace",
        "metadata": {
            "name": "dev",
            "namespace": "team",
            "generation": 2,
            "annotations": {ANNOTATION_V1_OBSERVED_GENERATION: "2"},
        },
        "spec": {},
        "status": "ok",
    }
    read = subnamespaces.read(stored)
    assert read["apiVersion"] == "accurate.cybozu.com/v2"
    assert read["status"] == {"observedGeneration": 2}
    assert "annotations" not in read["metadata"]
