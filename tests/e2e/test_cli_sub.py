"""``sub create``, ``delete``, ``move``, ``graft`` and ``cut`` (ACCEPTANCE H4, H5).

The real admission webhooks are registered (tests.e2e.webhooks). The controller does not run:
the tests check what the plugin writes (labels, SubNamespaces), not what the controller does
with it. A command that fails must leave every object as it was.
"""

from __future__ import annotations

from collections.abc import Callable

from accurate_testbed.cluster import Cluster
from libaccurate.config import NamingPolicy
from libaccurate.constants import (
    ANNOTATION_ALLOW_CASCADING_DELETION,
    FINALIZER,
    LABEL_CREATED_BY,
    LABEL_PARENT,
    LABEL_TYPE,
)
from tests.e2e.cli import World, failed, succeeded
from tests.e2e.webhooks import Webhooks

SUBNAMESPACE_HOOK = 'admission webhook "vsubnamespace.accurate.cybozu.com" denied the request'


def released(world: World, parent: str, name: str) -> bool:
    """The SubNamespace is gone, or deleted and held only by its finalizer (no controller runs
    here to let it go)."""
    found = world.subnamespace(parent, name)
    return found is None or bool(found["metadata"].get("deletionTimestamp"))


def spec_of(world: World, parent: str, name: str) -> dict[str, object]:
    found = world.subnamespace(parent, name)
    assert found is not None, f"no SubNamespace {parent}/{name}"
    return dict(found.get("spec") or {})


def test_sub_create_with_labels_and_annotations(cluster: Cluster, webhooks: Webhooks) -> None:
    world = World(cluster)
    root = world.root()
    name = cluster.unique("dev")
    result = world.run(
        "sub", "create", name, root, "--labels", "team=a,env=dev", "--annotations", "owner=alice"
    )
    assert succeeded(result) == (
        f"created SubNamespace {root}/{name}; the controller will create namespace {name}\n"
    )
    created = world.subnamespace(root, name)
    assert created is not None
    assert created["spec"] == {
        "labels": {"team": "a", "env": "dev"},
        "annotations": {"owner": "alice"},
    }
    assert FINALIZER in created["metadata"]["finalizers"]


def test_sub_create_fails_cleanly_when_the_namespace_exists(
    cluster: Cluster, webhooks: Webhooks
) -> None:
    world = World(cluster)
    root = world.root()
    taken = world.namespace("taken")
    assert failed(world.run("sub", "create", taken, root)) == (
        f"error: namespace {taken} already exists\n"
    )
    assert world.subnamespace(root, taken) is None


def test_sub_create_refusals(cluster: Cluster, webhooks: Webhooks) -> None:
    world = World(cluster)
    plain = world.namespace("plain")
    root = world.root()
    name = cluster.unique("sub")
    assert failed(world.run("sub", "create", name, plain)) == (
        f"error: namespace {plain} is neither a root nor a sub namespace: it is a plain namespace "
        "(no accurate.cybozu.com/type, accurate.cybozu.com/parent or accurate.cybozu.com/template "
        "label), so it cannot hold SubNamespaces\n"
    )
    bad_label = failed(world.run("sub", "create", name, root, "--labels", "team=~"))
    assert bad_label.startswith('error: spec.labels: Invalid value: "~": a valid label must be')
    assert failed(world.run("sub", "create", name, root, "--labels", "team"), code=2).endswith(
        "Invalid value for '--labels': 'team' must be formatted as key=value\n"
    )
    assert world.subnamespace(plain, name) is None
    assert world.subnamespace(root, name) is None


def test_webhook_refusals_reach_the_user_word_for_word(
    cluster: Cluster, start_webhooks: Callable[..., Webhooks]
) -> None:
    world = World(cluster)
    root = world.root("team")
    start_webhooks(naming_policies=[NamingPolicy(root=f"^{root}$", match="^ok-")])
    name = cluster.unique("bad")
    error = failed(world.run("sub", "create", name, root))
    assert error == (
        f"error: {SUBNAMESPACE_HOOK}: cannot create sub-namespace {name} in {root}: denied "
        f"namespace '{name}' under root namespace '{root}' by naming policy (root='^{root}$', "
        "match='^ok-', expanded to '^ok-')\n"
    )
    assert world.subnamespace(root, name) is None


def test_sub_delete(cluster: Cluster, subnamespace_crd: None) -> None:
    world = World(cluster)
    root = world.root()
    sub = world.sub(root)
    assert succeeded(world.run("sub", "delete", sub)) == (
        f"deleted SubNamespace {root}/{sub}; the controller will delete namespace {sub}\n"
    )
    assert released(world, root, sub)


def test_sub_delete_of_a_namespace_that_is_no_sub_namespace_fails(
    cluster: Cluster, subnamespace_crd: None
) -> None:
    world = World(cluster)
    root = world.root()
    assert failed(world.run("sub", "delete", root)) == f"error: {root} is not a sub-namespace\n"
    orphan = world.namespace("orphan", {LABEL_PARENT: root})
    assert failed(world.run("sub", "delete", orphan)) == (
        f"error: SubNamespace {root}/{orphan} not found\n"
    )


def test_sub_move_moves_the_namespace_and_its_subnamespace(
    cluster: Cluster, webhooks: Webhooks
) -> None:
    world = World(cluster)
    old, new = world.root("old"), world.root("new")
    sub = world.sub(old, spec={"labels": {"team": "a"}})
    grandchild = world.sub(sub, "grand")
    assert succeeded(world.run("sub", "move", sub, new)) == f"moved {sub} from {old} to {new}\n"
    assert world.labels(sub)[LABEL_PARENT] == new
    assert released(world, old, sub)
    assert spec_of(world, new, sub) == {"labels": {"team": "a"}}
    assert world.labels(grandchild)[LABEL_PARENT] == sub
    assert succeeded(world.run("sub", "move", sub, new)) == (
        f"nothing to do: {sub} is already a sub-namespace of {new}\n"
    )


def test_sub_move_leave_original(cluster: Cluster, webhooks: Webhooks) -> None:
    world = World(cluster)
    old, new = world.root("old"), world.root("new")
    sub = world.sub(old)
    assert succeeded(world.run("sub", "move", sub, new, "--leave-original")) == (
        f"moved {sub} from {old} to {new}; SubNamespace {old}/{sub} was left in place\n"
    )
    assert world.labels(sub)[LABEL_PARENT] == new
    assert world.subnamespace(old, sub) is not None
    assert world.subnamespace(new, sub) is not None


def test_a_move_into_its_own_tree_fails_and_changes_nothing(
    cluster: Cluster, webhooks: Webhooks
) -> None:
    world = World(cluster)
    root = world.root()
    sub = world.sub(root)
    grandchild = world.sub(sub, "grand")
    before = world.versions(root, sub, grandchild)
    assert failed(world.run("sub", "move", sub, grandchild)) == (
        f"error: circular reference is not permitted: {sub} -> {grandchild} -> {sub}\n"
    )
    assert failed(world.run("sub", "move", sub, sub)) == (
        f"error: circular reference is not permitted: {sub} cannot be its own parent\n"
    )
    assert world.versions(root, sub, grandchild) == before


def test_a_move_the_webhook_refuses_changes_nothing(
    cluster: Cluster, start_webhooks: Callable[..., Webhooks]
) -> None:
    world = World(cluster)
    old, new = world.root("old"), world.root("strict")
    sub = world.sub(old)
    start_webhooks(naming_policies=[NamingPolicy(root=f"^{new}$", match="^ok-")])
    before = world.versions(old, new, sub)
    error = failed(world.run("sub", "move", sub, new))
    assert SUBNAMESPACE_HOOK in error
    assert f"cannot create sub-namespace {sub} in {new}" in error
    assert world.versions(old, new, sub) == before


def test_sub_move_preconditions(cluster: Cluster, webhooks: Webhooks) -> None:
    world = World(cluster)
    old, new = world.root("old"), world.root("new")
    sub = world.sub(old)
    plain = world.namespace("plain")
    assert (
        failed(world.run("sub", "move", plain, new)) == f"error: {plain} is not a sub-namespace\n"
    )
    world.create_subnamespace(new, sub)
    before = world.versions(old, new, sub)
    assert failed(world.run("sub", "move", sub, new)) == (
        f"error: SubNamespace {new}/{sub} already exists\n"
    )
    assert failed(world.run("sub", "move", sub, plain)).startswith(
        f"error: {plain} is not a valid parent namespace"
    )
    assert world.versions(old, new, sub) == before


def test_sub_graft_makes_a_root_tree_a_sub_tree(cluster: Cluster, webhooks: Webhooks) -> None:
    world = World(cluster)
    parent = world.root("parent")
    grafted = world.root("grafted")
    child = world.sub(grafted, "child")
    assert succeeded(world.run("sub", "graft", grafted, parent)) == (
        f"grafted {grafted} under {parent}\n"
    )
    assert world.labels(grafted) == {LABEL_PARENT: parent}
    assert spec_of(world, parent, grafted) == {}
    assert world.labels(child)[LABEL_PARENT] == grafted


def test_sub_graft_of_a_sub_namespace_fails(cluster: Cluster, webhooks: Webhooks) -> None:
    world = World(cluster)
    root, other = world.root(), world.root("other")
    sub = world.sub(root)
    before = world.versions(root, other, sub)
    assert failed(world.run("sub", "graft", sub, other)) == (
        f"error: {sub} is already a sub-namespace of {root}; use 'sub move' instead\n"
    )
    assert world.versions(root, other, sub) == before


def test_sub_cut_makes_a_root_that_keeps_its_children(cluster: Cluster, webhooks: Webhooks) -> None:
    world = World(cluster)
    root = world.root()
    sub = world.sub(root)
    child = world.sub(sub, "child")
    assert succeeded(world.run("sub", "cut", sub)) == (
        f"namespace {sub} is now a root (cut from {root})\n"
    )
    labels = world.labels(sub)
    assert (labels[LABEL_TYPE], LABEL_PARENT in labels) == ("root", False)
    assert labels[LABEL_CREATED_BY] == "accurate"
    assert released(world, root, sub)
    assert world.labels(child)[LABEL_PARENT] == sub
    assert world.subnamespace(sub, child) is not None
    assert failed(world.run("sub", "cut", sub)) == f"error: {sub} is not a sub-namespace\n"


def test_sub_delete_with_children_is_refused_by_the_webhook(
    cluster: Cluster, webhooks: Webhooks
) -> None:
    world = World(cluster)
    root = world.root()
    sub = world.sub(root)
    child = world.sub(sub, "child")
    before = world.versions(root, sub)
    assert failed(world.run("sub", "delete", sub)) == (
        f"error: {SUBNAMESPACE_HOOK}: child namespaces exist: deleting SubNamespace {root}/{sub} "
        f"would delete namespace {sub}, which has sub-namespaces {child}; delete them first, "
        f'or annotate the SubNamespace with {ANNOTATION_ALLOW_CASCADING_DELETION}="true" to '
        "delete the whole subtree with it\n"
    )
    assert world.versions(root, sub) == before
