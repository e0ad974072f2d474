"""MariaDB's swap and its undo stopped after each of their statements (issue 28).

MariaDB commits every DDL statement on its own: a swap (or the undo of one)
stopped between two of its statements -- a killed process, a lost connection
-- leaves the tables half swapped. From every such point, both ways must
work: running the migration again finishes the swap, and undoing it finishes
the swap first, then puts everything back (schema and rows as before).
PostgreSQL swaps in one transaction: nothing to stop half-way there.

Until one of them runs, the application's inserts into the parent fail (its
triggers name columns the swap renamed): documented in docs/migration.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
import write_patterns
from dbsnapshot import rows, schema
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7
from sqla_ids.migration import online as online_module
from sqla_ids.migration.core.state import steps

pytestmark = pytest.mark.slow

ONLINE = PkMigrationOptions(online=True, batch_size=50)
_BOOKKEEPING = ("LOCK TABLES", "UNLOCK TABLES", "SET SESSION")


class Killed(BaseException):
    """The process stopped here (not an error any code may catch)."""


def _stop_after(monkeypatch: pytest.MonkeyPatch, count: int) -> dict[str, int]:
    """Stop the migration after ``count`` statements of its next locked step."""
    original = online_module.execute
    seen = {"n": 0, "armed": 0}
    original_locked = online_module.OnlineRun._locked

    def locked(self: Any, connection: Any, task: Any) -> None:
        seen["armed"] = 1
        try:
            original_locked(self, connection, task)
        finally:
            seen["armed"] = 0

    def execute(connection: Any, statements: Any) -> None:
        for statement in statements:
            counted = seen["armed"] and not statement.sql.startswith(_BOOKKEEPING)
            if counted and seen["n"] == count:
                raise Killed(statement.sql)
            original(connection, [statement])
            # Counted once done: one that met a lock timeout (retried under the
            # lock) changed nothing, and would make a clean run's count too high.
            if counted:
                seen["n"] += 1

    monkeypatch.setattr(online_module, "execute", execute)
    monkeypatch.setattr(online_module.OnlineRun, "_locked", locked)
    return seen


@pytest.fixture
def shop(mariadb_private_engine: Engine) -> Iterator[Engine]:
    engine = sa.create_engine(mariadb_private_engine.url, connect_args={"local_infile": True})
    write_patterns.create_schema(engine)
    yield engine
    engine.dispose()


def _statements(shop: Engine, step: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many statements the step ``step`` ("swap" or "undo") runs."""
    with monkeypatch.context() as patch:
        seen = _stop_after(patch, 10_000)
        _go(shop, step)
    return seen["n"]


def _go(shop: Engine, step: str) -> None:
    with shop.connect() as conn:
        if step == "undo":
            restore_pk_from_uuid7(conn, "shop")
            conn.commit()
        else:
            migrate_pk_to_uuid7(conn, "shop", ONLINE, phase=step)  # type: ignore[arg-type]


@pytest.mark.parametrize("then", ["finished", "undone"])
def test_a_swap_stopped_after_each_statement(
    shop: Engine, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    with shop.connect() as conn:
        before = (schema(conn), rows(conn))
    _go(shop, "prepare")
    total = _statements(shop, "swap", monkeypatch)
    _go(shop, "undo")  # back to the start for the stops
    assert total >= 8
    for count in range(1, total):
        _go(shop, "prepare")
        with monkeypatch.context() as patch, pytest.raises(Killed):
            _stop_after(patch, count)
            _go(shop, "swap")
        with shop.connect() as conn:
            assert steps(conn)["shop"] == "online:prepared", count
        if then == "finished":
            _go(shop, "swap")
            _go(shop, "contract")
            with shop.connect() as conn:
                assert steps(conn)["shop"] == "done"
            problems = write_patterns.check(shop, _seed())
            assert not problems, (count, problems)
            _go(shop, "undo")  # offline, after the contract
        else:
            _go(shop, "undo")
        with shop.connect() as conn:
            assert (schema(conn), rows(conn)) == before, count


def test_an_undo_stopped_after_each_statement(
    shop: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    with shop.connect() as conn:
        before = (schema(conn), rows(conn))
    _go(shop, "prepare")
    _go(shop, "swap")
    total = _statements(shop, "undo", monkeypatch)
    assert total >= 6
    for count in range(1, total):
        _go(shop, "prepare")
        _go(shop, "swap")
        with monkeypatch.context() as patch, pytest.raises(Killed):
            _stop_after(patch, count)
            _go(shop, "undo")
        with shop.connect() as conn:
            assert steps(conn)["shop"] == "online:unswapping", count
        with (
            shop.connect() as conn,
            pytest.raises(MigrationRefusedError, match="restore_pk_from_uuid7 again"),
        ):
            migrate_pk_to_uuid7(conn, "shop", ONLINE)
        _go(shop, "undo")  # the undo run again finishes
        with shop.connect() as conn:
            assert "shop" not in steps(conn), count
            assert (schema(conn), rows(conn)) == before, count


def _seed() -> write_patterns.Expected:
    expected = write_patterns.Expected()
    expected.items.update(
        {f"seed-i{n}": f"seed{1 + n % write_patterns.SEED_SHOPS}" for n in range(200)}
    )
    return expected


def test_an_undo_stopped_before_the_mapping_goes(
    shop: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tables swapped back, the mapping table and the state's row still
    there: the undo run again only drops the mapping and forgets."""
    with shop.connect() as conn:
        before = (schema(conn), rows(conn))
    _go(shop, "prepare")
    _go(shop, "swap")
    original = online_module.execute

    def execute(connection: Any, statements: Any) -> None:
        for statement in statements:
            if statement.sql.startswith("DROP TABLE IF EXISTS"):
                raise Killed(statement.sql)
            original(connection, [statement])

    with monkeypatch.context() as patch, pytest.raises(Killed):
        patch.setattr(online_module, "execute", execute)
        _go(shop, "undo")
    with shop.connect() as conn:
        assert steps(conn)["shop"] == "online:unswapping"
    _go(shop, "undo")
    with shop.connect() as conn:
        assert "shop" not in steps(conn)
        assert (schema(conn), rows(conn)) == before
