"""``kubectl accurate list``, ``sub list`` and ``template list`` (ACCEPTANCE H1, H7): trees as
tree(1) draws them, JSON and YAML, colour only on a terminal, one request for the whole list
with ``--no-markers``. The markers ``list`` draws by default are tests/e2e/test_cli_markers.py's."""

from __future__ import annotations

import json
import os
import pty
import subprocess

import pytest
import yaml

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.cluster import Cluster
from libaccurate.constants import LABEL_PARENT, LABEL_TEMPLATE
from tests.e2e.cli import World, failed, plugin_env, succeeded

ESCAPE = "\x1b["


def tree_of(output: str, top: str) -> str:
    """The lines of the tree drawn under ``top`` (other roots of a shared cluster left out)."""
    lines = output.splitlines()
    start = lines.index(top)
    block = [top]
    for line in lines[start + 1 :]:
        if not line.startswith(("├", "└", "│", " ")):
            break
        block.append(line)
    return "\n".join(block) + "\n"


@pytest.fixture
def forest(cluster: Cluster) -> dict[str, str]:
    """Two roots; the first with two children, one of which has a child; a template tree."""
    world = World(cluster)
    names = {"root": world.root("a-root"), "other": world.root("b-root")}
    names["first"] = world.namespace("a-sub", {LABEL_PARENT: names["root"]})
    names["second"] = world.namespace("b-sub", {LABEL_PARENT: names["root"]})
    names["grandchild"] = world.namespace("a-grand", {LABEL_PARENT: names["first"]})
    names["template"] = world.template("a-tmpl")
    names["nested"] = world.template("a-nested", template=names["template"])
    names["instance"] = world.namespace("b-inst", {LABEL_TEMPLATE: names["template"]})
    names["deep"] = world.namespace("a-deep", {LABEL_TEMPLATE: names["nested"]})
    return names


def expected_root_tree(n: dict[str, str]) -> str:
    return f"{n['root']}\n├── {n['first']}\n│   └── {n['grandchild']}\n└── {n['second']}\n"


def test_list_draws_every_root_tree_like_tree(cluster: Cluster, forest: dict[str, str]) -> None:
    world = World(cluster)
    output = succeeded(world.run("list", "--no-markers"))
    assert tree_of(output, forest["root"]) == expected_root_tree(forest)
    assert tree_of(output, forest["other"]) == f"{forest['other']}\n"
    assert forest["template"] not in output
    for alias in (("ls",), ("sub", "list")):
        # Only the test's own trees: earlier tests' namespaces may still be going away.
        again = succeeded(world.run(*alias, "--no-markers"))
        for root in (forest["root"], forest["other"]):
            assert tree_of(again, root) == tree_of(output, root)


def test_list_root_draws_only_that_tree(cluster: Cluster, forest: dict[str, str]) -> None:
    world = World(cluster)
    assert succeeded(world.run("list", forest["root"], "--no-markers")) == expected_root_tree(
        forest
    )
    assert succeeded(world.run("sub", "list", forest["first"], "--no-markers")) == (
        f"{forest['first']}\n└── {forest['grandchild']}\n"
    )


def test_template_list_draws_templates_and_their_instances(
    cluster: Cluster, forest: dict[str, str]
) -> None:
    world = World(cluster)
    expected = (
        f"{forest['template']}\n"
        f"├── {forest['nested']}\n"
        f"│   └── {forest['deep']}\n"
        f"└── {forest['instance']}\n"
    )
    assert succeeded(world.run("template", "list", forest["template"])) == expected
    everything = succeeded(world.run("template", "ls"))
    assert tree_of(everything, forest["template"]) == expected
    assert f"\n{forest['nested']}\n" not in everything, "an instance is not a top template"


def test_list_and_template_list_as_json_and_yaml(cluster: Cluster, forest: dict[str, str]) -> None:
    world = World(cluster)
    n = forest
    as_json = json.loads(succeeded(world.run("list", n["root"], "-o", "json")))
    assert as_json == [
        {
            "name": n["root"],
            "children": [
                {"name": n["first"], "children": [{"name": n["grandchild"], "children": []}]},
                {"name": n["second"], "children": []},
            ],
        }
    ]
    assert yaml.safe_load(succeeded(world.run("list", n["root"], "--output", "yaml"))) == as_json
    templates = yaml.safe_load(succeeded(world.run("template", "list", n["nested"], "-o", "yaml")))
    assert templates == [{"name": n["nested"], "instances": [{"name": n["deep"], "instances": []}]}]
    everything = json.loads(succeeded(world.run("list", "-o", "json")))
    assert as_json[0] in everything


def test_list_of_a_missing_namespace_fails(cluster: Cluster) -> None:
    missing = cluster.unique("missing")
    assert failed(World(cluster).run("list", missing)) == f"error: namespace {missing} not found\n"


def test_list_with_an_unknown_output_format_is_a_usage_error(cluster: Cluster) -> None:
    error = failed(World(cluster).run("list", "-o", "wide"), code=2)
    assert "Invalid value for '-o' / '--output': 'wide' is not one of 'json', 'yaml'" in error


@pytest.mark.fault_injection
def test_list_without_markers_costs_one_request_whatever_the_number_of_namespaces(
    cluster: Cluster, apiserver: ApiServer
) -> None:
    world = World(cluster)
    root = world.root()
    for index in range(40):
        world.namespace(f"sub{index:02}", {LABEL_PARENT: root})
    apiserver.clear_requests()
    output = succeeded(world.run("list", root, "--no-markers"))
    assert len(output.splitlines()) == 41
    assert [(r.method, r.path, r.verb) for r in apiserver.requests] == [
        ("GET", "/api/v1/namespaces", "list")
    ]


def run_on_terminal(world: World, *args: str, **env: str) -> str:
    """Run the plugin with its standard output on a pseudo-terminal; returns what it drew."""
    main, secondary = pty.openpty()
    try:
        completed = subprocess.run(
            ["kubectl", "accurate", *args],
            stdout=secondary,
            stderr=subprocess.PIPE,
            env=plugin_env(world.cluster.kubeconfig, TERM="xterm-256color", **env),
            timeout=60,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr
        os.close(secondary)
        secondary = -1
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode()
    finally:
        os.close(main)
        if secondary >= 0:
            os.close(secondary)


def test_colour_only_on_a_terminal_and_never_with_no_color(
    cluster: Cluster, forest: dict[str, str]
) -> None:
    world = World(cluster)
    coloured = run_on_terminal(world, "list", forest["root"], "--no-markers")
    assert ESCAPE in coloured
    assert forest["grandchild"] in coloured
    plain = run_on_terminal(world, "list", forest["root"], "--no-markers", NO_COLOR="1")
    assert plain.replace("\r\n", "\n") == expected_root_tree(forest)
    assert ESCAPE not in succeeded(world.run("list", forest["root"]))
    assert ESCAPE in run_on_terminal(world, "list", forest["root"])


def test_a_cycle_is_drawn_once_and_described(cluster: Cluster, apiserver: ApiServer) -> None:
    """Only possible when the webhooks were bypassed, so only on the in-memory server (which is
    reset after the test)."""
    world = World(cluster)
    first, second = cluster.unique("a-loop"), cluster.unique("b-loop")
    for name, parent in ((first, second), (second, first)):
        body = {"metadata": {"name": name, "labels": {LABEL_PARENT: parent}}}
        world.kube.create("/api/v1/namespaces", body)
    assert succeeded(world.run("list", first, "--no-markers")) == (
        f"{first}\n└── {second}\n    └── {first} (cycle)\n"
    )
    drawn = json.loads(succeeded(world.run("list", first, "-o", "json")))
    assert drawn[0]["children"][0]["children"] == [{"name": first, "children": [], "cycle": True}]
    described = json.loads(succeeded(world.run("ns", "describe", first, "-o", "json")))
    assert described["problem"] == (
        f"parent/template references form a cycle: {first} -> {second} -> {first}"
    )
