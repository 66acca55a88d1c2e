"""``kubectl accurate report``: one row per namespace of the trees, with its billing labels and
where each came from, printed (table, CSV, JSON) or written into a SQL table.

The rows are libaccurate.report's; the billing keys are the controller's ``labelKeys`` (read
from its config) unless ``--key`` names them. Writing to a database is
kubectl_accurate.database's, imported only for ``--to`` so that SQLAlchemy stays optional.
"""

from __future__ import annotations

import csv
import sys
import uuid
from datetime import datetime, timezone

import click

from kubectl_accurate.listing import view
from kubectl_accurate.main import (
    _api,
    accurate_namespace_option,
    command,
    namespace_argument,
    root,
)
from kubectl_accurate.output import CliError, Printer
from kubectl_accurate.reads import TREE_NOTE
from libaccurate.network.kube import Kube
from libaccurate.report import billing_keys, flat_header, rows

FORMATS = ("table", "csv", "json")
# A partial view cannot tell a namespace that is gone from one it may not see, so replacing a
# tree's rows from it would delete rows of namespaces it leaves out (docs/plugin.md).
PARTIAL_WRITE = (
    "report --to replaces the stored rows of whole trees, and you may not list namespaces: "
    "rows of namespaces your view leaves out would be deleted, so nothing was written; "
    "ask an administrator to write the table, or take your rows with -o csv or -o json"
)


@command(
    root,
    "report",
    "report",
    "report team-a -o csv --key 'billing.example.com/*'",
    "report --to billing.db --table namespaces",
    "report --to postgresql://reports@db/billing --table namespaces",
)
@namespace_argument("top", "[ROOT]", required=False)
@click.option(
    "--key",
    "patterns",
    multiple=True,
    metavar="GLOB",
    help="A billing label key (glob, as in labelKeys); repeatable. "
    "Default: the controller's labelKeys.",
)
@click.option("-o", "--output", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option(
    "--to",
    "database",
    metavar="DATABASE_URL",
    help="Write the rows into a SQL table instead: a SQLAlchemy URL, or a file path for SQLite "
    "(needs accurate-py[report]).",
)
@click.option("--table", metavar="NAME", help="The table to write, with --to.")
@accurate_namespace_option
def report(
    ctx: click.Context,
    top: str | None,
    patterns: tuple[str, ...],
    output: str,
    database: str | None,
    table: str | None,
    accurate_namespace: str,
) -> None:
    """One row per namespace of every tree (or of ROOT's): its root, parent, depth, type,
    creation time, and each billing label's value with the namespace it came from.

    With --to and --table, the rows replace those of the same trees in that table, in one
    transaction, with a run id and the time of the run. Without the right to list namespaces:
    the rows of ROOT's tree, else of the tree the current namespace is in, as far as you may
    read it (the namespaces list shows); --to is then refused, as such a view cannot say which
    stored rows are stale.
    """
    if bool(database) != bool(table):
        raise click.UsageError("--to and --table go together")
    api = _api(ctx)
    kube = api.kube
    # The same view as ``list``'s, and the same note on stderr when it is partial.
    namespaces = view(api, [top], "named" if top else "chain", TREE_NOTE)
    if top is not None and namespaces.forest.root_of(top) != top:
        known = top in namespaces.forest
        raise CliError(f"{top} is not a root namespace" if known else f"namespace {top} not found")
    if database and not namespaces.complete:
        raise CliError(PARTIAL_WRITE)
    keys = billing_keys(patterns or _label_keys(kube, accurate_namespace), namespaces.items)
    found = rows(namespaces.items, keys, top)
    if database and table:
        from kubectl_accurate.database import write_rows

        run = str(uuid.uuid4())
        tops = (top,) if top else namespaces.forest.roots()
        write_rows(database, table, found, tops, run, datetime.now(timezone.utc))
        click.echo(f"wrote {len(found)} rows to table {table} (run {run})")
        return
    if output == "json":
        Printer().data([row.to_data() for row in found], "json")
    elif output == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerows([flat_header(keys), *(row.flat(keys) for row in found)])
    else:
        Printer().table([c.upper() for c in flat_header(keys)], [row.flat(keys) for row in found])


def _label_keys(kube: Kube, accurate_namespace: str) -> tuple[str, ...]:
    from kubectl_accurate.watched import find_watched

    watched = find_watched(kube, accurate_namespace)
    if not watched.from_config:
        raise CliError(f"cannot read the controller's labelKeys ({watched.source}): pass --key")
    return watched.config.label_keys
