"""Issue 28's rule 3: every way back works from every phase, with the application
writing, and returns the database to what it was.

The migration is stopped at each point a deploy (or a kill) can leave it --
after the expand, half-way through the backfill, after the backfill, after
the prepare, after the swap, after the contract -- with every write pattern
of :mod:`write_patterns` run before each phase; then it is undone (online
before the contract, offline after it), the patterns run once more on the
old keys, and:

* the schema is the original one, column order, indexes, constraints,
  triggers and comments included (sequence and ``AUTO_INCREMENT`` counters
  aside: the application inserted rows meanwhile);
* every row points where the application wrote it to point;
* every seed shop has its original key again.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
import write_patterns
from dbsnapshot import structure
from sqlalchemy.engine import Engine

from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7
from sqla_ids.migration import online as online_module
from sqla_ids.migration.core.state import steps

pytestmark = pytest.mark.slow

ONLINE = PkMigrationOptions(online=True, batch_size=8, batch_time=0)
STOPS = ["expanded", "backfilling", "backfilled", "prepared", "swapped", "contracted"]


class Stop(Exception):
    """The migration stopped here (a deploy that runs no further, a kill)."""


@pytest.fixture(params=["postgresql", "mariadb"])
def shop(request: pytest.FixtureRequest) -> Iterator[Engine]:
    engine: Engine = request.getfixturevalue(f"{request.param}_private_engine")
    if request.param == "mariadb":
        engine = sa.create_engine(engine.url, connect_args={"local_infile": True})
    write_patterns.create_schema(engine)
    yield engine
    engine.dispose()


def _fingerprint(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return structure(conn)


def _keys(engine: Engine) -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(
            conn.execute(sa.text("SELECT name, id FROM shop WHERE name LIKE 'seed%'")).all()
        )


TARGETS = {
    "uuid7": ONLINE,
    # UUID192 keys segmented by the shop's n: the patterns make keys from the swap on.
    "uuid192": ONLINE.replace(target="uuid192", segment_column="n"),
}


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("stop", STOPS)
def test_undone_from_every_phase_with_the_application_writing(
    shop: Engine, stop: str, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, keys = _fingerprint(shop), _keys(shop)
    matrix = write_patterns.Matrix(shop, uuid192=target == "uuid192")
    run = matrix.run

    phases = iter(["plan", "expand", "backfill", "prepare", "swap", "contract"])
    original_tasks = online_module.OnlineRun.run_tasks
    original_pause = online_module.OnlineRun.pause
    pauses = {"n": 0}

    def before_each_phase(self: Any, tasks: Any, then: Any = None) -> None:
        phase = next(phases, "undo")
        run(f"before {phase}")
        if (stop, phase) in (("expanded", "backfill"), ("backfilled", "prepare")):
            raise Stop(stop)
        original_tasks(self, tasks, then)

    def mid_backfill(self: Any) -> None:
        pauses["n"] += 1
        if stop == "backfilling" and pauses["n"] == 3:
            raise Stop(stop)
        original_pause(self)

    monkeypatch.setattr(online_module.OnlineRun, "run_tasks", before_each_phase)
    monkeypatch.setattr(online_module.OnlineRun, "pause", mid_backfill)
    goal = {"swapped": "swap", "contracted": "contract"}.get(stop, "prepare")
    try:
        for phase in ("prepare", "swap", "contract"):
            with shop.connect() as conn:
                migrate_pk_to_uuid7(conn, "shop", TARGETS[target], phase=phase)
            if phase == goal:
                break
    except Stop:
        pass
    monkeypatch.undo()
    with shop.connect() as conn:
        assert "shop" in steps(conn), "the migration left no record to undo"
    run("before the undo")
    with shop.connect() as conn:
        restore_pk_from_uuid7(conn, "shop")
        conn.commit()
    run("after the undo")
    matrix.checked()
    after = _fingerprint(shop)
    if stop == "contracted" and shop.dialect.name == "postgresql":
        # Documented (docs/migration.md, "Column order"): PostgreSQL cannot move
        # a column, and after the contract the key and the references are the
        # columns the migration added -- restored with their names, types and
        # constraints, at the end of their tables. Nothing else moves.
        moved = {line for line in set(before) ^ set(after) if line.startswith("column:")}
        assert {_column(line) for line in moved} == {
            ("shop", "id"),
            ("item", "shop_id"),
            ("review", "shop_id"),
            ("note", "shop_id"),
            ("shop", "parent_id"),
        }
        before, after = (_without_positions(lines) for lines in (before, after))
    assert sorted(set(after) - set(before)) == [] and sorted(set(before) - set(after)) == []
    assert _keys(shop) == keys


def _column(line: str) -> tuple[str, str]:
    fields = ast.literal_eval(line.removeprefix("column: "))
    return ast.literal_eval(fields[0]), ast.literal_eval(fields[2])


def _without_positions(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if line.startswith("column: "):
            fields = list(ast.literal_eval(line.removeprefix("column: ")))
            del fields[1]  # attnum
            line = f"column: {tuple(fields)}"
        out.append(line)
    return sorted(out)
