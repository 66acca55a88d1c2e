"""``kubectl accurate quota``: namespace trees with the hierarchical quotas that limit them.

Each namespace is drawn as ``list`` draws it, with the HRQs it holds and the tightest limit it
is under (kubectl_accurate.quota_limits); the HRQs above the namespaces drawn are named first,
as they limit all of them. An administrator's run reads every HRQ with one LIST besides the
namespaces; a tenant's, one LIST per namespace of their view (kubectl_accurate.hrq_reads).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import click

from kubectl_accurate import hrq_reads, trees
from kubectl_accurate.listing import view
from kubectl_accurate.main import _api, command, namespace_argument, output_option, root
from kubectl_accurate.output import CliError, Printer
from kubectl_accurate.quota_limits import Limits, Shown
from kubectl_accurate.reads import TREE_NOTE
from libaccurate.forest import Forest


def _starts(forest: Forest) -> tuple[str, ...]:
    """The namespaces at the top of the view: without a parent, or whose parent is not in it."""
    return tuple(sorted(n.name for n in forest if n.parent is None or n.parent not in forest))


@command(root, "quota", "quota", "quota team-a", "quota team-a-dev -o yaml")
@namespace_argument("top", "[NS]", required=False)
@output_option
def show_quotas(ctx: click.Context, top: str | None, output: str | None) -> None:
    """Draw namespace trees with the hierarchical quotas (HRQs) that limit them.

    For each namespace: the HRQs it holds, with used/hard of each over its whole subtree, and
    the tightest limit it is under: per resource, what is left in the HRQ of its chain that
    leaves the least. Without NS, every tree an HRQ limits; with NS, the tree under NS, and
    first the HRQs above NS. Without the right to list namespaces: the tree of NS, else the
    tree the current namespace is in, as far as you may read it; an HRQ above it that you may
    not read is named without its numbers.
    """
    api = _api(ctx)
    namespaces = view(api, [top], "named" if top else "chain", TREE_NOTE)
    forest = namespaces.forest
    if top is not None and top not in forest:
        raise CliError(namespaces.missing(top))
    starts = (top,) if top else _starts(forest)
    try:
        everything = hrq_reads.read_everywhere(api.kube)
        if everything is None:
            reading = hrq_reads.with_hidden(
                api.kube, hrq_reads.read_in(api.kube, namespaces.by_name), starts
            )
        else:
            reading = hrq_reads.HrqReading(everything)
    except hrq_reads.NotInstalled as error:
        raise CliError(str(error)) from None
    for namespace, reason in sorted(reading.refused.items()):
        click.echo(f"note: the HRQs in {namespace} are not shown: {reason}", err=True)
    limits = Limits(forest, reading)
    tops = (top,) if top else tuple(start for start in starts if limits.limited(start))
    grown = [trees.grow(name, forest.children) for name in tops]
    printer = Printer()
    if output:
        printer.data([_tree_data(tree, limits) for tree in grown], output)
    elif not grown:
        click.echo("no hierarchical quota limits the namespaces you may see", err=True)
    else:
        draw(printer, grown, limits)


def _tree_data(tree: trees.Tree, limits: Limits) -> dict[str, Any]:
    def visit(node: trees.Tree) -> dict[str, Any]:
        data = {"name": node.name, **limits.place(node.name).to_data()}
        if node.repeated:
            return {**data, "cycle": True}
        return {**data, "children": [visit(child) for child in node.below]}

    top = visit(tree)
    return {"name": top.pop("name"), "above": [s.to_data() for s in limits.above(tree.name)], **top}


def draw(printer: Printer, grown: Sequence[trees.Tree], limits: Limits) -> None:
    """The HRQs above each tree, then one table: the tree drawn in its first column, one row
    per HRQ a namespace holds, then the notes the HRQs' conditions make."""
    noted: dict[str, Shown] = {}
    for tree in grown:
        for above in limits.above(tree.name):
            noted[above.ref] = above
            printer.line(("above ", "dim"), f"{tree.name}: {above.ref}  {above.used_hard()}")
    rows = [row for tree in grown for row in _rows(tree, limits, noted)]
    printer.table(("NAMESPACE", "QUOTA", "USED/HARD", "TIGHTEST"), rows)
    notes = [(ref, note) for ref, shown in sorted(noted.items()) for note in shown.notes]
    if notes:
        printer.line("")
        for ref, note in notes:
            printer.line((f"{ref}: ", "bold"), note)


def _rows(tree: trees.Tree, limits: Limits, noted: dict[str, Shown]) -> Iterator[tuple[str, ...]]:
    """The table's rows for one tree; the HRQs shown are added to ``noted``."""
    for guide, node in trees.lines(tree):
        place = limits.place(node.name)
        tight = place.tightest_text()
        if not place.held:
            yield (guide + node.name, "-", "", tight)
        for index, shown in enumerate(place.held):
            noted[shown.ref] = shown
            cell = guide + node.name if index == 0 else trees.continued(guide, node)
            yield (cell, shown.ref, shown.used_hard(), tight if index == 0 else "")
