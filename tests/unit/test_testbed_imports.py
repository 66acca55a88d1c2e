"""The test bed stands on its own: the demo, the benchmarks and the in-memory API server load
neither the tests nor pytest, so that the demo runs from a plain install with the ``testbed``
extra and a change to a test cannot break them."""

from __future__ import annotations

import json
import subprocess
import sys

# Every module the demo and the benchmarks start from, and the test bed's own modules.
ENTRY_POINTS = (
    "demo.__main__",
    "bench.main",
    "accurate_testbed.apiserver.__main__",
    "accurate_testbed.certificates",
    "accurate_testbed.cluster",
    "accurate_testbed.kubectl",
    "accurate_testbed.manifests",
    "accurate_testbed.objects",
    "accurate_testbed.processes",
    "accurate_testbed.waiting",
)


def test_the_demo_benchmarks_and_test_bed_load_no_test_module_and_no_pytest() -> None:
    probe = (
        "import importlib, json, sys\n"
        f"for name in {ENTRY_POINTS!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules\n"
        "    if m.split('.')[0] in ('tests', 'pytest', '_pytest', 'hypothesis')\n"
        "    or m.startswith('accurate_testbed.tests'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert json.loads(result.stdout) == []
