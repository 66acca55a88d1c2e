"""``ns set-type``, ``template set/unset`` and ``ns describe`` (ACCEPTANCE H2, H3, H6, H7).

The label commands run with the real admission webhooks registered (tests.e2e.webhooks), so a
refusal is the one a user of a real installation meets.
"""

from __future__ import annotations

import json

import pytest
import yaml

from accurate_testbed.cluster import Cluster
from accurate_testbed.objects import controller_stand_in
from libaccurate.constants import LABEL_PARENT, LABEL_TEMPLATE, LABEL_TYPE, TYPE_ROOT
from libaccurate.network.kube import resource_path
from tests.e2e.cli import World, failed, field, resource_rows, succeeded
from tests.e2e.webhooks import Webhooks

ROLE_WATCH = "watches:\n- group: rbac.authorization.k8s.io\n  version: v1\n  kind: Role\n"
SECRET_WATCH = "watches:\n- version: v1\n  kind: Secret\n"


def test_set_type_root_template_and_none(cluster: Cluster, webhooks: Webhooks) -> None:
    world = World(cluster)
    name = world.namespace("plain")
    assert (
        succeeded(world.run("ns", "set-type", name, "root")) == f"namespace {name} is now a root\n"
    )
    assert world.labels(name) == {LABEL_TYPE: "root"}
    again = world.run("namespace", "set-type", name, "root")
    assert succeeded(again) == f"nothing to do: namespace {name} is already a root\n"
    assert succeeded(world.run("ns", "set-type", name, "template")) == (
        f"namespace {name} is now a template\n"
    )
    assert world.labels(name) == {LABEL_TYPE: "template"}
    assert succeeded(world.run("ns", "set-type", name, "none")) == (
        f"namespace {name} no longer has a type\n"
    )
    assert world.labels(name) == {}
    assert succeeded(world.run("ns", "set-type", name, "none")) == (
        f"nothing to do: namespace {name} has no type\n"
    )


def test_set_type_writes_only_the_label_it_changes(cluster: Cluster) -> None:
    world = World(cluster)
    name = world.namespace("owned", {"team": "a"})
    succeeded(world.run("ns", "set-type", name, "root"))
    entries = world.get_namespace(name)["metadata"]["managedFields"]
    [ours] = [entry for entry in entries if entry["manager"] == "kubectl-accurate"]
    assert ours["operation"] == "Update"
    assert ours["fieldsV1"] == {"f:metadata": {"f:labels": {f"f:{LABEL_TYPE}": {}}}}
    assert world.labels(name) == {"team": "a", LABEL_TYPE: "root"}


def test_set_type_with_a_bad_type_is_a_usage_error(cluster: Cluster) -> None:
    world = World(cluster)
    name = world.namespace("plain")
    error = failed(world.run("ns", "set-type", name, "branch"), code=2)
    assert "'branch' is not one of 'root', 'template', 'none'" in error


def test_a_refused_set_type_changes_nothing(cluster: Cluster, webhooks: Webhooks) -> None:
    world = World(cluster)
    root = world.root()
    sub = world.namespace("sub", {LABEL_PARENT: root})
    before = world.versions(root, sub)
    error = failed(world.run("ns", "set-type", root, "none"))
    assert error == (
        f"error: there are sub-namespaces under {root}: {sub}; keep it labelled "
        f"{LABEL_TYPE}={TYPE_ROOT}, or move or delete them first\n"
    )
    assert failed(world.run("ns", "set-type", sub, "template")).startswith(
        "error: a sub-namespace cannot be a root or a template"
    )
    assert world.versions(root, sub) == before


def test_template_set_and_unset(cluster: Cluster, webhooks: Webhooks) -> None:
    world = World(cluster)
    template = world.template()
    name = world.root()
    assert succeeded(world.run("template", "set", name, template)) == (
        f"namespace {name} now uses template {template}\n"
    )
    assert world.labels(name) == {LABEL_TYPE: "root", LABEL_TEMPLATE: template}
    assert succeeded(world.run("template", "set", name, template)) == (
        f"nothing to do: namespace {name} already uses template {template}\n"
    )
    assert succeeded(world.run("template", "unset", name)) == (
        f"namespace {name} no longer uses template {template}\n"
    )
    assert world.labels(name) == {LABEL_TYPE: "root"}
    assert succeeded(world.run("template", "unset", name)) == (
        f"nothing to do: namespace {name} has no template\n"
    )


def test_setting_a_namespace_that_is_no_template_fails_with_the_rules_message(
    cluster: Cluster, webhooks: Webhooks
) -> None:
    world = World(cluster)
    not_a_template = world.root("not-tmpl")
    name = world.namespace("plain")
    before = world.versions(name)
    assert failed(world.run("template", "set", name, not_a_template)) == (
        f"error: {not_a_template} is not a valid template namespace: it is a root namespace, "
        f"not labelled {LABEL_TYPE}=template\n"
    )
    missing = cluster.unique("missing")
    assert failed(world.run("template", "set", name, missing)) == (
        f"error: template namespace does not exist: {missing}\n"
    )
    assert world.versions(name) == before


def test_label_commands_on_a_missing_namespace_fail(cluster: Cluster) -> None:
    world = World(cluster)
    missing = cluster.unique("missing")
    for args in (("ns", "set-type", missing, "root"), ("template", "unset", missing)):
        assert failed(world.run(*args)) == f"error: namespace {missing} not found\n"


# ns describe


def config_namespace(world: World, config: str, configmap: str = "accurate-config") -> str:
    """A namespace holding a controller config, as the accurate namespace would."""
    name = world.namespace("accurate")
    body = {"metadata": {"name": configmap}, "data": {"config.yaml": config}}
    world.kube.create(resource_path("", "v1", "configmaps", name), body)
    return name


@pytest.fixture
def propagated(cluster: Cluster) -> dict[str, str]:
    """A root with a propagated Role and Secret, and a child holding their copies."""
    world = World(cluster)
    root = world.root()
    child = world.namespace("child", {LABEL_PARENT: root})
    grandchild = world.namespace("grand", {LABEL_PARENT: child})
    world.role(root, "admin", mode="update")
    world.role(root, "unrelated")
    world.role(child, "admin", mode="update", source=root)
    world.role(child, "local", mode="create")
    secret = {
        "metadata": {
            "name": "token",
            "annotations": {"accurate.cybozu.com/propagate": "create"},
        },
        "stringData": {"a": "b"},
    }
    world.kube.create(resource_path("", "v1", "secrets", root), secret)
    return {"root": root, "child": child, "grandchild": grandchild}


def test_describe_shows_the_namespace_and_its_propagated_objects(
    cluster: Cluster, propagated: dict[str, str]
) -> None:
    world = World(cluster)
    config = config_namespace(world, ROLE_WATCH)
    output = succeeded(
        world.run("ns", "describe", propagated["child"], "--accurate-namespace", config)
    )
    assert field(output, "Name") == propagated["child"]
    assert field(output, "Type") == "none"
    assert field(output, "Parent") == propagated["root"]
    assert field(output, "Children") == f"1 ({propagated['grandchild']})"
    assert field(output, "Watched kinds") == f"ConfigMap {config}/accurate-config"
    assert resource_rows(output) == [
        ["Role", "admin", propagated["root"], "update"],
        ["Role", "local", "-", "create"],
    ]
    root = succeeded(
        world.run("ns", "describe", propagated["root"], "--accurate-namespace", config)
    )
    assert field(root, "Type") == "root"
    assert field(root, "Children") == f"1 ({propagated['child']})"
    assert resource_rows(root) == [["Role", "admin", "-", "update"]]


def test_describe_finds_the_config_through_the_controllers_deployment(
    cluster: Cluster, propagated: dict[str, str]
) -> None:
    world = World(cluster)
    config = config_namespace(world, SECRET_WATCH, configmap="custom-config")
    deployment = controller_stand_in(
        config,
        {
            "containers": [{"name": "manager", "image": "example.invalid/accurate"}],
            "volumes": [{"name": "config", "configMap": {"name": "custom-config"}}],
        },
    )
    world.kube.create(resource_path("apps", "v1", "deployments", config), deployment)
    output = world.run("ns", "describe", propagated["root"], "--accurate-namespace", config)
    described = json.loads(
        succeeded(
            world.run(
                "ns", "describe", propagated["root"], "--accurate-namespace", config, "-o", "json"
            )
        )
    )
    assert field(succeeded(output), "Watched kinds") == f"ConfigMap {config}/custom-config"
    assert described["watchedKinds"] == {
        "source": f"ConfigMap {config}/custom-config",
        "fromConfig": True,
        "kinds": ["Secret/v1"],
    }
    assert described["resources"] == [
        {"kind": "Secret", "apiVersion": "v1", "name": "token", "from": "", "mode": "create"}
    ]


def test_describe_as_json_and_yaml(cluster: Cluster, propagated: dict[str, str]) -> None:
    world = World(cluster)
    config = config_namespace(world, ROLE_WATCH)
    args = ("ns", "describe", propagated["child"], "--accurate-namespace", config)
    described = json.loads(succeeded(world.run(*args, "-o", "json")))
    assert yaml.safe_load(succeeded(world.run(*args, "-o", "yaml"))) == described
    assert described["name"] == propagated["child"]
    assert (described["type"], described["parent"], described["template"]) == (
        "none",
        propagated["root"],
        None,
    )
    assert described["children"] == [propagated["grandchild"]]
    assert described["resources"] == [
        {
            "kind": "Role",
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "name": "admin",
            "from": propagated["root"],
            "mode": "update",
        },
        {
            "kind": "Role",
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "name": "local",
            "from": "",
            "mode": "create",
        },
    ]
    assert described["skipped"] == []


def test_describe_of_a_missing_namespace_fails(cluster: Cluster) -> None:
    missing = cluster.unique("missing")
    error = failed(World(cluster).run("ns", "describe", missing))
    assert error == f"error: namespace {missing} not found\n"
