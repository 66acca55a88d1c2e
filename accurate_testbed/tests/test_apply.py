"""Contract: server-side apply details the controller depends on (DESIGN.md 4.2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accurate_testbed.cluster import Cluster
from libaccurate.network.kube import ApiError, ConnectionOptions, Kube, resource_path


@pytest.fixture
def kube(kubeconfig: Path) -> Kube:
    return Kube.connect(ConnectionOptions(kubeconfig=str(kubeconfig)))


def namespace_config(name: str, **metadata: object) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, **metadata}}


def owned_labels(obj: dict, manager: str) -> set[str]:
    entries = [e for e in obj["metadata"]["managedFields"] if e["manager"] == manager]
    fields = entries[0]["fieldsV1"] if entries else {}
    labels = fields.get("f:metadata", {}).get("f:labels", {})
    return {key[2:] for key in labels if key.startswith("f:")}


def test_an_applier_owns_what_it_sent_not_the_defaults(kube: Kube, cluster: Cluster) -> None:
    name = cluster.unique("applied")
    path = resource_path("", "v1", "namespaces", name=name)
    sent = cluster.own({"team": "a"})
    created = kube.apply(path, namespace_config(name, labels=sent), "applier")
    assert created["metadata"]["labels"]["kubernetes.io/metadata.name"] == name
    assert owned_labels(created, "applier") == set(sent)
    again = kube.apply(path, namespace_config(name, labels=sent), "applier")
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_uid_and_resource_version_in_an_apply_are_preconditions(
    kube: Kube, cluster: Cluster
) -> None:
    name = cluster.namespace("preconditions")
    path = resource_path("", "v1", "namespaces", name=name)
    live = kube.get(path)
    meta = live["metadata"]
    kube.apply(path, namespace_config(name, labels={"a": "1"}, uid=meta["uid"]), "applier")

    with pytest.raises(ApiError) as stale:
        kube.apply(
            path,
            namespace_config(name, labels={"a": "2"}, resourceVersion=meta["resourceVersion"]),
            "applier",
        )
    assert stale.value.conflict
    assert "the object has been modified" in stale.value.message

    with pytest.raises(ApiError) as other:
        kube.apply(path, namespace_config(name, labels={"a": "3"}, uid="not-this-one"), "applier")
    assert other.value.conflict
    assert "Precondition failed: UID in precondition: not-this-one" in other.value.message

    missing = cluster.unique("missing")
    with pytest.raises(ApiError) as gone:
        kube.apply(
            resource_path("", "v1", "namespaces", name=missing),
            namespace_config(missing, uid=meta["uid"]),
            "applier",
        )
    assert gone.value.code == 409
    assert kube.get(path)["metadata"]["labels"]["a"] == "1"


def test_an_apply_creates_a_missing_object_whatever_resource_version_it_carries(
    kube: Kube, cluster: Cluster
) -> None:
    """kube-apiserver's create-on-update path (registry/generic/registry/store.go, Update)
    returns before it compares resourceVersions, and the storage layer clears the version, so
    an apply that creates ignores it; on an existing object the same version is a
    precondition. The controller creates namespaces this way: one write that makes it the
    Apply owner of every key, and that never changes a namespace someone else made."""
    other = kube.get(resource_path("", "v1", "namespaces", name=cluster.namespace("other")))
    version = other["metadata"]["resourceVersion"]
    name = cluster.unique("created")
    path = resource_path("", "v1", "namespaces", name=name)
    labels = cluster.own({"team": "a"})

    created = kube.apply(path, namespace_config(name, labels=labels, resourceVersion=version), "me")

    assert created["metadata"]["resourceVersion"] != version
    assert owned_labels(created, "me") == set(labels)
    (entry,) = [e for e in created["metadata"]["managedFields"] if e["manager"] == "me"]
    assert entry["operation"] == "Apply"
    with pytest.raises(ApiError) as taken:
        kube.apply(path, namespace_config(name, labels={"x": "y"}, resourceVersion=version), "me")
    assert taken.value.conflict
    assert "x" not in kube.get(path)["metadata"]["labels"]


def test_ownership_moved_into_the_appliers_entry_lets_its_next_apply_remove_the_key(
    kube: Kube, cluster: Cluster
) -> None:
    """What the controller's takeover from the Go Accurate's old update entries relies on: a
    merge patch of managedFields alone replaces them as sent, at its resourceVersion, adds no
    entry for the patcher and changes nothing else; the applier then owns the key alone."""
    name = cluster.unique("moved")
    path = resource_path("", "v1", "namespaces", name=name)
    body = namespace_config(name, labels=cluster.own({"team": "a"}))
    created = kube.create(resource_path("", "v1", "namespaces"), body, fieldManager="updater")
    applied = kube.apply(path, namespace_config(name, labels={"team": "a"}), "applier")
    assert "team" in owned_labels(applied, "updater")
    entries = applied["metadata"]["managedFields"]
    updater = next(e for e in entries if e["manager"] == "updater")
    del updater["fieldsV1"]["f:metadata"]["f:labels"]["f:team"]
    version = applied["metadata"]["resourceVersion"]

    with pytest.raises(ApiError) as stale:
        stale_version = created["metadata"]["resourceVersion"]
        patch = {"metadata": {"resourceVersion": stale_version, "managedFields": entries}}
        kube.patch(path, patch, fieldManager="mover")
    assert stale.value.conflict

    moved = kube.patch(
        path,
        {"metadata": {"resourceVersion": version, "managedFields": entries}},
        fieldManager="mover",
    )
    assert moved["metadata"]["labels"] == applied["metadata"]["labels"]
    assert "mover" not in {e["manager"] for e in moved["metadata"]["managedFields"]}
    assert "team" not in owned_labels(moved, "updater")
    removed = kube.apply(path, namespace_config(name, labels={}), "applier")
    assert "team" not in removed["metadata"]["labels"]
