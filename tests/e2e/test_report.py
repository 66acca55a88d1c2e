"""``kubectl accurate report`` (docs/tenant-access.md, billing): the trees' namespaces with their
billing labels and where each came from, printed or written into a SQL table. Sub-namespaces
carry their inherited labels as the controller leaves them (tests/e2e/cli.py)."""

from __future__ import annotations

import csv
import glob
import io
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accurate_testbed.cluster import Cluster
from accurate_testbed.waiting import wait_for
from kubectl_accurate.reads import TREE_NOTE
from kubectl_accurate.report import PARTIAL_WRITE
from libaccurate.constants import LABEL_PARENT
from libaccurate.network.kube import resource_path
from tests.e2e.cli import World, failed, install_subnamespace_roles, run_plugin, succeeded

TEAM, COST = "billing.example.com/team", "billing.example.com/cost-center"
KEYS = ("--key", "billing.example.com/*")


@pytest.fixture
def trees(cluster: Cluster, subnamespace_crd: None) -> dict[str, Any]:
    """root (team a, cost 100) <- dev (inherits both) <- lab (own cost 200); other (team b)."""
    world = World(cluster)
    root = world.namespace("root", {"accurate.cybozu.com/type": "root", TEAM: "a", COST: "100"})
    dev = world.sub(root, "dev", inherited={TEAM: "a", COST: "100"})
    lab = world.sub(dev, "lab", inherited={TEAM: "a", COST: "200"})
    other = world.namespace("other", {"accurate.cybozu.com/type": "root", TEAM: "b"})
    return {"root": root, "dev": dev, "lab": lab, "other": other, "world": world}


def run(trees: dict[str, Any], *args: str) -> str:
    return succeeded(trees["world"].run("report", *args))


def test_each_value_says_where_it_came_from(trees: dict[str, Any]) -> None:
    root, dev, lab = trees["root"], trees["dev"], trees["lab"]
    data = json.loads(run(trees, root, *KEYS, "-o", "json"))
    assert [(r["namespace"], r["parent"], r["depth"], r["type"]) for r in data] == [
        (root, "", 0, "root"),
        (dev, root, 1, "sub-namespace"),
        (lab, dev, 2, "sub-namespace"),
    ]
    assert {r["root"] for r in data} == {root}
    assert data[2]["billing"] == {
        COST: {"value": "200", "from": lab},
        TEAM: {"value": "a", "from": root},
    }
    assert data[1]["billing"][COST] == {"value": "100", "from": root}
    assert all(r["created"].endswith("Z") for r in data)


def test_csv_has_a_value_and_a_source_column_per_key(trees: dict[str, Any]) -> None:
    lines = list(csv.reader(io.StringIO(run(trees, trees["root"], *KEYS, "-o", "csv"))))
    assert lines[0] == [
        "namespace", "root", "parent", "depth", "type", "created",
        COST, f"{COST} from", TEAM, f"{TEAM} from",
    ]  # fmt: skip
    assert lines[1][:5] == [trees["root"], trees["root"], "", "0", "root"]
    assert lines[3][6:] == ["200", trees["lab"], "a", trees["root"]]
    assert len(lines) == 4


def test_a_report_of_a_sub_namespace_is_refused(trees: dict[str, Any]) -> None:
    refused = failed(trees["world"].run("report", trees["dev"], *KEYS))
    assert refused == f"error: {trees['dev']} is not a root namespace\n"
    usage = failed(trees["world"].run("report", "--to", "x.db", *KEYS), code=2)
    assert "--to and --table go together" in usage


def _table(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as connection:
        query = "SELECT run_id, namespace, root, depth, billing FROM usage ORDER BY namespace"
        return list(connection.execute(query))


def test_sqlite_rows_are_replaced_per_run_and_tree(trees: dict[str, Any], tmp_path: Path) -> None:
    database = tmp_path / "billing.db"
    root, other = trees["root"], trees["other"]
    assert run(trees, root, *KEYS, "--to", str(database), "--table", "usage").startswith(
        "wrote 3 rows to table usage (run "
    )
    run(trees, other, *KEYS, "--to", str(database), "--table", "usage")
    first = _table(database)
    assert sorted(r[1] for r in first) == sorted([root, trees["dev"], trees["lab"], other])
    assert json.loads(next(r[4] for r in first if r[1] == other)) == {
        TEAM: {"value": "b", "from": other}
    }

    run(trees, root, *KEYS, "--to", str(database), "--table", "usage")
    second = _table(database)
    assert len(second) == 4
    runs = {r[2]: r[0] for r in second}
    old = {r[2]: r[0] for r in first}
    assert runs[other] == old[other]
    assert runs[root] != old[root]
    assert len({r[0] for r in second if r[2] == root}) == 1


def _view_grant(world: World, namespace: str, user: str) -> None:
    """``user`` may read ``namespace`` and its SubNamespaces, and nothing else there."""
    rbac = "rbac.authorization.k8s.io"
    world.kube.create(
        resource_path(rbac, "v1", "rolebindings", namespace),
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "tenant-view"},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": rbac, "kind": "User", "name": user}],
        },
    )


def test_a_tenant_may_not_replace_stored_rows_from_a_partial_view(
    trees: dict[str, Any], tmp_path: Path
) -> None:
    """A tenant's view leaves out what they may not read, here a child grafted by its parent
    label alone that an administrator's export holds: writing the tree from that view would
    delete its row, so the write is refused and the table stays as the administrator left it."""
    world, root, dev, lab = trees["world"], trees["root"], trees["dev"], trees["lab"]
    grafted = world.namespace("legacy", {LABEL_PARENT: root, TEAM: "a"})
    database = tmp_path / "billing.db"
    run(trees, root, *KEYS, "--to", str(database), "--table", "usage")
    stored = _table(database)
    assert sorted(r[1] for r in stored) == sorted([root, dev, lab, grafted])

    install_subnamespace_roles(world.cluster, world.kube)
    user = world.cluster.unique("tenant")
    for namespace in (root, dev, lab):
        _view_grant(world, namespace, user)

    def tenant(*args: str) -> subprocess.CompletedProcess[str]:
        config = world.cluster.kubeconfig
        return run_plugin("report", root, *KEYS, *args, "--as", user, kubeconfig=config)

    def sees_its_namespaces() -> bool:
        printed = tenant("-o", "csv").stdout.splitlines()[1:]
        return [line.split(",")[0] for line in printed] == [root, dev, lab]

    wait_for(sees_its_namespaces, 30, "the tenant's rights to apply")
    refused = failed(tenant("--to", str(database), "--table", "usage"))
    assert refused == f"{TREE_NOTE}\nerror: {PARTIAL_WRITE}\n"
    assert "nothing was written" in PARTIAL_WRITE and "-o csv" in PARTIAL_WRITE
    assert _table(database) == stored
    elsewhere = tmp_path / "own.db"
    failed(tenant("--to", str(elsewhere), "--table", "usage"))
    assert not elsewhere.exists()


def test_a_table_of_another_shape_is_left_alone(trees: dict[str, Any], tmp_path: Path) -> None:
    database = tmp_path / "billing.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE usage (namespace TEXT)")
    refused = failed(trees["world"].run("report", *KEYS, "--to", str(database), "--table", "usage"))
    assert refused.startswith("error: table usage exists without the columns run_id, ")
    with sqlite3.connect(database) as connection:
        assert list(connection.execute("SELECT count(*) FROM usage")) == [(0,)]


@pytest.fixture
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL server on a Unix socket; skipped without Debian's postgresql
    package (initdb) or a driver for SQLAlchemy (psycopg)."""
    found = shutil.which("initdb") or sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    initdb = found if isinstance(found, str) else (found[-1] if found else "")
    if not initdb:
        pytest.skip("no PostgreSQL server binaries (Debian package postgresql)")
    pytest.importorskip("psycopg", reason="no PostgreSQL driver (psycopg) for SQLAlchemy")
    # Its own folder outside pytest's, whose parents only root may enter.
    folder = Path(tempfile.mkdtemp(prefix="accurate-pg-"))
    # PostgreSQL refuses to run as root: run it as its own account when we are root.
    as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_owner:
        shutil.chown(folder, "postgres")
    bin_dir = Path(os.path.realpath(initdb)).parent
    data, socket = folder / "data", folder
    subprocess.run(
        [*as_owner, str(bin_dir / "initdb"), "-D", str(data), "-U", "report", "-A", "trust"],
        check=True,
        capture_output=True,
    )
    options = f"-k {socket} -c listen_addresses=''"
    subprocess.run(
        [
            *as_owner,
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-w",
            "start",
            "-l",
            str(folder / "log"),
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql+psycopg://report@/postgres?host={socket}"
    finally:
        subprocess.run(
            [*as_owner, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(folder, ignore_errors=True)


def test_postgresql_through_the_same_path(trees: dict[str, Any], postgres: str) -> None:
    import sqlalchemy as sa

    root = trees["root"]
    run(trees, root, *KEYS, "--to", postgres, "--table", "usage")
    run(trees, root, *KEYS, "--to", postgres, "--table", "usage")
    engine = sa.create_engine(postgres)
    try:
        with engine.connect() as connection:
            found = list(connection.execute(sa.text("SELECT namespace, run_id FROM usage")))
    finally:
        engine.dispose()
    assert sorted(r[0] for r in found) == sorted([root, trees["dev"], trees["lab"]])
    assert len({r[1] for r in found}) == 1
