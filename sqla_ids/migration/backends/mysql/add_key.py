"""MariaDB: adding a UUIDv7 primary key; each DDL statement commits on its own.

InnoDB gives a table without a primary key a hidden row id no statement can
read, so the first ``ALTER TABLE`` adds, next to the nullable key column, a
temporary ``AUTO_INCREMENT`` column with a unique index: the rebuild numbers
the rows in the order it copies them, the clustered index's (the hidden row
id's insertion order, or the first unique ``NOT NULL`` index's) -- the order
``SELECT *`` returns, the table's physical order. The fill finds each row by
that number. The last ``ALTER TABLE`` drops it, makes the key ``NOT NULL`` and
the primary key in one rebuild. A run that fails in between drops both columns
again (:meth:`MariaDBKeyAdder.abandon`). A run killed in between (no handler
runs) left its ``STARTED`` record: the next run asks :meth:`MariaDBKeyAdder.reached`
how far it got and continues -- each step below skips what is already there --
and the drop removes whichever of the columns, index and triggers are there.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import execute_sql, query_sql
from sqla_ids.migration.backends.add_key import (
    KeyAdder,
    explicit_transaction,
    install_default,
    online_step,
    unindexed_order,
)
from sqla_ids.migration.backends.mysql import guards
from sqla_ids.migration.backends.mysql.offline import park_triggers, unpark_triggers
from sqla_ids.migration.backends.mysql.online import MariaDBOnline
from sqla_ids.migration.backends.mysql.reflect import (
    _TRIGGER_NAME,
    MAX_IDENTIFIER_CHARS,
    create_lines,
    preserved_columns,
    update_triggers,
)
from sqla_ids.migration.core.added_key import AddKeyPlan, UniqueKey, quoted
from sqla_ids.migration.core.mapping import uuid_type
from sqla_ids.migration.core.model import name_suffix
from sqla_ids.migration.core.reflected import Inspector
from sqla_ids.migration.core.sql import Statement, execute
from sqla_ids.types.server_functions import (
    install_uuid7_function,
    uuid7_column_default_sql,
    uuid7_column_trigger_sql,
)


class _BoundedWaits:
    """Lock waits of the online run's DDL: each may wait up to ``lock_timeout``
    (whole seconds, at least 1) for its metadata lock -- the application's
    statements queue behind it that long at most -- then gives up and is tried
    again. (The online key migration waits for none, as its DDL also locks the
    tables foreign keys link; here an online rebuild of a busy table would then
    never get the lock it needs at its end.)"""

    def set_lock_timeout(self, connection: Connection, seconds: float, local: bool) -> None:
        """``lock_wait_timeout`` of the session (``0``: the server's default)."""
        value = str(max(1, math.ceil(seconds))) if seconds else "DEFAULT"
        query_sql(connection, f"SET SESSION lock_wait_timeout = {value}")

    def retry_delays(self, attempts: int) -> list[float]:
        """Short, jittered pauses: the moment no transaction holds the table."""
        return [random.uniform(0.05, 0.5) for _ in range(max(attempts, 1) * 3)]

    def is_lock_timeout(self, error: BaseException) -> bool:
        """Error 1205 or 1213 (:meth:`MariaDBOnline.is_lock_timeout`)."""
        return MariaDBOnline().is_lock_timeout(error)

    def vacuum_holding(self, connection: Connection, tables: Sequence[str]) -> list[str]:
        """None: MariaDB has no maintenance that a longer wait makes give up."""
        return []

    def outlast_vacuum(self, connection: Connection, local: bool) -> None:
        """Nothing (see :meth:`vacuum_holding`)."""


_SESSIONS = _BoundedWaits()

#: Prefix of the temporary numbering column (``sqla_ids_row_<hash of the table>``).
HANDLE_PREFIX = "sqla_ids_row_"


def _scratch_table(plan: AddKeyPlan) -> sa.TableClause:
    """The connection's temporary table of one batch's (handle, key) pairs."""
    return sa.table(
        f"sqla_ids_keys_{name_suffix(plan.table)}",
        sa.column("h", sa.BigInteger()),
        sa.column("k", uuid_type()),
    )


def _columns(connection: Connection, table: str) -> set[str]:
    """``table``'s column names, as the server has them."""
    return set(
        connection.execute(
            sa.text(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS"
                " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t"
            ),
            {"t": table},
        ).scalars()
    )


class MariaDBKeyAdder(KeyAdder):
    """See the module docstring."""

    transactional = False

    def unique_key(self, connection: Connection, table: str, name: str) -> UniqueKey | str | None:
        """From ``information_schema.STATISTICS``; the definition is the key's own
        line of ``SHOW CREATE TABLE`` (its prefix lengths, ``DESC`` columns,
        ``COMMENT``, ``IGNORED``, ``USING``: all of it comes back)."""
        rows = connection.execute(
            sa.text(
                "SELECT COLUMN_NAME, SUB_PART FROM information_schema.STATISTICS"
                " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t AND INDEX_NAME = :n"
                " AND NON_UNIQUE = 0 ORDER BY SEQ_IN_INDEX"
            ),
            {"t": table, "n": name},
        ).all()
        if not rows:
            return None
        if any(column is None for column, _ in rows):
            return f"unique index {name} is on an expression"
        parts = [
            quoted(connection, column) + ("" if length is None else f"({int(length)})")
            for column, length in rows
        ]
        # (Built from the columns where SHOW CREATE TABLE quotes no name:
        # sql_quote_show_create off.)
        definition = f"UNIQUE KEY {quoted(connection, name)} ({', '.join(parts)})"
        head = "UNIQUE KEY `" + name.replace("`", "``") + "` ("
        for line in create_lines(connection, table):
            if line.startswith(head):
                definition = line
        return UniqueKey(name, [column for column, _ in rows], "index", definition)

    def problems(self, connection: Connection, inspector: Inspector, plan: AddKeyPlan) -> list[str]:
        """An ``AUTO_INCREMENT`` column (InnoDB allows one per table, and the
        numbering needs it); the numbering column's and the triggers' names."""
        found = []
        auto = connection.execute(
            sa.text(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA ="
                " DATABASE() AND TABLE_NAME = :t AND EXTRA LIKE :auto"
            ),
            {"t": plan.table, "auto": "%auto_increment%"},
        ).scalar()
        if auto is not None:
            found.append(
                f"column {auto} is AUTO_INCREMENT (a key in all but name): make it the"
                " primary key and use migrate_pk_to_uuid7"
            )
        plan.parked_triggers = update_triggers(connection, {plan.table: {plan.column}})
        plan.handle_column = HANDLE_PREFIX + name_suffix(plan.table)
        if plan.handle_column in {c["name"] for c in inspector.get_columns(plan.table)}:
            found.append(f"column {plan.handle_column} has a name sqla_ids reserves")
        if plan.options.server_default:
            for sql in uuid7_column_trigger_sql(
                connection.dialect, quoted(connection, plan.table), quoted(connection, plan.column)
            ):
                match = _TRIGGER_NAME.match(sql)
                if match is None:  # pragma: no cover - the types layer's DDL changed shape
                    found.append(f"cannot read the trigger name from {sql!r}")
                    continue
                if len(match.group(1).strip("`").replace("``", "`")) > MAX_IDENTIFIER_CHARS:
                    found.append(
                        f"the trigger filling new rows' keys would be named {match.group(1)},"
                        f" longer than {MAX_IDENTIFIER_CHARS} characters; pass"
                        " server_default=False (keys from the application)"
                    )
                plan.triggers.append(match.group(1))
        return found

    def reached(self, connection: Connection, plan: AddKeyPlan) -> str:
        """From the columns: both there, ``"added"``; the key without the numbering
        column, ``"keyed"`` (one ``ALTER TABLE`` adds both, another drops the
        numbering column and makes the key primary: each is atomic)."""
        there = _columns(connection, plan.table)
        if plan.column not in there:
            return "nothing"
        return "added" if plan.handle_column in there else "keyed"

    def start(self, connection: Connection, plan: AddKeyPlan) -> list[sa.ColumnElement[Any]]:
        """The key column and the numbering column, in one rebuild (unless a
        killed run added them)."""
        assert plan.handle_column is not None
        q = functools.partial(quoted, connection)
        handle = q(plan.handle_column)
        if {plan.column, plan.handle_column} <= _columns(connection, plan.table):
            return [sa.column(plan.handle_column, sa.BigInteger())]
        execute_sql(
            connection,
            f"ALTER TABLE {q(plan.table)} ADD COLUMN {q(plan.column)} {plan.key_type_sql} NULL,"
            f" ADD COLUMN {handle} BIGINT NOT NULL AUTO_INCREMENT, ADD UNIQUE KEY {handle}"
            f" ({handle})",
        )
        return [sa.column(plan.handle_column, sa.BigInteger())]

    def finish(self, connection: Connection, plan: AddKeyPlan) -> None:
        """One rebuild: numbering column dropped, key ``NOT NULL`` and primary,
        the unique key dropped when asked; then the default's trigger."""
        assert plan.handle_column is not None
        q = functools.partial(quoted, connection)
        column = q(plan.column)
        default = ""
        if plan.options.server_default:
            install_uuid7_function(connection)
            # MariaDB allows no stored function in DEFAULT: a placeholder the
            # BEFORE INSERT trigger replaces (as the key migration does).
            plan.default_sql = uuid7_column_default_sql(connection.dialect)
            default = f" DEFAULT {plan.default_sql}"
        execute_sql(connection, f"DROP TEMPORARY TABLE IF EXISTS {q(_scratch_table(plan).name)}")
        clauses = [
            f"DROP COLUMN {q(plan.handle_column)}",
            f"MODIFY COLUMN {column} {plan.key_type_sql} NOT NULL{default}",
            f"ADD PRIMARY KEY ({column})",
        ]
        unique = plan.unique_key
        if unique is not None and not plan.options.keep_unique_key:
            clauses.append(f"DROP INDEX {q(unique.name)}")
        if plan.handle_column in _columns(connection, plan.table):  # else a killed run did it
            execute_sql(connection, f"ALTER TABLE {q(plan.table)} {', '.join(clauses)}")
        for trigger in plan.triggers:  # a killed run may have created some
            execute_sql(connection, f"DROP TRIGGER IF EXISTS {trigger}")
        if plan.options.server_default:
            for sql in uuid7_column_trigger_sql(connection.dialect, q(plan.table), column):
                execute_sql(connection, sql)

    def undo(self, connection: Connection, plan: AddKeyPlan) -> None:
        """Triggers dropped, then the column (its primary key goes with it) and the
        unique key back, in one rebuild. After a killed run: whichever of them
        are there (the numbering column too; the unique key only if it went) --
        and the ``UPDATE`` triggers a run killed in its fill had parked."""
        unpark_triggers(connection, plan)
        q = functools.partial(quoted, connection)
        execute_sql(connection, f"DROP TEMPORARY TABLE IF EXISTS {q(_scratch_table(plan).name)}")
        for trigger in plan.triggers:
            execute_sql(connection, f"DROP TRIGGER IF EXISTS {trigger}")
        there = _columns(connection, plan.table)
        clauses = [f"DROP COLUMN {q(c)}" for c in (plan.column, plan.handle_column) if c in there]
        unique = plan.unique_key
        if (
            unique is not None
            and not plan.options.keep_unique_key
            and self.unique_key(connection, plan.table, unique.name) is None
        ):
            clauses.append(f"ADD {unique.definition}")
        if clauses:
            execute_sql(connection, f"ALTER TABLE {q(plan.table)} {', '.join(clauses)}")

    @contextmanager
    def quiet(self, connection: Connection, plan: AddKeyPlan) -> Iterator[None]:
        """The application's ``UPDATE`` triggers dropped while the fill writes and
        created again from their definitions after (as the key migration's
        offline mode does: :func:`~sqla_ids.migration.backends.mysql.offline.park_triggers`).
        A failed run puts them back too; a killed one's re-run or drop does."""
        park_triggers(connection, plan)
        try:
            yield
        except BaseException:
            with suppress(sa.exc.DBAPIError):  # (unless the connection is what failed)
                unpark_triggers(connection, plan)
            raise
        unpark_triggers(connection, plan)

    @contextmanager
    def batch(self, connection: Connection) -> Iterator[None]:
        """One transaction per batch: the run is in autocommit mode (its DDL commits
        anyway), where each row's ``UPDATE`` would otherwise be a commit of its own
        -- a log flush per row."""
        with explicit_transaction(connection):
            yield

    def write_batch(
        self,
        connection: Connection,
        plan: AddKeyPlan,
        update: sa.Update,
        params: list[dict[str, Any]],
    ) -> None:
        """The batch's keys into a temporary table (PyMySQL sends an ``executemany``
        of ``INSERT`` as multi-row statements), then one ``UPDATE ... JOIN``: two
        round trips a batch instead of one a row."""
        assert plan.handle_column is not None
        q = functools.partial(quoted, connection)
        scratch = _scratch_table(plan)
        execute_sql(
            connection,
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {q(scratch.name)} (h BIGINT NOT NULL"
            f" PRIMARY KEY, k {plan.key_type_sql} NOT NULL)",
        )
        execute_sql(connection, f"DELETE FROM {q(scratch.name)}")
        connection.execute(
            sa.insert(scratch), [{"h": p["sqla_ids_h0"], "k": p["sqla_ids_key"]} for p in params]
        )
        # ON UPDATE CURRENT_TIMESTAMP columns assigned to themselves: they keep their values.
        kept = "".join(f", t.{q(c)} = t.{q(c)}" for c in preserved_columns(connection, plan.table))
        execute_sql(
            connection,
            f"UPDATE {q(plan.table)} t JOIN {q(scratch.name)} n ON t.{q(plan.handle_column)}"
            f" = n.h SET t.{q(plan.column)} = n.k{kept}",
        )

    def abandon(self, connection: Connection, plan: AddKeyPlan) -> None:
        """Drop the columns a failed run added (those still there); the parked
        ``UPDATE`` triggers back."""
        unpark_triggers(connection, plan)
        q = functools.partial(quoted, connection)
        execute_sql(connection, f"DROP TEMPORARY TABLE IF EXISTS {q(_scratch_table(plan).name)}")
        for trigger in plan.triggers:
            execute_sql(connection, f"DROP TRIGGER IF EXISTS {trigger}")
        there = _columns(connection, plan.table)
        drops = [
            f"DROP COLUMN {q(c)}" for c in (plan.column, plan.handle_column or "") if c in there
        ]
        if drops:
            execute_sql(connection, f"ALTER TABLE {q(plan.table)} {', '.join(drops)}")


class MariaDBOnlineKeyAdder(MariaDBKeyAdder):
    """``online=True``: the key added while the application keeps writing.

    The rows are found by the ordering columns (``unique_key=``/``order_by=``;
    the physical order needs the rebuild that numbers the rows, which the
    online mode cannot do). Each DDL statement waits for no metadata lock and
    is tried again after a short pause while an application transaction holds
    the table (:func:`~sqla_ids.migration.backends.add_key.online_step`):
    ``ADD COLUMN ..., LOCK=NONE`` (instant where InnoDB can); the
    ``BEFORE INSERT`` trigger giving new rows their key; the application's
    ``UPDATE`` triggers guarded (firing for every session but the fill's,
    :mod:`~sqla_ids.migration.backends.mysql.guards`), with the table locked
    for the moment they are replaced; the fill in one short transaction per
    batch (``ON UPDATE CURRENT_TIMESTAMP`` columns assigned to themselves);
    ``NOT NULL`` and the primary key in one online rebuild (``LOCK=NONE``); the
    triggers unguarded. A killed run continues from the catalog (:meth:`reached`).
    """

    def problems(self, connection: Connection, inspector: Inspector, plan: AddKeyPlan) -> list[str]:
        """The offline refusals, and: no ordering columns, no server default."""
        found = super().problems(connection, inspector, plan)
        plan.handle_column = None  # (found by the ordering columns instead)
        if not plan.order_columns:
            found.append(
                "online=True on MariaDB needs the rows' order from unique_key= or order_by=:"
                " the physical order is numbered by a table rebuild, which would block the"
                " application (or add the key offline)"
            )
        if not plan.options.server_default:
            found.append(
                "online=True needs server_default=True: rows the application inserts"
                " meanwhile get their key from it"
            )
        # The indexes from the catalog: SQLAlchemy's reflection of MariaDB keeps
        # a backtick in a name doubled (``se``q``), as SHOW CREATE TABLE quotes it.
        indexes: dict[str, tuple[list[str], bool]] = {}
        for index, column, non_unique in connection.execute(
            sa.text(
                "SELECT INDEX_NAME, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS"
                " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t"
                " ORDER BY INDEX_NAME, SEQ_IN_INDEX"
            ),
            {"t": plan.table},
        ).all():
            indexes.setdefault(str(index), ([], not int(non_unique)))[0].append(str(column))
        return found + unindexed_order(
            list(indexes.values()),
            plan,
            "ALTER TABLE {table} ADD INDEX ({columns}), ALGORITHM=INPLACE, LOCK=NONE",
        )

    def reached(self, connection: Connection, plan: AddKeyPlan) -> str:
        """From the catalog: no column, ``"nothing"``; the column without the
        primary key, ``"added"``; the primary key there, ``"keyed"``."""
        if plan.column not in _columns(connection, plan.table):
            return "nothing"
        return "keyed" if _has_primary_key(connection, plan.table) else "added"

    def start(self, connection: Connection, plan: AddKeyPlan) -> list[sa.ColumnElement[Any]]:
        """The column, the trigger keying new rows, the ``UPDATE`` triggers guarded
        (each skipped when a killed run did it); the handle: the ordering columns."""
        # MariaDB allows no stored function in DEFAULT: a placeholder the trigger replaces.
        table, column = install_default(connection, plan)
        _step(
            connection,
            plan,
            f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {plan.key_type_sql} NULL,"
            " LOCK=NONE",
        )
        for sql in uuid7_column_trigger_sql(connection.dialect, table, column):
            _step(connection, plan, sql)  # (CREATE TRIGGER IF NOT EXISTS)
        _guards(connection, plan, guards.guard_statements)
        return [sa.column(c) for c in plan.order_columns]

    @contextmanager
    def quiet(self, connection: Connection, plan: AddKeyPlan) -> Iterator[None]:
        """The fill's session marked as the migration's: the guarded ``UPDATE``
        triggers do not fire for it (they do for the application's sessions)."""
        query_sql(connection, f"SET {guards.VARIABLE} = 1")
        try:
            yield
        finally:
            query_sql(connection, f"SET {guards.VARIABLE} = NULL")

    def write_batch(
        self,
        connection: Connection,
        plan: AddKeyPlan,
        update: sa.Update,
        params: list[dict[str, Any]],
    ) -> None:
        """An ``UPDATE`` per row, found by its ordering columns, only while it has no
        key (the application's new rows have theirs); ``ON UPDATE CURRENT_TIMESTAMP``
        columns assigned to themselves."""
        kept = preserved_columns(connection, plan.table)
        names = dict.fromkeys([plan.column, *plan.order_columns, *kept])
        t = sa.table(plan.table, *map(sa.column, names))
        statement = (
            sa.update(t)
            .where(
                *(
                    t.c[c] == sa.bindparam(f"sqla_ids_h{i}")
                    for i, c in enumerate(plan.order_columns)
                )
            )
            .where(t.c[plan.column].is_(None))
            .values(
                {
                    plan.column: sa.bindparam("sqla_ids_key", type_=uuid_type()),
                    **{c: t.c[c] for c in kept},
                }
            )
        )
        connection.execute(statement, params)

    def finish(self, connection: Connection, plan: AddKeyPlan) -> None:
        """``NOT NULL`` and the primary key in one online rebuild (unless a killed
        run did it), the unique key dropped when asked; the triggers unguarded."""
        q = functools.partial(quoted, connection)
        column = q(plan.column)
        if not _has_primary_key(connection, plan.table):
            clauses = [
                f"MODIFY COLUMN {column} {plan.key_type_sql} NOT NULL DEFAULT {plan.default_sql}",
                f"ADD PRIMARY KEY ({column})",
            ]
            unique = plan.unique_key
            if unique is not None and not plan.options.keep_unique_key:
                clauses.append(f"DROP INDEX {q(unique.name)}")
            _step(connection, plan, f"ALTER TABLE {q(plan.table)} {', '.join(clauses)}, LOCK=NONE")
        _guards(connection, plan, guards.unguard_statements)

    def abandon(self, connection: Connection, plan: AddKeyPlan) -> None:
        """The ``UPDATE`` triggers unguarded, then what the offline run's abandon drops."""
        _guards(connection, plan, guards.unguard_statements)
        super().abandon(connection, plan)

    def undo(self, connection: Connection, plan: AddKeyPlan) -> None:
        """The ``UPDATE`` triggers unguarded (a run killed midway left them so), then
        the offline undo."""
        _guards(connection, plan, guards.unguard_statements)
        super().undo(connection, plan)


def _has_primary_key(connection: Connection, table: str) -> bool:
    return bool(
        connection.execute(
            sa.text(
                "SELECT COUNT(*) FROM information_schema.TABLE_CONSTRAINTS WHERE"
                " TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t AND CONSTRAINT_TYPE = 'PRIMARY KEY'"
            ),
            {"t": table},
        ).scalar()
    )


def _step(connection: Connection, plan: AddKeyPlan, sql: str) -> None:
    """:func:`~sqla_ids.migration.backends.add_key.online_step` with bounded
    metadata-lock waits (:class:`_BoundedWaits`)."""
    online_step(connection, _SESSIONS, plan, sql)


def _guards(
    connection: Connection,
    plan: AddKeyPlan,
    statements: Callable[[Connection, AddKeyPlan, dict[str, str]], list[Statement]],
) -> None:
    """Guard or unguard the application's ``UPDATE`` triggers, with the table
    locked meanwhile: each replacement moves its trigger to the end of the firing
    order until all are replaced, which no application statement may see
    (:mod:`~sqla_ids.migration.backends.mysql.guards`)."""
    if not plan.parked_triggers:
        return
    work = statements(connection, plan, guards.trigger_bodies(connection))
    if not work:
        return
    _step(connection, plan, f"LOCK TABLES {quoted(connection, plan.table)} WRITE")
    try:
        execute(connection, work)
    finally:
        query_sql(connection, "UNLOCK TABLES")
