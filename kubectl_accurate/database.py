"""Writing report rows into a SQL table through SQLAlchemy, for any engine with a dialect.

The table is created when missing, with fixed columns (the billing labels go into one JSON text
column, so that a new billing key never needs a new column). Each run replaces the rows of the
trees it reports, in one transaction: a reader sees the previous run's rows or this run's,
never a mix. SQLAlchemy is an optional extra (``accurate-py[report]``), imported only here.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from kubectl_accurate.output import CliError
from libaccurate.report import Row

_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
INSTALL_HINT = "pip install 'accurate-py[report]'"
# The release binary carries SQLAlchemy with SQLite only (krew/release.py), and a frozen
# program cannot load a driver installed next to it.
BINARY_HINT = (
    "; the kubectl-accurate binary writes only into SQLite: for another database, install "
    f"the plugin with pip, with that database's driver ({INSTALL_HINT} psycopg[binary] for "
    "PostgreSQL; see the plugin guide)"
)


def database_url(target: str) -> str:
    """A SQLAlchemy URL as given, or SQLite for a plain file path."""
    return target if "://" in target else f"sqlite:///{os.path.abspath(target)}"


def write_rows(
    target: str,
    table_name: str,
    rows: Sequence[Row],
    roots: Sequence[str],
    run_id: str,
    reported_at: datetime,
) -> None:
    """Replace the rows of ``roots``' trees in ``table_name`` with ``rows``, in one transaction."""
    if not _TABLE_NAME.match(table_name):
        raise CliError(f"invalid table name {table_name!r}: use letters, digits and _")
    try:
        import sqlalchemy as sa
    except ImportError as error:
        raise CliError(f"report --to needs SQLAlchemy: {INSTALL_HINT}") from error
    try:
        engine = sa.create_engine(database_url(target))
    except (sa.exc.NoSuchModuleError, ImportError) as error:
        # NoSuchModuleError is an ArgumentError: it comes first.
        raise CliError(f"cannot use database {target}: {error}{_driver_hint()}") from error
    except sa.exc.ArgumentError as error:
        raise CliError(f"cannot use database {target}: {error}") from error
    table = _table(sa, table_name)
    try:
        with engine.begin() as connection:
            table.create(connection, checkfirst=True)
            _check_columns(sa, connection, table)
            connection.execute(table.delete().where(table.c.root.in_(list(roots))))
            if rows:
                records = [_record(row, run_id, reported_at) for row in rows]
                connection.execute(table.insert(), records)
    except sa.exc.SQLAlchemyError as error:
        raise CliError(f"cannot write table {table_name}: {error}") from error
    finally:
        engine.dispose()


def _driver_hint() -> str:
    """How to reach a database whose dialect or driver is missing, where pip cannot add it."""
    return BINARY_HINT if getattr(sys, "frozen", False) else ""


def _table(sa: Any, name: str) -> Any:
    return sa.Table(
        name,
        sa.MetaData(),
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("namespace", sa.String(63), nullable=False),
        sa.Column("root", sa.String(63), nullable=False),
        sa.Column("parent", sa.String(63), nullable=False),
        sa.Column("depth", sa.Integer, nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("created", sa.String(32), nullable=False),
        sa.Column("billing", sa.Text, nullable=False),
    )


def _check_columns(sa: Any, connection: Any, table: Any) -> None:
    """An existing table must have our columns; say which are missing rather than fail later."""
    present = {column["name"] for column in sa.inspect(connection).get_columns(table.name)}
    missing = [column.name for column in table.columns if column.name not in present]
    if missing:
        raise CliError(
            f"table {table.name} exists without the columns {', '.join(missing)}: "
            "choose another --table"
        )


def _record(row: Row, run_id: str, reported_at: datetime) -> dict[str, Any]:
    data = row.to_data()
    return {
        **data,
        "run_id": run_id,
        "reported_at": reported_at,
        "billing": json.dumps(data["billing"], sort_keys=True),
    }
