"""PostgreSQL: adding a UUIDv7 primary key in place, in one transaction.

``ADD COLUMN`` without a default changes only the catalog; the fill updates
the rows found by their ``ctid``; ``SET NOT NULL`` and ``ADD PRIMARY KEY``
then scan the table once and build the index. Without ordering columns the
physical order is the ``ctid`` order of the rows still without a key: an
updated row's new version may land anywhere, but it has its key and is
skipped, while the rows still to do keep their ``ctid``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.types import UserDefinedType

from sqla_ids.dialects.sql import execute_sql, query_sql
from sqla_ids.migration.backends.add_key import (
    KeyAdder,
    autocommit,
    explicit_transaction,
    install_default,
    online_step,
    unindexed_order,
)
from sqla_ids.migration.backends.postgresql import writes
from sqla_ids.migration.backends.postgresql.online import (
    PostgreSQLOnline,
    application_update_triggers,
    quiet_trigger_refusals,
)
from sqla_ids.migration.backends.postgresql.reflect import index_valid, schema_of
from sqla_ids.migration.core.added_key import AddKeyPlan, UniqueKey, quoted
from sqla_ids.migration.core.mapping import RawType
from sqla_ids.migration.core.model import name_suffix
from sqla_ids.migration.core.progress import logger
from sqla_ids.migration.core.sql import literal
from sqla_ids.types.server_functions import install_uuid7_function, uuid7_column_default_sql


class Tid(UserDefinedType[Any]):
    """``tid``: the driver returns a row address as text; it is cast back when bound."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        """The type's SQL."""
        return "tid"

    def bind_expression(self, bindvalue: Any) -> Any:
        """``CAST(:value AS tid)``: the text the driver returned, as a row address."""
        return sa.cast(bindvalue, RawType("tid"))


class PostgreSQLKeyAdder(KeyAdder):
    """See the module docstring."""

    transactional = True

    def unique_key(self, connection: Connection, table: str, name: str) -> UniqueKey | str | None:
        """From ``pg_index`` (and ``pg_constraint`` for a constraint's index)."""
        row = connection.execute(
            sa.text(
                "SELECT ic.relname, con.oid IS NOT NULL AS is_constraint,"
                " CASE WHEN con.oid IS NOT NULL THEN pg_get_constraintdef(con.oid)"
                " ELSE pg_get_indexdef(i.indexrelid) END AS definition,"
                " pg_get_indexdef(i.indexrelid) AS index_definition,"
                " obj_description(con.oid, 'pg_constraint') AS constraint_comment,"
                " obj_description(i.indexrelid, 'pg_class') AS index_comment,"
                " i.indpred IS NOT NULL AS partial, 0 = ANY(i.indkey::int2[]) AS expression,"
                " ARRAY(SELECT a.attname FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(n, o)"
                "  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n"
                "  ORDER BY k.o) AS columns"
                " FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid"
                " LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.contype = 'u'"
                " WHERE i.indrelid = to_regclass(:table) AND i.indisunique AND NOT i.indisprimary"
                " AND coalesce(con.conname, ic.relname) = :name"
            ),
            {"table": quoted(connection, table), "name": name},
        ).first()
        if row is None:
            return None
        if row.partial or row.expression:
            return f"unique index {name} is {'partial' if row.partial else 'on an expression'}"
        kind = "constraint" if row.is_constraint else "index"
        # Comments are no part of a definition: given back after it, by name (a
        # constraint's index takes the constraint's name when it is made again).
        after = []
        if row.constraint_comment is not None:
            after.append(
                f"COMMENT ON CONSTRAINT {quoted(connection, name)} ON {quoted(connection, table)}"
                f" IS {literal(connection, row.constraint_comment)}"
            )
        if row.index_comment is not None:
            after.append(
                f"COMMENT ON INDEX {_qualified_index(connection, table, name)}"
                f" IS {literal(connection, row.index_comment)}"
            )
        return UniqueKey(
            name, list(row.columns), kind, row.definition, row.relname, row.index_definition, after
        )

    @contextmanager
    def quiet(self, connection: Connection, plan: AddKeyPlan) -> Iterator[None]:
        """The table's user triggers disabled during the fill, then enabled again
        exactly as they were (in the run's transaction: a failure rolls it all back)."""
        with writes.quiet(connection, plan.table):
            yield

    def start(self, connection: Connection, plan: AddKeyPlan) -> list[sa.ColumnElement[Any]]:
        """``ADD COLUMN`` (no default: no rewrite); the rows' handle is ``ctid``."""
        q = functools.partial(quoted, connection)
        execute_sql(
            connection,
            f"ALTER TABLE {q(plan.table)} ADD COLUMN {q(plan.column)} {plan.key_type_sql}",
        )
        return [sa.literal_column("ctid", Tid())]

    def finish(self, connection: Connection, plan: AddKeyPlan) -> None:
        """``SET NOT NULL`` and ``ADD PRIMARY KEY`` in one statement (one scan)."""
        q = functools.partial(quoted, connection)
        table, column = q(plan.table), q(plan.column)
        execute_sql(
            connection,
            f"ALTER TABLE {table} ALTER COLUMN {column} SET NOT NULL, ADD PRIMARY KEY ({column})",
        )
        if plan.options.server_default:
            install_uuid7_function(connection)
            plan.default_sql = uuid7_column_default_sql(connection.dialect)
            execute_sql(
                connection,
                f"ALTER TABLE {table} ALTER COLUMN {column} SET DEFAULT {plan.default_sql}",
            )
        unique = plan.unique_key
        if unique is not None and not plan.options.keep_unique_key:
            if unique.kind == "constraint":
                execute_sql(connection, f"ALTER TABLE {table} DROP CONSTRAINT {q(unique.name)}")
            else:
                # The index lives in the table's schema: regclass names it as it
                # must be written from here (quoted, schema-qualified if needed).
                index = connection.execute(
                    sa.text("SELECT to_regclass(:t)::oid::regclass::text"),
                    {"t": _qualified_index(connection, plan.table, unique.name)},
                ).scalar_one()
                execute_sql(connection, f"DROP INDEX {index}")

    def undo(self, connection: Connection, plan: AddKeyPlan) -> None:
        """``DROP COLUMN`` (its primary key and default go with it), then the
        dropped unique key recreated from its recorded definition."""
        q = functools.partial(quoted, connection)
        execute_sql(connection, f"ALTER TABLE {q(plan.table)} DROP COLUMN {q(plan.column)}")
        unique = plan.unique_key
        if unique is not None and not plan.options.keep_unique_key:
            _unique_key_back(connection, plan, unique, functools.partial(execute_sql, connection))


def _qualified_index(connection: Connection, table: str, index: str) -> str:
    """``schema.index`` of an index of ``table`` (an index shares its table's schema)."""
    return f"{schema_of(connection, table)}.{quoted(connection, index)}"


#: The online strategy, for its session settings (``lock_timeout``) and errors.
_SESSIONS = PostgreSQLOnline()

#: ``connection.info`` key: the online fill's batches run as a replica session.
_REPLICA = "sqla_ids_add_key_replica"


class PostgreSQLOnlineKeyAdder(PostgreSQLKeyAdder):
    """``online=True``: the key added while the application keeps writing.

    Each step commits on its own and takes its locks for a moment only, under
    ``lock_timeout`` (retried with backoff): ``ADD COLUMN`` (catalog only) and
    ``SET DEFAULT sqla_ids_uuid7()``, so every row inserted from then on has its
    key; the fill, one short transaction per batch, writing only rows still
    without a key (found again by the ordering columns when there are some, or
    by ``ctid``, which an application's ``UPDATE`` moves: such rows are swept
    by further passes); ``CREATE UNIQUE INDEX CONCURRENTLY``; ``NOT NULL``
    through a ``CHECK`` added ``NOT VALID`` then validated (no write is
    blocked while it reads the table), so ``SET NOT NULL`` needs no scan; the
    primary key made from the index (``USING INDEX``). A killed run continues
    from the catalog (:meth:`reached`).
    """

    transactional = False

    def problems(self, connection: Connection, inspector: Any, plan: AddKeyPlan) -> list[str]:
        """A partitioned table (no concurrent index build on it) and a run without
        the server default (rows inserted meanwhile would have no key)."""
        from sqla_ids.migration.backends.postgresql.partitions import is_partitioned

        found = []
        if is_partitioned(connection, plan.table):
            found.append(
                "it is partitioned, and PostgreSQL builds no index concurrently on a"
                " partitioned table; add the key offline (online=False)"
            )
        if not plan.options.server_default:
            found.append(
                "online=True needs server_default=True: rows the application inserts"
                " meanwhile get their key from it"
            )
        return (
            found
            + unindexed_order(
                [
                    (list(index.get("column_names") or []), bool(index.get("unique")))
                    for index in inspector.get_indexes(plan.table)
                    # (partial: not every row is in it)
                    if index.get("dialect_options", {}).get("postgresql_where") is None
                ],
                plan,
                "CREATE INDEX CONCURRENTLY ON {table} ({columns})",
            )
            + quiet_trigger_refusals(connection, [plan.table])
        )

    def reached(self, connection: Connection, plan: AddKeyPlan) -> str:
        """From the catalog: no column, ``"nothing"``; the column without the
        primary key, ``"added"``; the primary key there, ``"keyed"``."""
        q = functools.partial(quoted, connection)
        column, primary = connection.execute(
            sa.text(
                "SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass(:t)"
                " AND attname = :c AND NOT attisdropped),"
                " EXISTS (SELECT FROM pg_constraint WHERE conrelid = to_regclass(:t)"
                " AND contype = 'p')"
            ),
            {"t": q(plan.table), "c": plan.column},
        ).one()
        return "keyed" if primary else "added" if column else "nothing"

    def start(self, connection: Connection, plan: AddKeyPlan) -> list[sa.ColumnElement[Any]]:
        """The column (if a killed run did not add it) and its default; the rows'
        handle: the ordering columns, else ``ctid``."""
        table, column = install_default(connection, plan)
        _step(
            connection,
            plan,
            f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {plan.key_type_sql}",
        )
        # Separately: a volatile DEFAULT given with ADD COLUMN would be computed for
        # every existing row (a rewrite under an exclusive lock).
        _step(
            connection,
            plan,
            f"ALTER TABLE {table} ALTER COLUMN {column} SET DEFAULT {plan.default_sql}",
        )
        if plan.order_columns:
            return [sa.column(c) for c in plan.order_columns]
        return [sa.literal_column("ctid", Tid())]

    @contextmanager
    def quiet(self, connection: Connection, plan: AddKeyPlan) -> Iterator[None]:
        """The application needs its ``UPDATE`` triggers meanwhile: the fill's
        batches run as a replica session instead, where they do not fire
        (:meth:`batch`) -- when the table has any (the role may set it: checked
        by :meth:`problems`)."""
        connection.info[_REPLICA] = bool(application_update_triggers(connection, plan.table))
        try:
            yield
        finally:
            connection.info.pop(_REPLICA, None)

    @contextmanager
    def batch(self, connection: Connection) -> Iterator[None]:
        """One short transaction per batch (its row locks held that long only)."""
        with explicit_transaction(connection):
            if connection.info.get(_REPLICA):
                query_sql(
                    connection, "SELECT set_config('session_replication_role', 'replica', true)"
                )
            yield

    def write_batch(
        self,
        connection: Connection,
        plan: AddKeyPlan,
        update: sa.Update,
        params: list[dict[str, Any]],
    ) -> None:
        """Only rows still without a key: one the application inserted meanwhile
        has its own."""
        connection.execute(update.where(sa.column(plan.column).is_(None)), params)

    def finish(self, connection: Connection, plan: AddKeyPlan) -> None:
        """The unique index built concurrently, ``NOT NULL`` proven by a validated
        check, then the primary key from the index (see the class docstring).
        Each step is skipped when a killed run did it already."""
        q = functools.partial(quoted, connection)
        table, column = q(plan.table), q(plan.column)
        index, check = _online_names(plan)
        if self.reached(connection, plan) != "keyed":
            _unique_index(connection, plan, index)
            _step(
                connection,
                plan,
                f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {q(check)},"
                f" ADD CONSTRAINT {q(check)} CHECK ({column} IS NOT NULL) NOT VALID",
            )
            # Reads the table under a lock that lets the application write.
            _step(connection, plan, f"ALTER TABLE {table} VALIDATE CONSTRAINT {q(check)}")
            _step(
                connection,
                plan,
                f"ALTER TABLE {table} ALTER COLUMN {column} SET NOT NULL,"
                f" ADD CONSTRAINT {q(_primary_key_name(plan))} PRIMARY KEY USING INDEX {q(index)}",
            )
        # (Apart: dropped in the same statement, the check would be gone before
        # SET NOT NULL looks for it, which would then scan the table locked.)
        _step(connection, plan, f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {q(check)}")
        unique = plan.unique_key
        if unique is not None and not plan.options.keep_unique_key:
            if unique.kind == "constraint":
                _step(
                    connection,
                    plan,
                    f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {q(unique.name)}",
                )
            else:
                qualified = _qualified_index(connection, plan.table, unique.name)
                _concurrently(connection, f"DROP INDEX CONCURRENTLY IF EXISTS {qualified}")

    def undo(self, connection: Connection, plan: AddKeyPlan) -> None:
        """What :meth:`abandon` does -- for a finished run, or one killed midway --
        then the unique key put back if :meth:`finish` dropped it: on a
        connection in autocommit mode without blocking writes
        (:func:`_unique_key_back`); in the caller's transaction (Alembic's) its
        index is built under the table's lock, as offline."""
        self.abandon(connection, plan)
        unique = plan.unique_key
        if unique is None or plan.options.keep_unique_key:
            return
        run = functools.partial(_step, connection, plan)
        concurrently = autocommit(connection)
        _unique_key_back(connection, plan, unique, run, concurrently)

    def abandon(self, connection: Connection, plan: AddKeyPlan) -> None:
        """Drop what a failed run added: the column (its default, index and check go
        with it)."""
        q = functools.partial(quoted, connection)
        index, _check = _online_names(plan)
        qualified = _qualified_index(connection, plan.table, index)
        if connection.execute(
            sa.text("SELECT to_regclass(:i) IS NOT NULL"), {"i": qualified}
        ).scalar_one():  # (a run stopped between the index build and the primary key)
            if autocommit(connection):
                _concurrently(connection, f"DROP INDEX CONCURRENTLY {qualified}")
            else:
                _step(connection, plan, f"DROP INDEX {qualified}")
        _step(
            connection, plan, f"ALTER TABLE {q(plan.table)} DROP COLUMN IF EXISTS {q(plan.column)}"
        )


def _unique_index(connection: Connection, plan: AddKeyPlan, index: str) -> None:
    """The unique index on the key, built concurrently. A build that stopped (a
    kill, a cancel) left the index in the catalog, invalid: dropped, and built
    again."""
    qualified = _qualified_index(connection, plan.table, index)
    valid = index_valid(connection, qualified)
    if valid:
        return
    if valid is False:
        _concurrently(connection, f"DROP INDEX CONCURRENTLY IF EXISTS {qualified}")
    logger.info(
        "%s: building the unique index on %s concurrently (it waits for every"
        " transaction older than it in the database to end)",
        plan.table,
        plan.column,
    )
    q = functools.partial(quoted, connection)
    _concurrently(
        connection,
        f"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS {q(index)}"
        f" ON {q(plan.table)} ({q(plan.column)})",
    )


def _unique_key_back(
    connection: Connection,
    plan: AddKeyPlan,
    unique: UniqueKey,
    run: Callable[[str], None],
    concurrently: bool = False,
) -> None:
    """The unique key ``finish`` dropped, back as it was: its index built from
    its own recorded definition (``pg_get_indexdef``: storage parameters,
    ``INCLUDE``, ``NULLS NOT DISTINCT``, sort orders -- ``pg_get_constraintdef``
    leaves the storage parameters out), then, for a constraint, the constraint
    made from that index (``ADD CONSTRAINT ... UNIQUE USING INDEX``: the catalog
    only); then its comments. ``concurrently`` (an online undo on a
    connection in autocommit mode): the index built ``CONCURRENTLY`` (dropped
    first if a stopped build left it invalid), no write waiting for the build
    -- where ``ADD CONSTRAINT ... UNIQUE (...)`` would build it holding the
    table's ``ACCESS EXCLUSIVE`` lock. ``run``: how the other statements run. A
    record written before the index definitions were kept: the key's own
    definition, as then."""
    q = functools.partial(quoted, connection)
    constraint = unique.kind == "constraint"
    if constraint and _has_constraint(connection, plan.table, unique.name):
        return  # (a run killed before it dropped it, or a drop stopped after)
    if constraint and not unique.index_definition:
        run(f"ALTER TABLE {q(plan.table)} ADD CONSTRAINT {q(unique.name)} {unique.definition}")
    else:
        index = unique.index if constraint else unique.name
        definition = unique.index_definition if constraint else unique.definition
        qualified = _qualified_index(connection, plan.table, index)
        valid = index_valid(connection, qualified)
        if concurrently:
            if valid is False:
                _concurrently(connection, f"DROP INDEX CONCURRENTLY {qualified}")
            if not valid:
                # pg_get_indexdef's own text: "CREATE UNIQUE INDEX <name> ON ..."
                head = "CREATE UNIQUE INDEX "
                _concurrently(connection, f"{head}CONCURRENTLY {definition.removeprefix(head)}")
        elif not valid:
            if valid is False:
                run(f"DROP INDEX {qualified}")
            run(definition)
        if constraint:
            # pg_get_constraintdef ends with what the index cannot carry.
            deferrable = re.search(r"( DEFERRABLE)?( INITIALLY DEFERRED)?$", unique.definition)
            run(
                f"ALTER TABLE {q(plan.table)} ADD CONSTRAINT {q(unique.name)}"
                f" UNIQUE USING INDEX {q(index)}{deferrable.group(0) if deferrable else ''}"
            )
    for statement in unique.after:
        run(statement)


def _has_constraint(connection: Connection, table: str, name: str) -> bool:
    return bool(
        connection.execute(
            sa.text(
                "SELECT EXISTS (SELECT FROM pg_constraint"
                " WHERE conrelid = to_regclass(:t) AND conname = :n)"
            ),
            {"t": quoted(connection, table), "n": name},
        ).scalar_one()
    )


def _concurrently(connection: Connection, sql: str) -> None:
    """``CREATE``/``DROP INDEX CONCURRENTLY``, with no lock timeout.

    Such a statement only takes locks that the application's reads and writes
    do not conflict with (nothing of theirs queues behind it), then waits for
    transactions to end -- a ``CREATE``, for every one older than it anywhere
    in the database (a report, a batch job): a wait that blocks nobody. Under
    the run's short lock timeout each such wait failed the build, which left
    an invalid index to drop and build again from a full scan of the table.
    The primary-key migration builds its indexes the same way.
    """
    _SESSIONS.set_lock_timeout(connection, 0, local=False)
    execute_sql(connection, sql)


def _online_names(plan: AddKeyPlan) -> tuple[str, str]:
    """The online run's unique index (which becomes the primary key) and its
    ``NOT NULL`` check, named after the table (a re-run finds them)."""
    suffix = name_suffix(plan.table)
    return f"sqla_ids_pk_{suffix}", f"sqla_ids_nn_{suffix}"


def _primary_key_name(plan: AddKeyPlan) -> str:
    """``<table>_pkey``, the name ``ADD PRIMARY KEY`` gives offline; the index's
    own when that is longer than PostgreSQL's 63 bytes."""
    name = f"{plan.table}_pkey"
    return name if len(name.encode()) <= 63 else _online_names(plan)[0]


def _step(connection: Connection, plan: AddKeyPlan, sql: str) -> None:
    """:func:`~sqla_ids.migration.backends.add_key.online_step` with PostgreSQL's
    ``lock_timeout`` (at most half its ``deadlock_timeout``)."""
    online_step(connection, _SESSIONS, plan, sql)
