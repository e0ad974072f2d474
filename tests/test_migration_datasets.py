"""Every single-column key of public sample databases, on every database.

For Chinook, Sakila and MySQL's employees sample (``tests/data``, with their
licences) on SQLite, PostgreSQL and MariaDB, and pagila (PostgreSQL's: its
``payment`` partitioned by month, each partition with its own foreign keys
and indexes) on PostgreSQL: migrate every table with a single-column integer/text
key, one after the other, keeping whatever the plan refuses (named, with
nothing changed) -- to UUIDv7 keys, and again to UUID192 keys; every
relationship must join the same rows afterwards;
then undo them all, last first, and the whole database -- every row and the
schema as the database prints it -- must equal the original.

Set ``SQLA_IDS_DATASET_REPORT=<file>`` to get one JSON line per run (tables
migrated and refused, fingerprints equal, seconds): the closing table of
issue 10 is made from it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import datasets
import pytest
import sqlalchemy as sa
from conftest import _base_url, _engine, _mariadb_scratch, _postgresql_scratch
from dbsnapshot import relations, rows, schema
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7

pytestmark = pytest.mark.slow

CASES = [
    *(
        (d, db)
        for d in ("chinook", "sakila", "employees")
        for db in ("sqlite", "postgresql", "mariadb")
    ),
    ("pagila", "postgresql"),
]


@pytest.fixture(params=CASES, ids=[f"{d}-{db}" for d, db in CASES])
def dataset(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Engine]]:
    name, dialect = request.param
    if dialect == "sqlite":
        file = tmp_path / f"{name}.sqlite3"
        datasets.load_sqlite(file, datasets.script(name, dialect))
        engine = sa.create_engine(f"sqlite:///{file}")
        with engine.begin() as conn:
            datasets.fill(conn, name)
        yield name, engine
        engine.dispose()
        return
    scratch = _postgresql_scratch if dialect == "postgresql" else _mariadb_scratch
    with scratch(_base_url(dialect)) as url:
        for engine in _engine(url):
            with engine.begin() as conn:
                datasets.load(conn, name, dialect)
                datasets.fill(conn, name)
            yield name, engine


#: The key types every sample is migrated to (UUID192: issue 31, the segment a constant
#: type tag from an expression, which each table has).
TARGETS = {"uuid7": {}, "uuid192": {"target": "uuid192", "segment_sql": "7"}}


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_key_migrates_and_the_database_comes_back(
    dataset: tuple[str, Engine], target: str
) -> None:
    name, engine = dataset
    started = time.perf_counter()
    with engine.connect() as conn:
        original = (schema(conn), rows(conn))
        joined = relations(conn)
        tables = datasets.single_column_keys(conn)
        options = PkMigrationOptions(
            recreate_views=True,
            acknowledged_routines=tuple(datasets.routine_names(conn)),
            batch_size=97,
            seed=name,
            **TARGETS[target],
        )
    migrated, refused = [], {}
    with engine.connect() as conn:
        for table in tables:
            told = datasets.AS_TOLD.get((name, table), {})
            try:
                migrate_pk_to_uuid7(conn, table, replace(options, **told))
                conn.commit()
                migrated.append(table)
            except MigrationRefusedError as error:
                conn.rollback()
                refused[table] = str(error)
    with engine.connect() as conn:
        joined_after = relations(conn)
        assert joined_after == joined
        for table in reversed(migrated):
            restore_pk_from_uuid7(conn, table)
            conn.commit()
        restored = (schema(conn), rows(conn))
    report = {
        "dataset": name,
        "target": target,
        "dialect": engine.dialect.name,
        "tables": len(tables),
        "migrated": len(migrated),
        "refused": {t: r[:300] for t, r in refused.items()},
        "relations_equal": joined_after == joined,
        "schema_equal": restored[0] == original[0],
        "rows_equal": restored[1] == original[1],
        "seconds": round(time.perf_counter() - started, 1),
    }
    if path := os.environ.get("SQLA_IDS_DATASET_REPORT"):
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(report) + "\n")
    assert sorted(set(restored[0]) - set(original[0])) == sorted(
        set(original[0]) - set(restored[0])
    )
    assert restored == original
    assert migrated, f"nothing migrated: {refused}"
