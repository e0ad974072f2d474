"""``infer_relations`` / ``sqla-ids relations`` on real SQLite, PostgreSQL and MariaDB data."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import pydot
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids.cli import main
from sqla_ids.identifiers import uuid7_batch
from sqla_ids.tools.diagram import to_dot, to_mermaid
from sqla_ids.tools.relations import RelationsReport, infer_relations, related_columns
from sqla_ids.types.uuid7 import UUIDv7

CUSTOMERS, ORDERS, LINES = 12, 30, 60

# pydot (used only to check that the DOT output parses) calls deprecated pyparsing names.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pydot")


@pytest.fixture
def shop(engine: Engine, metadata: sa.MetaData) -> Iterator[Engine]:
    """An undocumented shop: keys in three storage forms, only one declared foreign key."""
    customers = sa.Table(
        "rl_customers",
        metadata,
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("email", sa.String(60)),
    )
    orders = sa.Table(
        "rl_orders",
        metadata,
        sa.Column("id", sa.CHAR(36), primary_key=True),  # canonical text
        sa.Column("customer_id", sa.Uuid(), nullable=False),  # no FK declared
    )
    lines = sa.Table(
        "rl_lines",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("order_ref", sa.String(32)),  # 32 upper-case hex digits
        sa.Column("buyer", sa.LargeBinary()),  # 16 raw bytes
    )
    notes = sa.Table(
        "rl_notes",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("customer_id", sa.Uuid(), sa.ForeignKey("rl_customers.id")),
    )
    strangers = sa.Table(
        "rl_strangers",
        metadata,
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("code", sa.CHAR(36)),  # text that is not a UUID
    )
    profiles = sa.Table(  # one-to-one with customers, undeclared
        "rl_profiles",
        metadata,
        sa.Column("customer_id", sa.Uuid(), primary_key=True),
    )
    metadata.create_all(engine)
    rng = random.Random(6)
    customer_ids = uuid7_batch(CUSTOMERS)
    order_ids = uuid7_batch(ORDERS)
    order_customer = [rng.choice(customer_ids) for _ in order_ids]
    with engine.begin() as conn:
        conn.execute(
            customers.insert(), [{"id": c, "email": f"{c.hex[:6]}@x"} for c in customer_ids]
        )
        conn.execute(
            orders.insert(),
            [
                {"id": str(o), "customer_id": c}
                for o, c in zip(order_ids, order_customer, strict=True)
            ],
        )
        conn.execute(
            lines.insert(),
            [
                {
                    "id": n,
                    "order_ref": order_ids[n % ORDERS].hex.upper(),
                    "buyer": order_customer[n % ORDERS].bytes,
                }
                for n in range(LINES)
            ],
        )
        conn.execute(
            notes.insert(),
            [{"id": 1, "customer_id": customer_ids[0]}, {"id": 2, "customer_id": customer_ids[0]}],
        )
        conn.execute(profiles.insert(), [{"customer_id": c} for c in customer_ids])
        conn.execute(
            strangers.insert(),
            [{"id": s, "code": f"code-{n:031d}"} for n, s in enumerate(uuid7_batch(5))],
        )
    yield engine


def _refs(report: RelationsReport) -> dict[tuple[str, str], tuple[str, str, float, bool]]:
    return {
        (r.table, r.column): (r.target_table, r.target_column, r.confidence, r.declared)
        for r in report.references
        if r.table.startswith("rl_")
    }


def test_infers_keys_and_references(shop: Engine) -> None:
    report = infer_relations(shop)
    assert report.complete
    columns = {c.name: c for c in report.columns if c.table.startswith("rl_")}
    assert set(columns) == {
        "rl_customers.id",
        "rl_orders.id",
        "rl_orders.customer_id",
        "rl_lines.order_ref",
        "rl_lines.buyer",
        "rl_notes.customer_id",
        "rl_strangers.id",
        "rl_profiles.customer_id",
    }  # rl_strangers.code holds text that is no UUID; integers cannot hold one
    assert columns["rl_orders.customer_id"].distinct <= CUSTOMERS
    assert columns["rl_lines.order_ref"].values == LINES

    keys = {(k.table, k.column): k.confidence for k in report.primary_keys}
    assert keys["rl_customers", "id"] == 1.0 and keys["rl_orders", "id"] == 1.0
    assert ("rl_lines", "buyer") not in keys  # repeated values
    assert ("rl_orders", "customer_id") not in keys

    refs = _refs(report)
    assert refs["rl_notes", "customer_id"] == ("rl_customers", "id", 1.0, True)
    target, column, confidence, declared = refs["rl_orders", "customer_id"]
    assert (target, column, declared) == ("rl_customers", "id", False)
    assert confidence >= 0.9  # contained, named after the table, enough values
    # across storage forms: hex text -> canonical text, raw bytes -> native uuid
    assert refs["rl_lines", "order_ref"][:2] == ("rl_orders", "id")
    assert refs["rl_lines", "buyer"][:2] == ("rl_customers", "id")
    assert 0.5 <= refs["rl_lines", "buyer"][2] < confidence  # no name hint: less sure
    # one-to-one: the profile points at the customer, not the other way round
    assert refs["rl_profiles", "customer_id"][:2] == ("rl_customers", "id")
    assert ("rl_customers", "id") not in refs
    assert not any(t == "rl_strangers" or s[0] == "rl_strangers" for s, (t, *_) in refs.items())


def test_related_columns_by_name_and_values(shop: Engine) -> None:
    related = {(r.table, r.column): r for r in related_columns(shop, "rl_customers", "id")}
    assert related["rl_orders", "customer_id"].shared >= 1
    assert related["rl_lines", "buyer"].shared == related["rl_orders", "customer_id"].shared
    assert related["rl_notes", "customer_id"].shared == 1  # two notes, one customer
    assert related["rl_strangers", "id"].same_name and related["rl_strangers", "id"].shared == 0
    with pytest.raises(ValueError, match="no UUID-capable column"):
        related_columns(shop, "rl_customers", "nope")
    with pytest.raises(ValueError, match="does not hold UUID"):
        related_columns(shop, "rl_strangers", "code")


def test_mermaid_and_dot(shop: Engine) -> None:
    report = infer_relations(shop, tables=["rl_customers", "rl_orders", "rl_notes", "rl_profiles"])
    mermaid = to_mermaid(report)
    assert mermaid.startswith("erDiagram\n")
    assert '    rl_orders }o--|| rl_customers : "customer_id (' in mermaid
    assert '    rl_notes }o--|| rl_customers : "customer_id (declared)"' in mermaid
    assert '    rl_profiles |o--|| rl_customers : "customer_id (' in mermaid
    assert "        UUID id PK" in mermaid or "        CHAR_32 id PK" in mermaid
    (graph,) = pydot.graph_from_dot_data(to_dot(report))
    edges = {(e.get_source().strip('"'), e.get_destination().strip('"')) for e in graph.get_edges()}
    assert edges == {
        ("rl_orders", "rl_customers"),
        ("rl_notes", "rl_customers"),
        ("rl_profiles", "rl_customers"),
    }
    assert {n.get_name().strip('"') for n in graph.get_nodes()} >= {"rl_orders", "rl_customers"}


def test_time_budget_gives_a_partial_report(shop: Engine) -> None:
    ticks = iter(range(10_000))
    report = infer_relations(shop, timeout=3, clock=lambda: float(next(ticks)))
    assert not report.complete
    assert any("time budget" in s for s in report.skipped)


def test_bad_arguments(sqlite_engine: Engine) -> None:
    with pytest.raises(ValueError, match="min_confidence"):
        infer_relations(sqlite_engine, min_confidence=2)
    with pytest.raises(ValueError, match="sample_rows"):
        infer_relations(sqlite_engine, sample_rows=0)


# quick cover: the [postgresql] and [sqlite] cases (the command line is the
# same); MariaDB's relations: test_infers_keys_and_references[mariadb] and
# test_mermaid_and_dot[mariadb]
@pytest.mark.slow_on("mariadb")
def test_cli_relations(shop: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    url = shop.url.render_as_string(hide_password=False)
    tables = ["--table", "rl_customers", "--table", "rl_orders"]
    assert main(["relations", "--url", url, *tables, "--mermaid"]) == 0
    assert "rl_orders }o--|| rl_customers" in capsys.readouterr().out
    assert main(["relations", "--url", url, *tables, "--dot"]) == 0
    assert pydot.graph_from_dot_data(capsys.readouterr().out)
    assert main(["relations", "--url", url, *tables, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["references"][0]["target_table"] == "rl_customers"
    assert main(["relations", "--url", url, *tables]) == 0
    assert "rl_orders.customer_id -> rl_customers.id" in capsys.readouterr().out
    assert main(["relations", "--url", url, "--column", "rl_customers.id"]) == 0
    assert "rl_orders.customer_id" in capsys.readouterr().out
    assert main(["relations", "--url", url, "--column", "nodot"]) == 2
    assert "TABLE.COLUMN" in capsys.readouterr().err


# quick cover: the [postgresql] and [sqlite] cases (the report's filter is the
# tool's own); a migrated MariaDB schema's tables: tests/test_cli_migrate.py::
#   test_offline_ctrl_c_says_what_it_left[mariadb]
@pytest.mark.slow_on("mariadb")
def test_migration_backups_are_left_out_unless_named(
    private_engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    """A migrated schema: the mapping tables (old key -> new key) hold copies of
    keys, not the application's entities; they are listed as left out."""
    from sqla_ids import migrate_pk_to_uuid7

    engine = private_engine
    md = sa.MetaData()
    sa.Table("rm_customers", md, sa.Column("id", sa.BigInteger, primary_key=True))
    sa.Table(
        "rm_orders",
        md,
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("customer_id", sa.BigInteger, sa.ForeignKey("rm_customers.id"), nullable=False),
    )
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(md.tables["rm_customers"].insert(), [{"id": n} for n in range(1, 13)])
        conn.execute(
            md.tables["rm_orders"].insert(),
            [{"id": n, "customer_id": 1 + n % 12} for n in range(1, 31)],
        )
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "rm_customers")
        migrate_pk_to_uuid7(conn, "rm_orders", mapping_table="rm_orders_backup")
        conn.commit()
    report = infer_relations(engine)
    assert {c.table for c in report.columns} == {"rm_customers", "rm_orders"}
    # The mapping tables, by name or as recorded, and the migrations' state table.
    assert report.left_out == [
        "rm_customers_uuid7_map",
        "rm_orders_backup",
        "sqla_ids_pk_migrations",
    ]
    assert report.complete  # left out by choice, not a check that failed
    assert [(r.table, r.column, r.target_table) for r in report.references] == [
        ("rm_orders", "customer_id", "rm_customers")
    ]
    named = infer_relations(engine, tables=["rm_orders_backup"])
    assert {c.table for c in named.columns} == {"rm_orders_backup"} and named.left_out == []
    assert main(["relations", "--url", engine.url.render_as_string(hide_password=False)]) == 0
    out = capsys.readouterr().out
    assert "left out (sqla_ids' own tables" in out and "rm_customers_uuid7_map" in out
    assert "rm_customers_uuid7_map." not in out  # not among the UUID columns


def test_hostile_names_on_every_database(engine: Engine, metadata: sa.MetaData) -> None:
    """Backticks, quotes and spaces in the tables' and columns' names: every UUID
    column found under its name, the keys declared, the reference declared.
    MariaDB: SQLAlchemy's reflection doubles a backtick in a column's and a key's
    name and leaves out a foreign key with one (2.1.9) -- each UUID column's
    count failed (1054) and the report was empty."""
    parent = sa.Table("r`p 'o\"", metadata, sa.Column("i`d", UUIDv7, primary_key=True))
    child = sa.Table(
        "r`c 'o\"",
        metadata,
        sa.Column("i`d", UUIDv7, primary_key=True),
        sa.Column("p`id \"x'", UUIDv7, sa.ForeignKey(parent.c["i`d"]), nullable=False),
    )
    metadata.create_all(engine)
    ids = uuid7_batch(20)
    with engine.begin() as conn:
        conn.execute(parent.insert(), [{"i`d": i} for i in ids])
        conn.execute(
            child.insert(),
            [{"i`d": k, "p`id \"x'": ids[n % 20]} for n, k in enumerate(uuid7_batch(40))],
        )
    report = infer_relations(engine, tables=[parent.name, child.name])
    assert report.skipped == []
    assert {(c.table, c.column) for c in report.columns} == {
        (parent.name, "i`d"),
        (child.name, "i`d"),
        (child.name, "p`id \"x'"),
    }
    assert {(k.table, k.column) for k in report.primary_keys} == {
        (parent.name, "i`d"),
        (child.name, "i`d"),
    }
    [reference] = report.references
    assert (reference.table, reference.column, reference.target_table) == (
        child.name,
        "p`id \"x'",
        parent.name,
    )
    assert reference.declared and reference.target_column == "i`d"
