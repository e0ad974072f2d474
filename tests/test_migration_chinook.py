"""Chinook on SQLite, PostgreSQL and MariaDB: migrate every key to UUIDv7 and back.

Every join (invoice totals per customer, tracks per playlist, manager chains,
support reps, the track catalogue) must give the same result through the old
keys before and the new keys after; after the downgrade the whole database --
data and schema -- must equal the original.
"""

from __future__ import annotations

import re
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine

from sqla_ids.migration import migrate_pk_to_uuid7, restore_pk_from_uuid7

pytestmark = pytest.mark.slow

CHINOOK = Path(__file__).resolve().parent / "data" / "chinook"  # vendored, MIT (LICENSE.md)
FILES = {
    "sqlite": "Chinook_Sqlite_AutoIncrementPKs.sql",
    "postgresql": "Chinook_PostgreSql_SerialPKs.sql",
    "mariadb": "Chinook_MySql_AutoIncrementPKs.sql",
}
# Tables with a single-column key, parents before children (any order works).
TABLES = [
    "Artist", "Album", "Employee", "Customer", "Invoice", "InvoiceLine",
    "Genre", "MediaType", "Playlist", "Track",
]  # fmt: skip


def _name(dialect: str, name: str) -> str:
    """Chinook's PostgreSQL script uses snake_case names."""
    if dialect != "postgresql":
        return name
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower().replace("_i_d", "_id")


def _script_body(path: Path, marker: str) -> str:
    text = path.read_text(encoding="utf-8")
    return text[text.index(marker) :].split("\n", 1)[1]


def _statements(body: str) -> list[str]:
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    parts = re.split(r";\s*\n(?=\s*(?:INSERT|CREATE|ALTER|$))", body)
    return [p.strip() for p in parts if p.strip()]


@pytest.fixture(scope="module", params=["sqlite", "postgresql", "mariadb"])
def chinook(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """An engine on a fresh Chinook database (one per dialect and module)."""
    dialect = request.param
    path = CHINOOK / FILES[dialect]
    if dialect == "sqlite":
        file = tmp_path_factory.mktemp("chinook") / "chinook.sqlite3"
        raw = sqlite3.connect(file)
        raw.executescript(path.read_text(encoding="utf-8"))
        raw.close()
        engine = sa.create_engine(f"sqlite:///{file}")
        yield engine
        engine.dispose()
        return
    base: URL = request.getfixturevalue(f"{dialect}_url")
    name = f"chinook_{secrets.token_hex(3)}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    if dialect == "postgresql":
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{name}"')
        engine = sa.create_engine(base.set(query={"options": f"-csearch_path={name}"}))
        with engine.begin() as conn:
            conn.exec_driver_sql(_script_body(path, "\\c chinook_serial;").replace("%", "%%"))
        drop = f'DROP SCHEMA "{name}" CASCADE'
    else:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        engine = sa.create_engine(base.set(database=name))
        with engine.begin() as conn:
            for statement in _statements(_script_body(path, "USE `Chinook_AutoIncrement`;")):
                conn.exec_driver_sql(statement.replace("%", "%%"))
        drop = f"DROP DATABASE `{name}`"
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.exec_driver_sql(drop)
        admin.dispose()


def _dialect(engine: Engine) -> str:
    return "mariadb" if engine.dialect.name == "mysql" else engine.dialect.name


def _joins(engine: Engine) -> dict[str, list[Any]]:
    """Results of joins that follow every relationship in Chinook."""
    d = _dialect(engine)

    def n(name: str) -> str:
        return _name(d, name)

    queries = {
        "invoice totals per customer": f"""
            SELECT c.{n("Email")}, count(*), sum(il.{n("UnitPrice")} * il.{n("Quantity")})
            FROM {n("Customer")} c
            JOIN {n("Invoice")} i ON i.{n("CustomerId")} = c.{n("CustomerId")}
            JOIN {n("InvoiceLine")} il ON il.{n("InvoiceId")} = i.{n("InvoiceId")}
            GROUP BY c.{n("Email")} ORDER BY 1""",
        "tracks per playlist": f"""
            SELECT p.{n("Name")}, t.{n("Name")}, t.{n("Composer")} FROM {n("Playlist")} p
            JOIN {n("PlaylistTrack")} pt ON pt.{n("PlaylistId")} = p.{n("PlaylistId")}
            JOIN {n("Track")} t ON t.{n("TrackId")} = pt.{n("TrackId")} ORDER BY 1, 2, 3""",
        "manager chains": f"""
            SELECT e.{n("Email")}, m.{n("Email")}, mm.{n("Email")} FROM {n("Employee")} e
            LEFT JOIN {n("Employee")} m ON m.{n("EmployeeId")} = e.{n("ReportsTo")}
            LEFT JOIN {n("Employee")} mm ON mm.{n("EmployeeId")} = m.{n("ReportsTo")}
            ORDER BY 1""",
        "support reps": f"""
            SELECT c.{n("Email")}, e.{n("Email")} FROM {n("Customer")} c
            LEFT JOIN {n("Employee")} e ON e.{n("EmployeeId")} = c.{n("SupportRepId")}
            ORDER BY 1""",
        "catalogue": f"""
            SELECT t.{n("Name")}, a.{n("Title")}, ar.{n("Name")}, g.{n("Name")}, mt.{n("Name")},
                   t.{n("Milliseconds")}
            FROM {n("Track")} t JOIN {n("Album")} a ON a.{n("AlbumId")} = t.{n("AlbumId")}
            JOIN {n("Artist")} ar ON ar.{n("ArtistId")} = a.{n("ArtistId")}
            LEFT JOIN {n("Genre")} g ON g.{n("GenreId")} = t.{n("GenreId")}
            JOIN {n("MediaType")} mt ON mt.{n("MediaTypeId")} = t.{n("MediaTypeId")}
            ORDER BY 1, 2, 3, 4, 5, 6""",
        "sales per track": f"""
            SELECT t.{n("Name")}, t.{n("Milliseconds")}, il.{n("Quantity")}, i.{n("BillingCity")}
            FROM {n("InvoiceLine")} il JOIN {n("Track")} t ON t.{n("TrackId")} = il.{n("TrackId")}
            JOIN {n("Invoice")} i ON i.{n("InvoiceId")} = il.{n("InvoiceId")}
            ORDER BY 1, 2, 3, 4""",
    }
    # Compared as sorted lists (multisets): under MariaDB's case- and
    # accent-insensitive collation ORDER BY leaves ties in arbitrary order.
    with engine.connect() as conn:
        return {
            k: sorted((tuple(r) for r in conn.exec_driver_sql(q)), key=repr)
            for k, q in queries.items()
        }


def _snapshot(engine: Engine) -> dict[str, Any]:
    """Every table's rows (by column name, sorted) and schema (columns, keys, indexes)."""
    inspector = sa.inspect(engine)
    result: dict[str, Any] = {}
    with engine.connect() as conn:
        for table in sorted(inspector.get_table_names()):
            cols = inspector.get_columns(table)
            names = sorted(c["name"] for c in cols)
            rows = conn.execute(
                sa.select(*[sa.column(c) for c in names]).select_from(sa.table(table))
            )
            result[table] = {
                "rows": sorted(map(tuple, rows), key=repr),
                "columns": sorted((c["name"], str(c["type"]), c["nullable"]) for c in cols),
                "pk": inspector.get_pk_constraint(table),
                "fks": sorted(map(repr, inspector.get_foreign_keys(table))),
                "indexes": sorted(map(repr, inspector.get_indexes(table))),
                "uniques": sorted(map(repr, inspector.get_unique_constraints(table))),
            }
    return result


def test_every_key_migrates_and_comes_back(chinook: Engine) -> None:
    d = _dialect(chinook)
    original = _snapshot(chinook)
    joins_before = _joins(chinook)
    old_orders: dict[str, list[Any]] = {}
    with chinook.connect() as conn:
        for table in TABLES:
            t = _name(d, table)
            options: dict[str, Any] = {"batch_size": 97, "seed": "chinook"}
            if table == "Invoice":
                options["timestamp_column"] = _name(d, "InvoiceDate")
            migrate_pk_to_uuid7(conn, t, **options)
            conn.commit()
    inspector = sa.inspect(chinook)
    with chinook.connect() as conn:
        for table in TABLES:
            t, key = _name(d, table), _name(d, f"{table}Id")
            column = {c["name"]: c for c in inspector.get_columns(t)}[key]
            assert isinstance(column["type"], (sa.Uuid, sa.CHAR)), (t, column["type"])
            assert inspector.get_pk_constraint(t)["constrained_columns"] == [key]
            # New keys sort exactly like the old ones.
            old = (
                conn.execute(
                    sa.select(sa.column(f"{key}_old"))
                    .select_from(sa.table(t))
                    .order_by(sa.column(key))
                )
                .scalars()
                .all()
            )
            assert old == sorted(old)
            old_orders[t] = old
        # Every FK still exists, now between UUID columns.
        fks = inspector.get_foreign_keys(_name(d, "PlaylistTrack"))
        assert sorted(fk["referred_table"] for fk in fks) == sorted(
            [_name(d, "Playlist"), _name(d, "Track")]
        )
    assert _joins(chinook) == joins_before
    with chinook.connect() as conn:
        for table in reversed(TABLES):
            restore_pk_from_uuid7(conn, _name(d, table))
            conn.commit()
    assert _snapshot(chinook) == original
    assert _joins(chinook) == joins_before
