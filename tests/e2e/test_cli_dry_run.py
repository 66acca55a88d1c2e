"""``--dry-run`` on every write command (ACCEPTANCE H7): it says what would be written and what
the controller would then do, and writes nothing (resourceVersions stay the same)."""

from __future__ import annotations

import pytest

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.cluster import Cluster
from libaccurate.constants import LABEL_TEMPLATE
from libaccurate.network.kube import resource_path
from tests.e2e.cli import World, failed, succeeded
from tests.e2e.webhooks import Webhooks

CONFIG = (
    "labelKeys: [team]\nwatches:\n- group: rbac.authorization.k8s.io\n  version: v1\n  kind: Role\n"
)
DONE = "dry run: nothing was written\n"
WRITES = ("POST", "PUT", "PATCH", "DELETE")


@pytest.fixture
def world(cluster: Cluster, webhooks: Webhooks) -> World:
    return World(cluster)


@pytest.fixture
def trees(world: World) -> dict[str, str]:
    """Two roots with a team label and an update-mode Role each, a settled sub-namespace of the
    first (with a copy of its Role) and a child below it, a template, an instance and a plain
    namespace; and the controller's config in a namespace of its own."""
    names = {"old": world.root("old"), "new": world.root("new")}
    for root, team in ((names["old"], "a"), (names["new"], "b")):
        world.kube.patch(
            resource_path("", "v1", "namespaces", name=root),
            {"metadata": {"labels": {"team": team}}},
        )
    world.role(names["old"], "old-admin", mode="update")
    world.role(names["new"], "new-admin", mode="update")
    names["sub"] = world.sub(names["old"], inherited={"team": "a"})
    world.role(names["sub"], "old-admin", mode="update", source=names["old"])
    names["child"] = world.sub(names["sub"], "child", inherited={"team": "a"})
    world.role(names["child"], "old-admin", mode="update", source=names["sub"])
    names["template"] = world.template()
    names["instance"] = world.namespace("inst", {LABEL_TEMPLATE: names["template"]})
    names["plain"] = world.namespace("plain")
    names["config"] = world.namespace("accurate")
    configmap = {"metadata": {"name": "accurate-config"}, "data": {"config.yaml": CONFIG}}
    world.kube.create(resource_path("", "v1", "configmaps", names["config"]), configmap)
    return names


COMMANDS = {
    "set-type": ("ns", "set-type", "{plain}", "root"),
    "template-set": ("template", "set", "{old}", "{template}"),
    "template-unset": ("template", "unset", "{instance}"),
    "create": ("sub", "create", "fresh-{plain}", "{old}", "--labels", "a=b"),
    "delete": ("sub", "delete", "{child}"),
    "move": ("sub", "move", "{sub}", "{new}"),
    "move-leave-original": ("sub", "move", "{sub}", "{new}", "--leave-original"),
    "graft": ("sub", "graft", "{plain}", "{old}"),
    "cut": ("sub", "cut", "{sub}"),
}


def args_for(command: str, names: dict[str, str]) -> list[str]:
    return [arg.format(**names) for arg in COMMANDS[command]]


@pytest.mark.parametrize("command", COMMANDS)
def test_dry_run_writes_nothing(world: World, trees: dict[str, str], command: str) -> None:
    everything = [n for key, n in trees.items() if key != "config"]
    before = world.versions(*everything)
    output = succeeded(world.run(*args_for(command, trees), "--dry-run"))
    assert output.startswith("would ")
    assert output.endswith(DONE)
    assert world.versions(*everything) == before


def preview_of(world: World, names: dict[str, str], *args: str) -> list[str]:
    """The lines of ``then the controller would:``, each without its indent."""
    output = succeeded(world.run(*args, "--dry-run", "--accurate-namespace", names["config"]))
    lines = output.splitlines()
    start = lines.index("then the controller would:")
    return [line.strip() for line in lines[start + 1 :] if line.startswith("  ")]


def test_dry_run_of_a_move_shows_the_writes_and_what_the_controller_would_do(
    world: World, trees: dict[str, str]
) -> None:
    n = trees
    output = succeeded(
        world.run(
            "sub", "move", n["sub"], n["new"], "--dry-run", "--accurate-namespace", n["config"]
        )
    )
    assert output.splitlines()[:3] == [
        f"would label namespace {n['sub']}: set accurate.cybozu.com/parent={n['new']}",
        f"would delete SubNamespace {n['old']}/{n['sub']}",
        f"would create SubNamespace {n['new']}/{n['sub']}",
    ]
    preview = preview_of(world, n, "sub", "move", n["sub"], n["new"])
    assert f"create Role {n['sub']}/new-admin as a copy from {n['new']}" in preview
    assert f"create Role {n['child']}/new-admin as a copy from {n['sub']}" in preview
    assert f"delete Role {n['sub']}/old-admin" in preview
    assert f"delete Role {n['child']}/old-admin" in preview
    assert (
        f"apply inherited labels accurate.cybozu.com/parent={n['new']}, "
        f"app.kubernetes.io/created-by=accurate, team=b to namespace {n['sub']}"
    ) in preview
    assert f"watched kinds: ConfigMap {n['config']}/accurate-config" in preview


def test_dry_run_of_a_cut_shows_the_copies_that_would_go(world: World, trees: dict[str, str]):
    n = trees
    preview = preview_of(world, n, "sub", "cut", n["sub"])
    assert f"delete Role {n['sub']}/old-admin" in preview
    assert f"delete Role {n['child']}/old-admin" in preview
    assert not any(line.startswith("create") for line in preview)


def test_dry_run_of_create_and_delete_shows_the_namespace(world: World, trees: dict[str, str]):
    n = trees
    fresh = f"fresh-{n['plain']}"
    created = preview_of(world, n, "sub", "create", fresh, n["old"])
    assert created[:2] == [
        f"create namespace {fresh}",
        f"create Role {fresh}/old-admin as a copy from {n['old']}",
    ]
    assert preview_of(world, n, "sub", "delete", n["child"])[0] == f"delete namespace {n['child']}"


def test_dry_run_without_the_controllers_config_guesses_and_says_so(
    world: World, trees: dict[str, str]
) -> None:
    n = trees
    output = succeeded(
        world.run("sub", "cut", n["sub"], "--dry-run", "--accurate-namespace", n["plain"])
    )
    assert f"delete Role {n['sub']}/old-admin" in output
    assert "watched kinds: guessed: the usual kinds the server serves" in output
    assert "note: label inheritance is not shown" in output


def test_a_dry_run_the_server_would_refuse_fails(world: World, trees: dict[str, str]) -> None:
    n = trees
    before = world.versions(n["old"], n["sub"])
    error = failed(world.run("sub", "delete", n["sub"], "--dry-run"))
    assert error.startswith('error: admission webhook "vsubnamespace.accurate.cybozu.com" denied')
    assert f"child namespaces exist: deleting SubNamespace {n['old']}/{n['sub']}" in error
    assert world.versions(n["old"], n["sub"]) == before


@pytest.mark.fault_injection
def test_a_dry_run_sends_only_dry_run_writes(
    world: World, trees: dict[str, str], apiserver: ApiServer
) -> None:
    apiserver.clear_requests()
    for command in COMMANDS:
        succeeded(world.run(*args_for(command, trees), "--dry-run"))
    writes = [
        r
        for r in apiserver.requests
        if r.method in WRITES and r.user_agent.startswith("kubectl-accurate")
    ]
    assert writes, "the server is asked to judge each write"
    assert all(r.dry_run for r in writes)
