"""A migration killed in the middle (SIGKILL) loses nothing and can be finished.

PostgreSQL and SQLite roll the whole attempt back; MariaDB (whose DDL commits
implicitly) continues from its recorded state -- tested both in the middle of
a batch step and in the middle of the column swap.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from typing import Any

import pytest
import requirements as requires
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids import UUID192Type
from sqla_ids.migration import migrate_pk_to_uuid7, restore_pk_from_uuid7
from sqla_ids.migration.core.phases import Reached
from sqla_ids.migration.core.state import load

# Runs the migration in a child process and kills it (SIGKILL) at a chosen point.
CHILD = """
import json, os, signal, sys
import sqlalchemy as sa
from sqla_ids.migration import migrate_pk_to_uuid7
from sqla_ids.migration.core import progress, state

url, table, point, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
target = dict(json.loads(sys.argv[5]))
calls = 0

def die_after(original):
    def wrapper(*args, **kwargs):
        global calls
        calls += 1
        if calls == count:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)
    return wrapper

if point == "batch":
    progress.Progress.advance = die_after(progress.Progress.advance)
else:
    original_save = state.save
    def save(connection, plan, step):
        if step.encode() == point:
            os.kill(os.getpid(), signal.SIGKILL)
        original_save(connection, plan, step)
    state.save = save

engine = sa.create_engine(url)
with engine.connect() as conn:
    migrate_pk_to_uuid7(conn, table, batch_size=50, seed="crash", **target)
    conn.commit()
print("finished without being killed")
"""


def _setup(engine: Engine, metadata: sa.MetaData, p: str) -> None:
    parent = sa.Table(
        f"{p}parent",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(20), nullable=False),
    )
    child = sa.Table(
        f"{p}child",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("parent_id", sa.Integer, sa.ForeignKey(parent.c.id, ondelete="CASCADE")),
        sa.Column("label", sa.String(20), nullable=False),
    )
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(parent.insert(), [{"id": i, "name": f"p{i}"} for i in range(1, 601)])
        conn.execute(
            child.insert(),
            [
                {"id": i, "parent_id": (i * 7) % 600 + 1 if i % 9 else None, "label": f"c{i}"}
                for i in range(1, 1201)
            ],
        )


def _relations(engine: Engine, p: str) -> list[Any]:
    with engine.connect() as conn:
        return sorted(
            conn.exec_driver_sql(
                f"SELECT c.label, pa.name FROM {p}child c LEFT JOIN {p}parent pa"
                " ON pa.id = c.parent_id"
            ).all()
        )


def _columns(engine: Engine, table: str) -> set[str]:
    return {c["name"] for c in sa.inspect(engine).get_columns(table)}


def _crash(
    engine: Engine, p: str, point: str, count: int, target: dict[str, str] | None = None
) -> None:
    url = engine.url.render_as_string(hide_password=False)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            url,
            f"{p}parent",
            point,
            str(count),
            json.dumps(target or {}),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -9, (done.returncode, done.stdout, done.stderr)


# Progress reports before the kill: 5 = while filling the mapping table; 20 = while
# filling the new columns (MariaDB), 14 = between two tables' rewrites (PostgreSQL: one
# ALTER TABLE each) or rebuilds (SQLite).
POINTS = {"mapping": {"sqlite": 5, "postgresql": 5, "mysql": 5},
          "fill": {"sqlite": 14, "postgresql": 14, "mysql": 20}}  # fmt: skip


#: The key types a run is killed making (the UUID192 keys' segment from an expression).
TARGETS = {"uuid7": {}, "uuid192": {"target": "uuid192", "segment_sql": "id % 5"}}


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("point", sorted(POINTS))
def test_killed_mid_batch_then_finished(
    engine: Engine, metadata: sa.MetaData, point: str, target: str
) -> None:
    count = POINTS[point][engine.dialect.name]
    point = "batch"
    p = f"k{secrets.token_hex(2)}_"
    _setup(engine, metadata, p)
    before = _relations(engine, p)
    _crash(engine, p, point, count, TARGETS[target])
    with engine.connect() as conn:
        recorded = load(conn, f"{p}parent")
        conn.rollback()
    if requires.offline_in_one_transaction(engine):
        assert recorded is None  # the whole attempt was rolled back
        assert _columns(engine, f"{p}parent") == {"id", "name"}
    else:
        assert (
            recorded is not None and recorded[0].phase is not Reached.DONE
        )  # resumable state kept
    assert _relations(engine, p) == before
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, f"{p}parent", batch_size=50, seed="crash", **TARGETS[target])
        conn.commit()
    assert _relations(engine, p) == before
    assert _columns(engine, f"{p}child") == {"id", "parent_id", "label"}
    if target == "uuid192":  # each key's segment is its row's, the mapping continued
        t = sa.table(f"{p}parent", sa.column("id", UUID192Type()), sa.column("id_old"))
        with engine.connect() as conn:
            made = conn.execute(sa.select(t.c.id, t.c.id_old).order_by(t.c.id)).all()
        assert [old for _, old in made] == list(range(1, 601))
        assert all(key.segment == old % 5 for key, old in made)
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, f"{p}parent")
        conn.commit()
    assert _relations(engine, p) == before
    assert _columns(engine, f"{p}parent") == {"id", "name"}


@pytest.mark.parametrize(
    ("step", "target"),
    [
        ("swap:2", "uuid7"),
        pytest.param("swap:3", "uuid7", marks=pytest.mark.slow),
        pytest.param("swap:2", "uuid192", marks=pytest.mark.slow),
        pytest.param("swap:3", "uuid192", marks=pytest.mark.slow),
    ],
)
def test_mariadb_killed_mid_swap_then_finished(
    mariadb_engine: Engine, step: str, target: str
) -> None:
    p = f"k{secrets.token_hex(2)}_"
    metadata = sa.MetaData()
    _setup(mariadb_engine, metadata, p)
    try:
        before = _relations(mariadb_engine, p)
        _crash(mariadb_engine, p, step, 0, TARGETS[target])
        with mariadb_engine.connect() as conn:
            recorded = load(conn, f"{p}parent")
            assert recorded is not None and recorded[0].phase is Reached.SWAPPING
            migrate_pk_to_uuid7(conn, f"{p}parent", **TARGETS[target])
        assert _relations(mariadb_engine, p) == before
        assert _columns(mariadb_engine, f"{p}parent") == {"id", "name", "id_old"}
        fks = sa.inspect(mariadb_engine).get_foreign_keys(f"{p}child")
        assert [fk["options"].get("ondelete") for fk in fks] == ["CASCADE"]
        with mariadb_engine.connect() as conn:
            restore_pk_from_uuid7(conn, f"{p}parent")
        assert _relations(mariadb_engine, p) == before
    finally:
        metadata.drop_all(mariadb_engine)
