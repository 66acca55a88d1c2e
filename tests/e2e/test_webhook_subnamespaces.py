"""SubNamespace admission end to end (ACCEPTANCE D, and naming policies from B): kubectl
writes, the API server calls the real webhook server registered from the deploy manifests.
No controller runs here, so the namespaces a SubNamespace would create are made by hand."""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Callable
from typing import Any

from accurate_testbed.cluster import Cluster
from libaccurate.config import NamingPolicy
from libaccurate.constants import FINALIZER, GROUP, LABEL_PARENT, LABEL_TYPE, TYPE_ROOT
from tests.e2e.webhooks import (
    NAMESPACES,
    Webhooks,
    assert_denied_by,
    assert_done,
    connect,
    kubectl,
    namespace,
)

ROOT = {LABEL_TYPE: TYPE_ROOT}
assert_denied = functools.partial(assert_denied_by, "vsubnamespace.accurate.cybozu.com")


def create(
    cluster: Cluster, home: str, name: str, **spec: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``kubectl create`` a SubNamespace (the test's namespaces go with it)."""
    manifest = {
        "apiVersion": f"{GROUP}/v2",
        "kind": "SubNamespace",
        "metadata": {"name": name, "namespace": home},
        "spec": spec,
    }
    return kubectl(cluster, "create", "-f", "-", stdin=manifest)


def get(cluster: Cluster, home: str, name: str) -> dict[str, Any]:
    result = kubectl(cluster, "get", "subnamespace", name, "-n", home, "-o", "json")
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def delete(cluster: Cluster, home: str, name: str) -> subprocess.CompletedProcess[str]:
    return kubectl(cluster, "delete", "subnamespace", name, "-n", home, "--wait=false")


def test_only_roots_and_sub_namespaces_hold_subnamespaces(
    cluster: Cluster, webhooks: Webhooks
) -> None:
    plain = namespace(cluster, "plain")
    root = namespace(cluster, "root", ROOT)
    sub = namespace(cluster, "sub", {LABEL_PARENT: root})
    in_root, in_sub = cluster.unique("child"), cluster.unique("child")

    assert_denied(
        create(cluster, plain, cluster.unique("child")),
        f"namespace {plain} is neither a root nor a sub namespace",
    )
    assert_done(create(cluster, root, in_root))
    assert_done(create(cluster, sub, in_sub))
    assert get(cluster, root, in_root)["metadata"]["finalizers"] == [FINALIZER]
    assert get(cluster, sub, in_sub)["metadata"]["finalizers"] == [FINALIZER]


def test_a_user_can_remove_the_finalizer(cluster: Cluster, webhooks: Webhooks) -> None:
    root = namespace(cluster, "root", ROOT)
    name = cluster.unique("child")
    assert_done(create(cluster, root, name))

    removed = kubectl(
        cluster,
        "patch",
        "subnamespace",
        name,
        "-n",
        root,
        "--type=json",
        '--patch=[{"op": "remove", "path": "/metadata/finalizers"}]',
    )

    assert_done(removed)
    assert "finalizers" not in get(cluster, root, name)["metadata"]


def test_invalid_labels_and_annotations_are_denied_with_field_paths(
    cluster: Cluster, webhooks: Webhooks
) -> None:
    root = namespace(cluster, "root", ROOT)
    name = cluster.unique("child")

    bad_label = create(cluster, root, cluster.unique("child"), labels={"team": "~"})
    bad_annotation = create(cluster, root, cluster.unique("child"), annotations={"foo-": "x"})
    assert_done(create(cluster, root, name, labels={"team": "a"}))
    bad_update = kubectl(
        cluster,
        "patch",
        "subnamespace",
        name,
        "-n",
        root,
        "--type=merge",
        '--patch={"spec": {"labels": {"team": "~"}}}',
    )

    assert_denied(bad_label, 'spec.labels: Invalid value: "~"')
    assert_denied(bad_annotation, 'spec.annotations: Invalid value: "foo-"')
    assert_denied(bad_update, "spec.labels")
    assert get(cluster, root, name)["spec"]["labels"] == {"team": "a"}


def _subnamespace_with_children(cluster: Cluster) -> tuple[str, str, str]:
    """SubNamespace root/sub whose namespace sub (made by hand here) has a child."""
    root = namespace(cluster, "root", ROOT)
    sub = cluster.unique("sub")
    assert_done(create(cluster, root, sub))
    kube = connect(cluster)
    kube.create(
        NAMESPACES, {"metadata": {"name": sub, "labels": cluster.own({LABEL_PARENT: root})}}
    )
    child = namespace(cluster, "child", {LABEL_PARENT: sub})
    return root, sub, child


def test_a_subnamespace_whose_namespace_has_children_cannot_be_deleted(
    cluster: Cluster, webhooks: Webhooks
) -> None:
    root, sub, child = _subnamespace_with_children(cluster)
    leaf = cluster.unique("leaf")
    assert_done(create(cluster, root, leaf))

    assert_denied(delete(cluster, root, sub), "child namespaces exist", child)
    assert_done(delete(cluster, root, leaf))


def test_cascading_deletion_allows_deleting_it(
    cluster: Cluster, start_webhooks: Callable[..., Webhooks]
) -> None:
    start_webhooks(allow_cascading_deletion=True)
    root, sub, _ = _subnamespace_with_children(cluster)

    assert_done(delete(cluster, root, sub))
    assert get(cluster, root, sub)["metadata"]["deletionTimestamp"]


def test_naming_policies_apply_through_the_root(
    cluster: Cluster, start_webhooks: Callable[..., Webhooks]
) -> None:
    start_webhooks(naming_policies=[NamingPolicy(r"^app-(?P<team>.*)", r"^app-${team}-.*")])
    root = namespace(cluster, "app-team", ROOT)
    sub = namespace(cluster, "sub", {LABEL_PARENT: root})

    assert_done(create(cluster, sub, f"{root}-child"))
    assert_denied(
        create(cluster, root, "app-team20-child"),
        "app-team20-child",
        f"^app-{root.removeprefix('app-')}-.*",
    )
