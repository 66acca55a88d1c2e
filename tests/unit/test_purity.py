"""The rule modules of libaccurate stay pure: no network, no clock, no randomness, no files.

This is the project's main architectural rule (DESIGN.md 1): the CLI's --dry-run and the
controller must reach the same answer from the same data, and every rule must be testable
without a server. The check is twofold: what each module's source imports, and what importing it
actually loads into a fresh interpreter (so an impure import hidden in a dependency is caught).
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

# The adapter to the Kubernetes API and the kubeconfig loader it uses (files, environment) are
# the modules allowed to do I/O.
ADAPTERS = {"kube", "kubeconfig"}
PURE_MODULES = sorted(
    info.name
    for info in pkgutil.iter_modules(libaccurate.__path__)
    if info.name not in ADAPTERS and not info.ispkg
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
# What must not be loaded at all, even indirectly, after importing a pure module.
FORBIDDEN_LOADED = ("kubernetes", "urllib3", "requests", "http.client", "socket", "ssl")


def _top_level_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_pure_modules_are_all_found() -> None:
    assert {"forest", "planner", "admission", "config", "globs"} <= set(PURE_MODULES)


@pytest.mark.parametrize("module", PURE_MODULES)
def test_a_pure_module_imports_nothing_that_does_io(module: str) -> None:
    path = Path(libaccurate.__path__[0]) / f"{module}.py"
    assert _top_level_imports(path) & FORBIDDEN_IMPORTS == set()


def test_importing_every_pure_module_loads_no_client_or_network_library() -> None:
    names = ", ".join(f"libaccurate.{m}" for m in PURE_MODULES)
    probe = (
        f"import sys, json, {names}\n"
        f"print(json.dumps(sorted(m for m in {FORBIDDEN_LOADED!r} if m in sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert json.loads(result.stdout) == []
