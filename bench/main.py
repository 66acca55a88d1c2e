"""The command: pick the sizes, run the scenarios on one target, print the table.

Quick mode exits non-zero when a request-count check fails; timings never decide the exit code.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from bench.report import Row, machine, table
from bench.scenarios import QUICK, SCENARIOS, Sizes
from bench.target import Target

# Quick mode measures only what its checks need.
QUICK_SCENARIOS = ("cli", "subnamespace", "steady", "converge", "admission")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="CI mode: tiny sizes, count checks")
    parser.add_argument("--only", choices=sorted(SCENARIOS), action="append", help="scenarios")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every size by this")
    parser.add_argument("--runs", type=int, help="repetitions of timed commands (median)")
    parser.add_argument("--quiet", type=float, help="seconds the steady state is watched")
    return parser.parse_args(argv)


def sizes_for(options: argparse.Namespace) -> Sizes:
    """Issue 8's sizes (or quick mode's), scaled down for a laptop if asked."""
    base = QUICK if options.quick else Sizes()

    def scaled(value: int) -> int:
        return max(1, round(value * options.scale))

    return dataclasses.replace(
        base,
        cli=tuple(scaled(size) for size in base.cli),
        fanout=scaled(base.fanout),
        steady_namespaces=scaled(base.steady_namespaces),
        steady_objects=scaled(base.steady_objects),
        steady_propagated=scaled(base.steady_propagated),
        converge_namespaces=scaled(base.converge_namespaces),
        converge_objects=scaled(base.converge_objects),
        converge_sources=scaled(base.converge_sources),
        admission=tuple(scaled(size) for size in base.admission),
        reaction_namespaces=scaled(base.reaction_namespaces),
        link=tuple(scaled(size) for size in base.link),
        link_controller=scaled(base.link_controller),
        tree_namespaces=scaled(base.tree_namespaces),
        tree_subtree=scaled(base.tree_subtree),
        quota=tuple(scaled(size) for size in base.quota),
        quota_hrqs=scaled(base.quota_hrqs),
        keeper_namespaces=scaled(base.keeper_namespaces),
        runs=options.runs or base.runs,
        quiet=options.quiet or base.quiet,
    )


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    sizes = sizes_for(options)
    chosen = options.only or (QUICK_SCENARIOS if options.quick else tuple(SCENARIOS))
    target = Target.open()
    rows: list[Row] = []
    try:
        for name in chosen:
            print(f"running {name} ...", file=sys.stderr, flush=True)
            found = SCENARIOS[name](target, sizes)
            print(table(found), file=sys.stderr, flush=True)
            rows += found
    finally:
        target.close()
    print(f"Machine: {machine()}; target: {target.kind}; sizes: {sizes}\n")
    print(table(rows))
    failed = [row for row in rows if row.checked and row.met is False]
    for row in failed:
        print(f"check failed: {row.scenario}: {row.figure} = {row.value}", file=sys.stderr)
    return 1 if failed else 0
