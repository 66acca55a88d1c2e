"""Namespace admission end to end (ACCEPTANCE C): kubectl writes, the API server calls the real
webhook server through the configuration rendered from the deploy manifests."""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Callable

import pytest

from accurate_testbed.cluster import Cluster
from controller.webhook import VALIDATE_NAMESPACE_PATH
from libaccurate.constants import LABEL_PARENT, LABEL_TEMPLATE, LABEL_TYPE, TYPE_ROOT, TYPE_TEMPLATE
from tests.e2e.webhooks import (
    Webhooks,
    assert_denied_by,
    assert_done,
    connect,
    kubectl,
    namespace,
)

ROOT = {LABEL_TYPE: TYPE_ROOT}
TEMPLATE = {LABEL_TYPE: TYPE_TEMPLATE}
assert_denied = functools.partial(assert_denied_by, "vnamespace.accurate.cybozu.com")
# The first Kubernetes release whose API server evaluates webhook matchConditions by default.
MATCH_CONDITIONS_SINCE = (1, 28)


def parent(name: str) -> dict[str, str]:
    return {LABEL_PARENT: name}


def template(name: str) -> dict[str, str]:
    return {LABEL_TEMPLATE: name}


def create(cluster: Cluster, name: str, labels: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``kubectl create`` a namespace of the test's own."""
    metadata = {"name": name, "labels": cluster.own(labels)}
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
    return kubectl(cluster, "create", "-f", "-", stdin=manifest)


def label(cluster: Cluster, name: str, *changes: str) -> subprocess.CompletedProcess[str]:
    return kubectl(cluster, "label", "namespace", name, "--overwrite", *changes)


def delete(cluster: Cluster, name: str) -> subprocess.CompletedProcess[str]:
    return kubectl(cluster, "delete", "namespace", name, "--wait=false")


def labels_of(cluster: Cluster, name: str) -> str:
    return kubectl(cluster, "get", "namespace", name, "-o", "jsonpath={.metadata.labels}").stdout


def test_a_plain_namespace_can_be_created_but_not_use_a_plain_template(
    cluster: Cluster, webhooks: Webhooks
) -> None:
    name, other = cluster.unique("plain"), namespace(cluster, "other")

    assert_done(create(cluster, name, {}))
    result = label(cluster, name, f"{LABEL_TEMPLATE}={other}")

    assert_denied(result, f"{other} is not a valid template namespace")
    assert LABEL_TEMPLATE not in labels_of(cluster, name)


def _plain_namespace_lifecycle(cluster: Cluster) -> None:
    name = cluster.unique("plain")
    assert_done(create(cluster, name, {"team": "a"}))
    assert_done(label(cluster, name, "team=b"))
    assert_done(delete(cluster, name))


def server_version(cluster: Cluster) -> tuple[int, int]:
    """The API server's (major, minor); some distributions write the minor as ``24+``."""
    found = connect(cluster).get("/version")
    minor = re.match(r"\d+", str(found["minor"]))
    assert minor, found
    return int(found["major"]), int(minor.group())


def assert_every_write_reviewed_and_allowed(hooks: Webhooks) -> None:
    reviewed = [allowed for path, allowed in hooks.calls if path == VALIDATE_NAMESPACE_PATH]
    assert len(reviewed) >= 3  # create, label, delete (and, on a real cluster, whatever else)
    assert all(reviewed)


def test_namespaces_without_accurate_labels_never_reach_the_webhook(
    cluster: Cluster, webhooks: Webhooks
) -> None:
    """Through the default manifests' matchConditions, which API servers evaluate from 1.28.
    An older one drops the field it does not know, so there every namespace write reaches the
    webhook by design (as with the chart's ``webhook.matchConditions: false``) and passes it:
    what is true there is checked there (issue 30)."""
    webhooks.calls.clear()

    _plain_namespace_lifecycle(cluster)

    if server_version(cluster) >= MATCH_CONDITIONS_SINCE:
        assert [path for path, _ in webhooks.calls if path == VALIDATE_NAMESPACE_PATH] == []
    else:
        assert_every_write_reviewed_and_allowed(webhooks)


def test_without_match_conditions_every_namespace_write_is_reviewed(
    cluster: Cluster, start_webhooks: Callable[..., Webhooks]
) -> None:
    """The variant for clusters before 1.28: plain namespaces reach the webhook and pass."""
    hooks = start_webhooks(manifests="without-match-conditions")
    hooks.calls.clear()

    _plain_namespace_lifecycle(cluster)

    assert_every_write_reviewed_and_allowed(hooks)


def test_self_references_are_denied(cluster: Cluster, webhooks: Webhooks) -> None:
    name = cluster.unique("selfish")

    assert_denied(create(cluster, name, parent(name)), "circular reference", name)
    assert_denied(create(cluster, name, template(name)), "circular reference", name)


def test_longer_cycles_are_denied(cluster: Cluster, webhooks: Webhooks) -> None:
    root = namespace(cluster, "root", ROOT)
    sub = namespace(cluster, "sub", parent(root))
    grandchild = namespace(cluster, "grandchild", parent(sub))
    first = namespace(cluster, "first", TEMPLATE)
    second = namespace(cluster, "second", {**TEMPLATE, **template(first)})

    parents = label(cluster, root, f"{LABEL_TYPE}-", f"{LABEL_PARENT}={grandchild}")
    templates = label(cluster, first, f"{LABEL_TEMPLATE}={second}")

    assert_denied(parents, f"{root} -> {grandchild} -> {sub} -> {root}")
    assert_denied(templates, f"{first} -> {second} -> {first}")


def test_a_sub_namespace_cannot_have_a_template_or_a_type(
    cluster: Cluster, webhooks: Webhooks
) -> None:
    root = namespace(cluster, "root", ROOT)
    base = namespace(cluster, "template", TEMPLATE)

    with_template = create(cluster, cluster.unique("sub"), {**parent(root), **template(base)})
    with_type = create(cluster, cluster.unique("sub"), {**parent(root), **ROOT})

    assert_denied(with_template, "a sub-namespace cannot have a template")
    assert_denied(with_type, "a sub-namespace cannot be a root or a template")


def test_a_parent_must_exist_and_be_a_root_or_a_sub_namespace(
    cluster: Cluster, webhooks: Webhooks
) -> None:
    missing = cluster.unique("missing")
    plain = namespace(cluster, "plain")
    base = namespace(cluster, "template", TEMPLATE)

    assert_denied(
        create(cluster, cluster.unique("sub"), parent(missing)),
        f"parent namespace does not exist: {missing}",
    )
    assert_denied(
        create(cluster, cluster.unique("sub"), parent(plain)),
        f"{plain} is not a valid parent namespace",
    )
    assert_denied(
        create(cluster, cluster.unique("sub"), parent(base)),
        f"{base} is not a valid parent namespace",
    )


def test_sub_namespaces_under_a_root_and_under_a_sub_namespace(
    cluster: Cluster, webhooks: Webhooks
) -> None:
    root = namespace(cluster, "root", ROOT)
    sub, grandchild = cluster.unique("sub"), cluster.unique("grandchild")

    assert_done(create(cluster, sub, parent(root)))
    assert_done(create(cluster, grandchild, parent(sub)))


def test_a_root_or_template_with_dependents_keeps_its_type(
    cluster: Cluster, webhooks: Webhooks
) -> None:
    root = namespace(cluster, "root", ROOT)
    child = namespace(cluster, "child", parent(root))
    base = namespace(cluster, "template", TEMPLATE)
    instance = namespace(cluster, "instance", template(base))
    lonely_root = namespace(cluster, "lonely", ROOT)
    lonely_template = namespace(cluster, "lonely", TEMPLATE)

    assert_denied(label(cluster, root, f"{LABEL_TYPE}-"), child)
    assert_denied(label(cluster, base, f"{LABEL_TYPE}-"), instance)
    assert_done(label(cluster, lonely_root, f"{LABEL_TYPE}-"))
    assert_done(label(cluster, lonely_template, f"{LABEL_TYPE}-"))


def test_a_sub_namespace_with_children_becomes_a_root_when_cut(
    cluster: Cluster, webhooks: Webhooks
) -> None:
    root = namespace(cluster, "root", ROOT)
    sub = namespace(cluster, "sub", parent(root))
    grandchild = namespace(cluster, "grandchild", parent(sub))
    leaf = namespace(cluster, "leaf", parent(root))

    assert_denied(label(cluster, sub, f"{LABEL_PARENT}-"), grandchild)
    assert_done(label(cluster, sub, f"{LABEL_PARENT}-", f"{LABEL_TYPE}={TYPE_ROOT}"))
    assert_done(label(cluster, leaf, f"{LABEL_PARENT}-"))


@pytest.fixture
def dependents(cluster: Cluster) -> Callable[[], dict[str, str]]:
    """A root, a sub-namespace and a template, each with a dependent (which, on a real
    cluster, is cleaned up before them)."""

    def make() -> dict[str, str]:
        root = namespace(cluster, "root", ROOT)
        sub = namespace(cluster, "sub", parent(root))
        base = namespace(cluster, "template", TEMPLATE)
        made = {"root": root, "sub": sub, "template": base}
        made["grandchild"] = namespace(cluster, "grandchild", parent(sub))
        made["instance"] = namespace(cluster, "instance", template(base))
        return made

    return make


def test_namespaces_with_dependents_cannot_be_deleted(
    cluster: Cluster, webhooks: Webhooks, dependents: Callable[[], dict[str, str]]
) -> None:
    made = dependents()

    assert_denied(delete(cluster, made["root"]), "child namespaces exist", made["sub"])
    assert_denied(delete(cluster, made["sub"]), "child namespaces exist", made["grandchild"])
    assert_denied(delete(cluster, made["template"]), made["instance"])


def test_cascading_deletion_allows_roots_and_sub_namespaces_but_not_templates(
    cluster: Cluster,
    start_webhooks: Callable[..., Webhooks],
    dependents: Callable[[], dict[str, str]],
) -> None:
    start_webhooks(allow_cascading_deletion=True)
    made = dependents()

    assert_done(delete(cluster, made["sub"]))
    assert_done(delete(cluster, made["root"]))
    assert_denied(delete(cluster, made["template"]), made["instance"])
