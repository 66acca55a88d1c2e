"""The benchmarks' quick mode, as CI runs it: its request-count checks must hold (one LIST per
``kubectl accurate list``; a new SubNamespace receiving N copies costs at most N + 4 writes; a
controller meeting a populated cluster writes at most one request per copy and two per
sub-namespace; a quiet controller sends no LIST or write; a restart on a converged cluster
writes nothing; every namespace write is reviewed once by the namespace webhook, which reads no
namespace back from the API server when its cache knows the parent). Its timings are printed,
never judged here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.fault_injection
def test_quick_mode_request_counts_hold() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "POD_NAMESPACE")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--quick"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    counted = ("LIST requests", "| writes", "| namespace reviews", "| namespace reads")
    checked = [line for line in result.stdout.splitlines() if any(word in line for word in counted)]
    assert len(checked) == 8, result.stdout
    assert all("| met " in line for line in checked), result.stdout
