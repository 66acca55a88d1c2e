"""The benchmarks' quick mode, as CI runs it: its request-count checks must hold (two LISTs
per ``kubectl accurate list`` drawing markers, one with ``--no-markers``; a new SubNamespace
receiving N copies costs at most N + 4 writes; a controller meeting a populated cluster writes
at most one request per copy and two per sub-namespace; a quiet controller sends no LIST or
write; a restart on a converged cluster writes nothing; every namespace write is reviewed once
by the namespace webhook, which reads no namespace back from the API server when its cache
knows the parent). Its timings are printed, never judged here. A run leaves no temporary folder
behind: each runs with a temporary directory of its own, which must hold no ``accurate-bench-*``
entry afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _quick(temporary: Path, *only: str) -> subprocess.CompletedProcess[str]:
    """``python -m bench --quick`` (with ``--only`` for each of ``only``), as CI runs it, with
    ``temporary`` as its temporary directory (TMPDIR)."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "POD_NAMESPACE")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["TMPDIR"] = str(temporary)
    chosen = [argument for name in only for argument in ("--only", name)]
    return subprocess.run(
        [sys.executable, "-m", "bench", "--quick", *chosen],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _left_behind(temporary: Path) -> list[str]:
    """What the benchmark left in its temporary directory."""
    return sorted(entry.name for entry in temporary.glob("accurate-bench-*"))


@pytest.mark.fault_injection
def test_quick_mode_request_counts_hold(tmp_path: Path) -> None:
    result = _quick(tmp_path)
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _left_behind(tmp_path) == []
    counted = ("LIST requests", "| writes", "| namespace reviews", "| namespace reads")
    checked = [line for line in result.stdout.splitlines() if any(word in line for word in counted)]
    # Scenario 8 counts its writes twice: without a client-side limit and with one per kind.
    assert len(checked) == 10, result.stdout
    assert all("| met " in line for line in checked), result.stdout


@pytest.mark.fault_injection
def test_quick_mode_tree_labels_cost_nothing_at_rest_and_a_move_rewrites_only_the_moved(
    tmp_path: Path,
) -> None:
    """Scenario 9 (issue 14): no request from a quiet controller keeping tree labels, and a
    grafted tree costs one write per namespace whose labels change."""
    result = _quick(tmp_path, "treelabels")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _left_behind(tmp_path) == []
    checked = [line for line in result.stdout.splitlines() if line.startswith("| 9 tree")]
    for figure in ("LIST requests", "writes in", "writes for the move"):
        assert any(figure in line and "| met " in line for line in checked), result.stdout
