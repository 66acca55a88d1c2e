"""kubectl's generic flags in any position (ACCEPTANCE H8), help, version and completion, with the
plugin run through kubectl and as ``kubectl-accurate`` directly."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.cluster import Cluster
from accurate_testbed.processes import free_port
from libaccurate.constants import GROUP, LABEL_PARENT
from tests.e2e.cli import World, failed, run_plugin, succeeded

COMMANDS = (
    (),
    ("list",),
    ("namespace",),
    ("namespace", "describe"),
    ("ns", "set-type"),
    ("template",),
    ("template", "list"),
    ("template", "set"),
    ("template", "unset"),
    ("sub",),
    ("sub", "list"),
    ("sub", "create"),
    ("sub", "delete"),
    ("sub", "move"),
    ("sub", "graft"),
    ("sub", "cut"),
    ("completion",),
    ("help",),
)


def broken_kubeconfig(cluster: Cluster, folder: Path) -> dict[str, Any]:
    """The test kubeconfig with a new current context pointing at a port nobody listens on;
    returns the names a flag needs to get back to the working cluster."""
    document = yaml.safe_load(cluster.kubeconfig.read_text())
    good_name = document["current-context"]
    good = next(c for c in document["contexts"] if c["name"] == good_name)["context"]
    cluster_entry = next(c for c in document["clusters"] if c["name"] == good["cluster"])
    broken = copy.deepcopy(cluster_entry)
    broken["name"] = "accurate-cli-broken"
    broken["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    document["clusters"].append(broken)
    document["contexts"].append(
        {"name": "broken", "context": {"cluster": broken["name"], "user": good["user"]}}
    )
    document["current-context"] = "broken"
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(document))
    return {
        "path": path,
        "context": good_name,
        "cluster": good["cluster"],
        "server": cluster_entry["cluster"]["server"],
    }


@pytest.fixture
def tree(cluster: Cluster) -> tuple[str, str]:
    world = World(cluster)
    root = world.root()
    return root, world.namespace("sub", {LABEL_PARENT: root})


def test_connection_flags_work_before_and_after_any_subcommand(
    cluster: Cluster, tree: tuple[str, str], tmp_path: Path
) -> None:
    root, sub = tree
    drawn = f"{root}\n└── {sub}\n"
    config = broken_kubeconfig(cluster, tmp_path)
    kubeconfig = config["path"]
    unreachable = failed(run_plugin("list", root, kubeconfig=kubeconfig))
    assert unreachable.startswith("error: cannot reach the API server at https://127.0.0.1:")
    for args in (
        ("list", root, "--context", config["context"]),
        ("sub", "--context", config["context"], "list", root),
        ("--context", config["context"], "sub", "list", root),
        ("sub", "list", root, "--cluster", config["cluster"]),
        ("list", root, "--server", config["server"]),
        ("ls", root, "-s", config["server"], "--request-timeout", "30s", "-n", "ignored"),
    ):
        marked = run_plugin(*args, "--no-markers", kubeconfig=kubeconfig)
        assert succeeded(marked) == drawn, args
    by_flag = run_plugin(
        "sub",
        "list",
        root,
        "--no-markers",
        "--kubeconfig",
        str(cluster.kubeconfig),
        kubeconfig=None,
    )
    assert succeeded(by_flag) == drawn


def test_a_kubeconfig_that_cannot_be_read_is_said_once(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    for args in (("list",), ("ls", "team-a"), ("list", "--no-markers")):
        error = failed(run_plugin(*args, kubeconfig=missing))
        assert error == (
            f"error: no kubeconfig found (looked in {missing}) and not running in a cluster; "
            "pass --kubeconfig or --server\n"
        ), args


def test_a_write_command_takes_the_flags_after_it(cluster: Cluster, tmp_path: Path) -> None:
    world = World(cluster)
    name = world.namespace("plain")
    config = broken_kubeconfig(cluster, tmp_path)
    result = run_plugin(
        "ns", "set-type", name, "root", "--context", config["context"], kubeconfig=config["path"]
    )
    assert succeeded(result) == f"namespace {name} is now a root\n"


def test_a_bad_request_timeout_is_an_error(cluster: Cluster) -> None:
    error = failed(World(cluster).run("list", "--request-timeout", "soon"))
    assert error.startswith("error: invalid --request-timeout 'soon'")


def test_kubectl_accurate_runs_directly_too(cluster: Cluster, tree: tuple[str, str]) -> None:
    root, sub = tree
    direct = run_plugin("list", root, "--no-markers", kubeconfig=cluster.kubeconfig, direct=True)
    assert succeeded(direct) == f"{root}\n└── {sub}\n"


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c) or "root")
def test_every_command_has_help_with_an_example(command: tuple[str, ...], flag: str) -> None:
    output = succeeded(run_plugin(*command, flag, kubeconfig=None))
    assert output.startswith(f"Usage: kubectl accurate {' '.join(command)}".rstrip())
    assert "Example" in output


@pytest.mark.parametrize("command", [(), ("sub",), ("sub", "create"), ("ns", "describe")])
def test_help_shows_what_dash_dash_help_shows(command: tuple[str, ...]) -> None:
    shown = succeeded(run_plugin("help", *command, kubeconfig=None))
    assert shown == succeeded(run_plugin(*command, "--help", kubeconfig=None))


def test_help_on_an_unknown_command_says_so() -> None:
    assert failed(run_plugin("help", "sub", "branch", kubeconfig=None)) == (
        "error: unknown command 'kubectl accurate sub branch'; see 'kubectl accurate --help'\n"
    )


def test_version() -> None:
    assert succeeded(run_plugin("--version", kubeconfig=None)) == "kubectl-accurate 0.1.0\n"


def test_usage_errors_exit_with_2() -> None:
    assert "No such command 'branch'" in failed(run_plugin("branch", kubeconfig=None), code=2)
    assert "Missing argument 'PARENT'" in failed(
        run_plugin("sub", "create", "x", kubeconfig=None), code=2
    )


@pytest.mark.parametrize(
    ("shell", "hook"),
    [
        ("bash", "complete -o nosort -F"),
        ("zsh", "compdef"),
        ("fish", "complete --no-files --command kubectl-accurate"),
        ("powershell", "Register-ArgumentCompleter -Native -CommandName 'kubectl-accurate'"),
    ],
)
def test_completion_scripts_for_every_shell(shell: str, hook: str) -> None:
    script = succeeded(run_plugin("completion", shell, kubeconfig=None))
    assert hook in script
    assert "_KUBECTL_ACCURATE_COMPLETE" in script


def test_powershell_completion_asks_the_plugin(cluster: Cluster, tree: tuple[str, str]) -> None:
    """What the PowerShell script does on Tab: the line so far and the word being typed."""
    root = tree[0]
    completed = run_plugin(
        kubeconfig=cluster.kubeconfig,
        direct=True,
        COMP_LINE=f"kubectl-accurate ns describe {root[:-3]}",
        COMP_INCOMPLETE=root[:-3],
        _KUBECTL_ACCURATE_COMPLETE="powershell_complete",
    )
    assert succeeded(completed).splitlines() == [root]
    commands = run_plugin(
        kubeconfig=None,
        direct=True,
        COMP_LINE="kubectl-accurate su",
        COMP_INCOMPLETE="su",
        _KUBECTL_ACCURATE_COMPLETE="powershell_complete",
    )
    assert succeeded(commands).splitlines() == ["sub", "sudo"]


def test_shell_completion(cluster: Cluster, tree: tuple[str, str]) -> None:
    root, sub = tree
    script = succeeded(run_plugin("completion", "bash", kubeconfig=None))
    assert "_KUBECTL_ACCURATE_COMPLETE=bash_complete" in script
    words = f"kubectl-accurate ns describe {root[:-3]}"
    completed = run_plugin(
        kubeconfig=cluster.kubeconfig,
        direct=True,
        COMP_WORDS=words,
        COMP_CWORD="3",
        _KUBECTL_ACCURATE_COMPLETE="bash_complete",
    )
    assert succeeded(completed).splitlines() == [f"plain,{root}"]
    assert sub not in completed.stdout


def test_discovery_is_one_request_cached_where_kubectl_caches(
    cluster: Cluster, apiserver: ApiServer, subnamespace_crd: None, tmp_path: Path
) -> None:
    """The SubNamespace version is asked once (the API group's discovery document) and kept
    under --cache-dir, else $KUBECACHEDIR, in kubectl's per-server folder."""
    world = World(cluster)
    root = world.root()
    server = yaml.safe_load(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    folder = server.removeprefix("https://").replace(":", "_")
    cached = Path("discovery", folder, GROUP, "kubectl-accurate-versions.json")
    apiserver.clear_requests()
    for name in ("dev", "prod"):
        create = ("sub", "create", name, root, "--cache-dir", str(tmp_path / "mine"))
        assert succeeded(world.run(*create)).startswith("created")
    assert [r.path for r in apiserver.requests].count(f"/apis/{GROUP}") == 1
    assert json.loads((tmp_path / "mine" / cached).read_text()) == {"version": "v2"}
    assert not (Path(os.environ["KUBECACHEDIR"]) / cached).exists()
    assert succeeded(world.run("sub", "create", "test", root)).startswith("created")
    assert (Path(os.environ["KUBECACHEDIR"]) / cached).is_file()
