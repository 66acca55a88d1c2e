"""The rule modules stay pure, and the packages import each other only one way.

Purity is the project's main architectural rule (DESIGN.md 1): the CLI's --dry-run and the
controller must reach the same answer from the same data, and every rule must be testable
without a server. The check is twofold: what each module's source imports, and what importing it
actually loads into a fresh interpreter (so an impure import hidden in a dependency is caught).
The plugin's decision modules are held to the second check too. Between packages: the plugin
and the controller are separate shells over libaccurate, which imports neither of them.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import libaccurate

# The one package allowed to do I/O: the adapter to the Kubernetes API, its HTTP connection and
# the kubeconfig loader it uses (files, environment). Everything else in libaccurate is pure.
NETWORK = "network"
PURE_MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(libaccurate.__path__)
    if info.name.split(".")[0] != NETWORK and not info.ispkg
)
FORBIDDEN_IMPORTS = {
    "kubernetes",
    "urllib3",
    "requests",
    "http",
    "urllib",
    "socket",
    "ssl",
    "asyncio",
    "subprocess",
    "threading",
    "time",
    "datetime",
    "random",
    "secrets",
    "uuid",
    "os",
    "io",
    "pathlib",
    "logging",
}
# String functions only: quoting a name into a path is not I/O.
ALLOWED_IMPORTS = {"urllib.parse"}
# What must not be loaded at all, even indirectly, after importing a pure module.
FORBIDDEN_LOADED = ("kubernetes", "urllib3", "requests", "http.client", "socket", "ssl")
# The plugin's decisions: what to show and what to write, from what was read.
PURE_PLUGIN_MODULES = ("changes", "namespaces", "trees")
ROOT = Path(__file__).resolve().parents[2]
# package -> the packages it must never import.
NEVER_IMPORTS = {
    "kubectl_accurate": {"controller", "accurate_testbed", "tests"},
    "controller": {"kubectl_accurate", "accurate_testbed", "tests"},
    "libaccurate": {"kubectl_accurate", "controller", "accurate_testbed", "tests"},
}


def _imports(path: Path) -> set[str]:
    """Every module the source imports, anywhere in it, by its full dotted name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def _impure(imports: set[str]) -> set[str]:
    return {name for name in imports - ALLOWED_IMPORTS if name.split(".")[0] in FORBIDDEN_IMPORTS}


def _loaded(modules: list[str], watched: tuple[str, ...]) -> list[str]:
    """Which of ``watched`` a fresh interpreter has loaded after importing ``modules``."""
    probe = (
        f"import sys, json, {', '.join(modules)}\n"
        f"print(json.dumps(sorted(m for m in {watched!r} if m in sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    return list(json.loads(result.stdout))


def test_the_pure_modules_are_all_found() -> None:
    assert {"forest", "planner", "admission", "config", "globs"} <= set(PURE_MODULES)


@pytest.mark.parametrize("module", PURE_MODULES)
def test_a_pure_module_imports_nothing_that_does_io(module: str) -> None:
    path = Path(libaccurate.__path__[0]) / f"{module.replace('.', '/')}.py"
    assert _impure(_imports(path)) == set()


def test_the_import_check_sees_impure_imports() -> None:
    assert _impure({"urllib.request", "urllib.parse", "os.path", "json"}) == {
        "urllib.request",
        "os.path",
    }


def test_importing_every_pure_module_loads_no_client_or_network_library() -> None:
    assert _loaded([f"libaccurate.{m}" for m in PURE_MODULES], FORBIDDEN_LOADED) == []


def test_the_plugins_decisions_load_no_client_network_or_adapter() -> None:
    modules = [f"kubectl_accurate.{m}" for m in PURE_PLUGIN_MODULES]
    watched = (*FORBIDDEN_LOADED, "libaccurate.network.kube", "kubectl_accurate.reads")
    assert _loaded(modules, watched) == []


@pytest.mark.parametrize("package", sorted(NEVER_IMPORTS))
def test_packages_import_each_other_one_way_only(package: str) -> None:
    crossings = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for name in _imports(path)
        if name.split(".")[0] in NEVER_IMPORTS[package]
    }
    assert crossings == set()
