"""What ``kubectl accurate list`` loads to start (issue 8): a promise about start-up checked in the
interpreter's own import log, never with a stopwatch.

With a kubeconfig of static credentials, ``list`` must not import the ``kubernetes`` package
(a quarter of a second of generated client), nor rich when its output is not a terminal, nor
the modules only describe and the write commands use.
"""

from __future__ import annotations

import yaml

from accurate_testbed.cluster import Cluster
from tests.e2e.cli import World

NOT_FOR_LIST = (
    "kubernetes",
    "rich",
    "kubectl_accurate.describe",
    "kubectl_accurate.preview",
    "kubectl_accurate.writes",
    "libaccurate.planner",
)


def imported(log: str) -> set[str]:
    """Module names from ``-X importtime`` lines: ``import time: self | cumulative | name``."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in log.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


def uses_static_credentials(cluster: Cluster) -> bool:
    """False for a real cluster reached through an exec plugin or an auth provider, which the
    kubernetes package handles, so it is rightly imported there."""
    document = yaml.safe_load(cluster.kubeconfig.read_text())
    return not any(
        "exec" in (entry.get("user") or {}) or "auth-provider" in (entry.get("user") or {})
        for entry in document.get("users") or []
    )


def test_list_starts_without_the_kubernetes_package_and_what_only_other_commands_need(
    cluster: Cluster,
) -> None:
    world = World(cluster)
    root = world.root()
    result = world.run("list", root, PYTHONPROFILEIMPORTTIME="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{root}\n"
    modules = imported(result.stderr)
    assert {"kubectl_accurate.main", "libaccurate.kubeconfig"} <= modules  # the log is real
    forbidden = set(NOT_FOR_LIST)
    if not uses_static_credentials(cluster):
        forbidden.remove("kubernetes")
    assert {m for m in modules if m in forbidden or m.split(".")[0] in forbidden} == set()
