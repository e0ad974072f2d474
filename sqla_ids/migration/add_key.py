"""Adding a UUIDv7 primary key to a table that has none, and taking it away again.

For logs, imports, link tables without a primary key and tables whose "key"
is a unique constraint: :func:`add_uuid7_key` adds a UUIDv7 column (default
``id``), fills it in the order you choose -- an existing unique key, ordering
columns, a timestamp column (the keys carry its times) or the physical order
-- in batches, and makes it the primary key; :func:`drop_uuid7_key` undoes it,
putting back what was there. The plan is reflected and checked before
anything changes (a table with a primary key, a column name taken, ``NULL``
or duplicate values in the ordering columns are refused by name), and
recorded, so the downgrade restores exactly what the upgrade replaced.

Offline by default: writers paused (the checks compare row counts). With
``online=True`` (PostgreSQL, MariaDB) the application keeps writing: every step is short
and under ``lock_timeout`` (the backend's ``online_key_adder``).
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.errors import MigrationRefusedError, MigrationVerificationError
from sqla_ids.migration.backends import (
    MigrationBackend,
    backend_for,
)
from sqla_ids.migration.backends.add_key import KeyAdder
from sqla_ids.migration.core.added_key import (
    DONE,
    STARTED,
    AddKeyOptions,
    AddKeyPlan,
    build_add_key_options,
    fill_keys,
    filled_so_far,
    forget_record,
    load_record,
    refuse_add,
    save_record,
)
from sqla_ids.migration.core.mapping import uuid_type
from sqla_ids.migration.core.model import Work
from sqla_ids.migration.core.progress import logger
from sqla_ids.migration.core.reflected import inspect
from sqla_ids.migration.core.sql import count
from sqla_ids.migration.offline import bounded_transactions

__all__ = ["AddKeyOptions", "AddKeyPlan", "add_uuid7_key", "drop_uuid7_key", "plan_add_uuid7_key"]


def _online_refusal(backend: MigrationBackend) -> str:
    label = backend.database.label if backend.database is not None else "this database"
    return (
        f"online=True is not available on {label}: the key is added there with writers"
        " paused (SQLite: one writer at a time anyway); run it offline"
    )


def key_adder_for(backend: MigrationBackend, online: bool = False) -> KeyAdder:
    """The :class:`KeyAdder` of ``backend``'s database (its ``key_adder``, or with
    ``online`` its ``online_key_adder``)."""
    adder = backend.online_key_adder if online else backend.key_adder
    if adder is None and online and backend.key_adder is not None:
        raise MigrationRefusedError(_online_refusal(backend) + "; nothing was changed")
    if adder is None:
        raise MigrationRefusedError(
            f"adding a UUIDv7 key is not supported by {type(backend).__name__}; nothing was changed"
        )
    return adder


def plan_add_uuid7_key(
    connection: Connection,
    table: str,
    options: AddKeyOptions | None = None,
    **overrides: Any,
) -> AddKeyPlan:
    """Reflect ``table`` and check that a UUIDv7 key can be added as ``options`` say.

    Raises :class:`~sqla_ids.errors.MigrationRefusedError` naming every problem
    (a primary key already there, the column name taken, ``NULL`` or duplicate
    values in the ordering columns...) before anything changes.
    """
    opts = build_add_key_options(options, overrides)
    backend = backend_for(connection)
    return _plan(connection, backend, key_adder_for(backend, opts.online), table, opts)


def _plan(
    connection: Connection,
    backend: MigrationBackend,
    adder: KeyAdder,
    table: str,
    opts: AddKeyOptions,
) -> AddKeyPlan:
    inspector = inspect(connection)
    if table not in inspector.get_table_names():
        raise refuse_add("the table does not exist", table)
    pk_name, pk_columns = backend.reflect.primary_key(connection, inspector, table)
    if pk_columns:
        raise refuse_add(
            f"it already has a primary key{f' {pk_name}' if pk_name else ''}"
            f" ({', '.join(pk_columns)}); migrate_pk_to_uuid7 changes an existing key",
            table,
        )
    if load_record(connection, table) is not None:
        raise refuse_add("a UUIDv7 key added earlier is still recorded for it", table)
    columns = backend.reflect.columns(connection, inspector, table)
    problems: list[str] = []
    if opts.column in columns:
        problems.append(f"column {table}.{opts.column} already exists; choose column=")
    if backend.reflect.identifier_limit(opts.column) is not None:
        problems.append(f"column name {opts.column!r} is longer than the database allows")
    unique = None
    order = list(opts.order_by)
    if opts.unique_key is not None:
        found = adder.unique_key(connection, table, opts.unique_key)
        if found is None:
            problems.append(f"there is no unique constraint or unique index {opts.unique_key!r}")
        elif isinstance(found, str):
            problems.append(f"{found}: it cannot order every row")
        else:
            unique, order = found, found.columns
    elif not order and opts.timestamp_column is not None:
        order = [opts.timestamp_column]
    missing = [c for c in [*order, opts.timestamp_column] if c is not None and c not in columns]
    problems += [f"column {table}.{c} does not exist" for c in dict.fromkeys(missing)]
    ts = opts.timestamp_column
    declared = _declared_types(connection, table)
    if ts is not None and ts in columns and not isinstance(declared[ts], sa.Date | sa.DateTime):
        problems.append(
            f"timestamp column {table}.{ts} has type {declared[ts]}, not a date or timestamp"
        )
    if not missing:
        problems += _order_problems(connection, table, order)
    plan = AddKeyPlan(
        dialect=connection.dialect.name,
        table=table,
        column=opts.column,
        key_type_sql=str(uuid_type().compile(dialect=connection.dialect)),
        order_columns=order,
        timestamp_column=ts,
        row_count=count(connection, table),
        seed=opts.seed if opts.seed is not None else secrets.token_hex(16),
        base_time_ms=int(time.time() * 1000),
        options=opts,
        unique_key=unique,
    )
    problems += adder.problems(connection, inspector, plan)
    work = Work(online=opts.online, key_trigger=opts.server_default, mapping=False)
    problems += backend.reflect.missing_privileges(connection, [table], work)
    if problems:
        raise refuse_add("; ".join(problems), table)
    return plan


def _declared_types(connection: Connection, table: str) -> dict[str, sa.types.TypeEngine[Any]]:
    """SQLAlchemy's types of ``table``'s columns (the backends' reflection may give
    them as written). SQLAlchemy's MariaDB reflection leaves a name's backticks
    doubled (```a``b` -> ``a````b``); both spellings are keys."""
    types = {}
    for column in inspect(connection).get_columns(table):
        types[column["name"]] = types[column["name"].replace("``", "`")] = column["type"]
    return types


def _order_problems(connection: Connection, table: str, order: list[str]) -> list[str]:
    """``NULL`` or duplicate values in the ordering columns: the order (and the
    rows' handle on the way) would be ambiguous."""
    if not order:
        return []
    cols: list[sa.ColumnClause[Any]] = [sa.column(c) for c in order]
    source = sa.table(table, *cols)
    problems = []
    nulls = connection.execute(
        sa.select(*(sa.func.count() - sa.func.count(c) for c in cols)).select_from(source)
    ).one()
    for column, n in zip(order, nulls, strict=True):
        if n:
            problems.append(f"ordering column {table}.{column} holds {n} NULL value(s)")
    groups = (
        sa.select(*cols)
        .select_from(source)
        .where(*(c.is_not(None) for c in cols))
        .group_by(*cols)
        .having(sa.func.count() > 1)
        .subquery()
    )
    duplicated = connection.execute(sa.select(sa.func.count()).select_from(groups)).scalar_one()
    if duplicated:
        what = "column" if len(order) == 1 else "columns"
        problems.append(
            f"ordering {what} {table}.{', '.join(order)} hold{'s' if len(order) == 1 else ''}"
            f" {duplicated} duplicated value(s); order by more columns (order_by=) to make"
            " each row's place unique"
        )
    return problems


def add_uuid7_key(
    connection: Connection,
    table: str,
    options: AddKeyOptions | None = None,
    *,
    dry_run: bool = False,
    **overrides: Any,
) -> AddKeyPlan:
    """Add a UUIDv7 primary key to ``table``, which has none, and fill it.

    ``options`` (an :class:`~sqla_ids.migration.core.added_key.AddKeyOptions`)
    or its fields as keywords: ``column="id"``, the order (``unique_key=``,
    ``order_by=``, ``timestamp_column=``, or physical), ``keep_unique_key``,
    ``batch_size``, ``seed``, ``server_default``. Returns the plan; with
    ``dry_run=True`` nothing is changed. Everything is checked before the
    first change; at the end the rows are counted again and every key checked.
    """
    opts = build_add_key_options(options, overrides)
    backend = backend_for(connection)
    adder = key_adder_for(backend, opts.online)
    if opts.online and connection._trans_context_manager is not None:
        # (SQLAlchemy's own test for a ``begin()`` block: see refuse_transaction_block.)
        raise refuse_add(
            "online=True runs each step in a transaction of its own, and cannot inside"
            " a transaction block (engine.begin() or connection.begin()); pass a"
            " connection from engine.connect()",
            table,
        )
    adder.prepare(connection)  # SQLite: foreign-key pragma, before any read begins a transaction
    recorded = load_record(connection, table)
    resuming = recorded is not None and recorded.state == STARTED
    if recorded is not None and resuming:
        if recorded.options != opts:
            raise refuse_add(
                f"a run with other options ({recorded.options.to_dict()}) was interrupted;"
                " re-run it with the same options to finish it, or drop_uuid7_key to undo it",
                table,
            )
        plan = recorded
    else:
        plan = _plan(connection, backend, adder, table, opts)
    if dry_run:
        return plan
    logger.info("%s%s", "continue: " if resuming else "", plan.describe())
    declared = _declared_types(connection, table)
    ts_type = declared[plan.timestamp_column] if plan.timestamp_column else None
    with bounded_transactions(connection, adder.transactional):
        reached = adder.reached(connection, plan) if resuming else "nothing"
        if not adder.transactional and not resuming:
            # Recorded before the first change: a killed run is found by the next.
            save_record(connection, dataclasses.replace(plan, state=STARTED))
        try:
            if reached != "keyed":
                handle = adder.start(connection, plan)
                done, prev = filled_so_far(connection, plan) if reached == "added" else (0, -1)
                with adder.quiet(connection, plan):
                    filled = _fill(connection, plan, adder, handle, ts_type, done, prev)
                if filled != plan.row_count and not opts.online:
                    raise MigrationVerificationError(
                        f"{table}: {filled} rows got a key, {plan.row_count} were counted"
                    )
            adder.finish(connection, plan)
            _verify(connection, plan, online=opts.online)
            save_record(connection, dataclasses.replace(plan, state=DONE))
        except BaseException:
            # A kill runs no handler: the STARTED record stays for the next run.
            if not adder.transactional:
                adder.abandon(connection, plan)
                forget_record(connection, table)
            raise
    return plan


#: Online: passes over the rows still without a key (moved by the application's
#: updates while a pass walked them) before the run gives up.
_SWEEPS = 20


def _fill(
    connection: Connection,
    plan: AddKeyPlan,
    adder: KeyAdder,
    handle: list[sa.ColumnElement[Any]],
    ts_type: sa.types.TypeEngine[Any] | None,
    done: int,
    prev: int,
) -> int:
    """The batched fill (:func:`fill_keys`); online, passes again over the rows an
    application's ``UPDATE`` moved past the walk (PostgreSQL's ``ctid``, or
    changed ordering columns), until every row has a key. Their keys continue
    after the others', so they sort after them."""
    passes = _SWEEPS if plan.options.online else 1
    for _ in range(passes):
        done = fill_keys(
            connection,
            plan,
            handle,
            ts_type,
            lambda: adder.batch(connection),
            lambda update, params: adder.write_batch(connection, plan, update, params),
            done=done,
            prev=prev,
        )
        if not plan.options.online:
            return done
        left = count(connection, sa.table(plan.table), sa.column(plan.column).is_(None))
        if not left:
            return done
        logger.info("%s: %d rows moved while the fill walked them: another pass", plan.table, left)
        done, prev = filled_so_far(connection, plan)
    raise MigrationVerificationError(
        f"{plan.table}: rows still without a key after {passes} passes (the application"
        " keeps moving them); run add_uuid7_key again to continue"
    )


def _verify(connection: Connection, plan: AddKeyPlan, *, online: bool = False) -> None:
    """Each row with its own key -- as many rows as planned (offline; online the
    application inserts and deletes meanwhile)."""
    key: sa.ColumnClause[Any] = sa.column(plan.column)
    rows, keys, distinct = connection.execute(
        sa.select(sa.func.count(), sa.func.count(key), sa.func.count(sa.distinct(key))).select_from(
            sa.table(plan.table, key)
        )
    ).one()
    if online and rows == keys == distinct:
        return
    if not rows == keys == distinct == plan.row_count:
        raise MigrationVerificationError(
            f"{plan.table}: {plan.row_count} rows planned, {rows} found, {keys} with a key,"
            f" {distinct} distinct keys"
        )


def drop_uuid7_key(connection: Connection, table: str) -> AddKeyPlan:
    """Undo :func:`add_uuid7_key`: the key column goes, the unique key it replaced
    (``keep_unique_key=False``) comes back, and on SQLite the table is recreated
    from its original SQL. On MariaDB it also undoes a run killed midway (the
    columns, index and triggers it left, whichever there are). Refused, before
    any change, when nothing is recorded for ``table`` or another table's foreign
    key references the key."""
    backend = backend_for(connection)
    key_adder_for(backend).prepare(connection)
    plan = load_record(connection, table)
    if plan is None:
        raise MigrationRefusedError(
            f"cannot drop the UUIDv7 key of {table}: no add_uuid7_key of it is recorded;"
            " nothing was changed"
        )
    adder = key_adder_for(backend, plan.options.online)
    inspector = inspect(connection)
    there = plan.column in backend.reflect.columns(connection, inspector, table)
    if not there and plan.state == DONE:
        raise MigrationRefusedError(
            f"cannot drop the UUIDv7 key of {table}: column {plan.column} is gone;"
            " nothing was changed"
        )
    references = there and backend.reflect.find_references(
        connection, inspector, table, plan.column
    )
    if references:
        named = ", ".join(f"{r.table}.{r.column}" for r in references)
        raise MigrationRefusedError(
            f"cannot drop the UUIDv7 key {table}.{plan.column}: {named} reference it;"
            " drop those foreign keys first; nothing was changed"
        )
    # In the offline mode's transactions even for a key added online: the drop only
    # changes the catalog, and PostgreSQL's runs in the caller's transaction
    # (Alembic's, for a downgrade).
    with bounded_transactions(connection, key_adder_for(backend).transactional):
        rows = count(connection, table)
        adder.undo(connection, plan)
        after = count(connection, table)
        if after != rows:
            raise MigrationVerificationError(f"{table}: {rows} rows before, {after} after")
        forget_record(connection, table)
    return plan
