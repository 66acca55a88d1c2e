"""What ``kubectl accurate`` loads to start (issues 8 and 18): promises about start-up checked in
the interpreter's own import log, never with a stopwatch.

``--version``, the top-level help and ``completion SHELL`` print a text rendered ahead, and load
neither click nor the command tree (unless the terminal is too narrow for the help as
rendered), nor ``typing``. Other help and completion only parse a command line, so they load
click and the command tree and nothing else: no YAML, TLS, HTTP, colour, rules, API adapter,
nor the modules of the commands kept apart (``access``, ``report``, ``sudo``), which load when
used, nor ``pathlib`` or ``dataclasses``.
With a kubeconfig of static credentials, ``list`` must not import the ``kubernetes`` package
(a quarter of a second of generated client), nor an HTTP library (not even ``http.client``),
nor rich when its output is not a terminal, nor the modules only other commands use, nor
``pathlib``; nor PyYAML, a fifth of a ``list``, when the kubeconfig is the plain YAML tools
write. That holds whether the CA, client certificate and key are files or data embedded in the
kubeconfig (as kind, kubeadm and the cloud CLIs write them): on Linux data reaches the ssl
module through memory files, so not even ``tempfile`` is loaded for it (issue 30). With no
flag, ``list`` loads neither click nor the command tree, which nothing on such a command line
needs (``kubectl_accurate.listing``).
The console script runs by its interpreter without ``site`` (``-S``), the project and its
dependencies on ``PYTHONPATH``: what ``site`` loads is the interpreter's, not the plugin's, and
in a development install it loads ``pathlib`` for its import finder.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path

import pytest
import trustme
import yaml

from accurate_testbed.cluster import Cluster
from kubectl_accurate.completion import SHELLS
from kubectl_accurate.main import DEFERRED
from libaccurate.network import plain_yaml
from scripts.render_answers import answer
from tests.e2e.cli import SCRIPTS, World, plugin_env

# The modules of the commands that load theirs when used.
KEPT_APART = tuple(deferred.module for deferred in DEFERRED.values())
# The kubernetes package, and what it loads itself (so what a run with exec or auth-provider
# credentials, which that package handles, rightly loads).
KUBERNETES = (
    "kubernetes",
    "urllib3",
    "logging",
    "tempfile",
    # Through urllib3. The adapter speaks HTTP/1.1 itself: http.client's header parser, the
    # email package, was 12 % of a list.
    "http",
    "email",
)
NOT_FOR_LIST = (
    *KEPT_APART,
    *KUBERNETES,
    "rich",
    "kubectl_accurate.changes",
    "kubectl_accurate.describe",
    "kubectl_accurate.preview",
    "kubectl_accurate.writes",
    "libaccurate.planner",
    # Paths are strings on this path: pathlib, with what it imports, was 1 % of a list.
    "pathlib",
)
# A list with no flag runs without click and the command tree (kubectl_accurate.listing):
# importing them was more than a quarter of its instructions.
NOT_FOR_LIST_WITHOUT_FLAGS = ("click", "kubectl_accurate.main", "kubectl_accurate.flags")
# What of the project such a run must not load: the commands kept apart, the rules, the API
# adapter and the machinery of the commands (which import theirs inside the command).
RULES = (
    *KEPT_APART,
    "kubectl_accurate.changes",
    "kubectl_accurate.database",
    "kubectl_accurate.describe",
    "kubectl_accurate.hnc_import",
    "kubectl_accurate.preview",
    "kubectl_accurate.trees",
    "kubectl_accurate.watched",
    "kubectl_accurate.writes",
    "libaccurate.admission",
    "libaccurate.config",
    "libaccurate.hnc",
    "libaccurate.network.kube",
    "libaccurate.network.kubeconfig",
    "libaccurate.planner",
    "libaccurate.propagation",
)
# Stacks such a run has no use for, by top-level package.
NOT_FOR_PARSING = (
    "yaml",
    "ssl",
    "_ssl",
    "socket",
    "http",
    "email",
    "urllib3",
    "rich",
    "kubernetes",
    "pathlib",
    # Records made at start-up are NamedTuples: frozen dataclasses cost 5 % of a --version.
    "dataclasses",
    # `completion bash` runs in every new shell: click's bash version check ran bash.
    "subprocess",
)
COMPLETE = "_KUBECTL_ACCURATE_COMPLETE"


def imported(log: str) -> set[str]:
    """Module names from ``-X importtime`` lines: ``import time: self | cumulative | name``."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in log.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


def run_logged(
    *args: str, kubeconfig: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``kubectl-accurate ARGS``, the console script, with the import log on its stderr."""
    paths = [str(Path(__file__).parents[2]), sysconfig.get_paths()["purelib"]]
    return subprocess.run(
        [sys.executable, "-S", "-X", "importtime", str(SCRIPTS / "kubectl-accurate"), *args],
        env=plugin_env(kubeconfig, PYTHONPATH=os.pathsep.join(paths), **(env or {})),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def uses_static_credentials(kubeconfig: Path) -> bool:
    """False for a real cluster reached through an exec plugin or an auth provider, which the
    kubernetes package handles, so it is rightly imported there."""
    document = yaml.safe_load(kubeconfig.read_text())
    return not any(
        "exec" in (entry.get("user") or {}) or "auth-provider" in (entry.get("user") or {})
        for entry in document.get("users") or []
    )


def read_without_pyyaml(kubeconfig: Path) -> bool:
    """Whether the plugin reads this kubeconfig itself: PyYAML reads those it declines."""
    try:
        plain_yaml.load(kubeconfig.read_bytes())
    except plain_yaml.NotPlain:
        return False
    return True


def in_form(cluster: Cluster, form: str, folder: Path) -> Path:
    """The cluster's kubeconfig with every CA, client certificate and key as files (``files``)
    or embedded (``data``). On the in-memory server, whose users show tokens, the user gets a
    client certificate too (the server asks for none, but the plugin loads it all the same); a
    real cluster's users are used as they are."""
    document = yaml.safe_load(cluster.kubeconfig.read_text())
    if not cluster.is_real:
        issued = trustme.CA().issue_cert("admin")
        for entry in document["users"]:
            entry["user"]["client-certificate-data"] = _base64(issued.cert_chain_pems[0].bytes())
            entry["user"]["client-key-data"] = _base64(issued.private_key_pem.bytes())
    for section, keys in (("clusters", ("certificate-authority",)), ("users", USER_FILES)):
        for entry in document.get(section) or []:
            fields = entry.get(section[:-1]) or {}
            for key in keys:
                _recast(fields, key, form, folder / f"{entry['name']}-{key}", cluster.kubeconfig)
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


# The user fields that name files; tokenFile has no data form, and only moves with the file.
USER_FILES = ("client-certificate", "client-key", "tokenFile")


def _recast(fields: dict[str, str], key: str, form: str, file: Path, origin: Path) -> None:
    """``key`` of one kubeconfig entry moved to ``form``, as whichever form it has now; a path
    made absolute, since the copy is read from another folder."""
    if fields.get(key):
        fields[key] = str(origin.parent / fields[key])
    if form == "files" and fields.get(f"{key}-data"):
        file.write_bytes(base64.b64decode(fields.pop(f"{key}-data")))
        fields[key] = str(file)
    elif form == "data" and fields.get(key) and key != "tokenFile":
        fields[f"{key}-data"] = _base64(Path(fields.pop(key)).read_bytes())


def _base64(blob: bytes) -> str:
    return base64.b64encode(blob).decode()


@pytest.mark.parametrize("form", ["files", "data"])
def test_list_starts_without_the_kubernetes_package_and_what_only_other_commands_need(
    cluster: Cluster, form: str, tmp_path: Path
) -> None:
    world = World(cluster)
    root = world.root()
    kubeconfig = in_form(cluster, form, tmp_path)
    result = run_logged("list", root, kubeconfig=kubeconfig)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{root} [r]\n\n[r] root\n"
    modules = imported(result.stderr)
    assert {"kubectl_accurate.listing", "libaccurate.network.kubeconfig"} <= modules  # log is real
    forbidden = {*NOT_FOR_LIST, *NOT_FOR_LIST_WITHOUT_FLAGS}
    if not uses_static_credentials(kubeconfig):
        forbidden -= set(KUBERNETES)  # which imports PyYAML too
    elif read_without_pyyaml(kubeconfig):  # as every kubeconfig the unit tests hold from tools
        forbidden.add("yaml")
    if form == "data" and not (hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")):
        forbidden.discard("tempfile")  # no memory files here: data passes through a private file
    assert {m for m in modules if m in forbidden or m.split(".")[0] in forbidden} == set()


@pytest.mark.parametrize(
    "args",
    [
        ("--version",),
        ("--help",),
        ("-h",),
        ("help",),
        *(("completion", shell) for shell in SHELLS),
    ],
)
def test_a_command_line_that_only_prints_a_text_prints_it_without_click(
    args: tuple[str, ...],
) -> None:
    result = run_logged(*args)
    assert result.returncode == 0, result.stderr
    assert result.stdout == answer(args)
    modules = imported(result.stderr)
    assert "kubectl_accurate.rendered" in modules  # the log is real
    assert "kubectl_accurate.main" not in modules
    assert {m for m in modules if m.split(".")[0] == "click"} == set()
    assert "typing" not in modules  # two fifths of such a run, with what it imports
    assert modules & set(RULES) == set()
    assert {m for m in modules if m.split(".")[0] in NOT_FOR_PARSING} == set()


def test_a_narrow_terminal_gets_the_help_click_wraps_to_it() -> None:
    result = run_logged("--help", env={"COLUMNS": "60"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == answer(("--help",), columns=60) != answer(("--help",))
    assert max(len(line) for line in result.stdout.splitlines()) <= 58
    assert "click" in imported(result.stderr)


@pytest.mark.parametrize(
    ("args", "env", "shown"),
    [
        (("--help", "--context", "prod"), {}, "Usage: kubectl accurate [OPTIONS] COMMAND"),
        (("sub", "create", "-h"), {}, "Usage: kubectl accurate sub create"),
        (("help", "ns", "set-type"), {}, "Usage: kubectl accurate ns set-type"),
        (
            (),
            {COMPLETE: "bash_complete", "COMP_WORDS": "kubectl-accurate su", "COMP_CWORD": "1"},
            "plain,sub\nplain,sudo\n",
        ),
    ],
)
def test_help_and_completion_through_click_load_only_the_command_line(
    args: tuple[str, ...], env: dict[str, str], shown: str
) -> None:
    result = run_logged(*args, env=env)
    assert result.returncode == 0, result.stderr
    assert shown in result.stdout
    modules = imported(result.stderr)
    assert "click" in modules and "kubectl_accurate.main" in modules  # the log is real
    assert modules & set(RULES) == set()
    assert {m for m in modules if m.split(".")[0] in NOT_FOR_PARSING} == set()


@pytest.mark.parametrize("args", [("completion", "bash"), ("sub", "create", "-h")])
def test_a_reader_gone_before_the_text_is_written_ends_the_run_quietly(
    args: tuple[str, ...],
) -> None:
    """As click does: exit 1, and no traceback about the broken pipe, answered ahead or not."""
    read, write = os.pipe()
    os.close(read)
    try:
        result = subprocess.run(
            [SCRIPTS / "kubectl-accurate", *args],
            env=plugin_env(None),
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert (result.returncode, result.stderr) == (1, "")
