"""Adding a UUIDv7 primary key to a table that has none: options, plan, record, fill.

The data and the database-independent work of
:func:`sqla_ids.migration.add_key.add_uuid7_key`: the typed options
(:class:`AddKeyOptions`), the plan reflected before anything changes
(:class:`AddKeyPlan`, JSON-serialisable), the record that lets the downgrade
put back exactly what was there (:data:`RECORD_TABLE`), and the batched fill
of the new column (:func:`fill_keys`).

The keys are those of the key migration (:mod:`sqla_ids.migration.core.mapping`):
rows numbered in the chosen order, each key's (millisecond, counter) from
:func:`~sqla_ids.migration.core.mapping.key_numbers` -- the row's timestamp
kept from going back by a running maximum, ties taking the next counter
value -- and its other bits from :func:`~sqla_ids.migration.core.mapping.new_key`
(``sha256("<seed>:<position>")``). So the keys sort exactly like the chosen order.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import quote_name
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration.core.mapping import key_number, key_numbers, new_key, time_point, uuid_type
from sqla_ids.migration.core.model import ParkedTrigger
from sqla_ids.migration.core.progress import Progress
from sqla_ids.migration.core.reflected import create_table, inspect

#: :attr:`AddKeyPlan.state` of a finished run, and of one under way (or killed).
DONE, STARTED = "done", "started"

#: The record of every key added (one row per table): what the downgrade restores.
RECORD_TABLE = "sqla_ids_added_keys"

_record_metadata = sa.MetaData()
record_table = sa.Table(
    RECORD_TABLE,
    _record_metadata,
    sa.Column("table_name", sa.String(255), primary_key=True),
    sa.Column("plan", sa.Text, nullable=False),
)


def quoted(connection: Connection, name: str) -> str:
    """``name`` quoted for this database as the SQL text itself must read
    (:func:`~sqla_ids.migration.core.sql.quote_name`)."""
    return quote_name(connection.dialect, name)


def refuse_add(message: str, table: str) -> MigrationRefusedError:
    """The error raised before anything changes."""
    return MigrationRefusedError(
        f"cannot add a UUIDv7 key to {table}: {message}; nothing was changed"
    )


@dataclass(frozen=True)
class AddKeyOptions:
    """How to add a UUIDv7 primary key to a keyless table (every field is optional).

    ``column``: the new key column's name (default ``id``).
    The order the keys follow (at most one of ``unique_key`` and ``order_by``):
    ``unique_key``: the name of an existing unique constraint or unique index;
    the keys follow its columns' order. ``order_by``: a column name or a tuple
    of names whose values are unique and not ``NULL`` together. With neither,
    ``timestamp_column`` alone orders the rows; with none of the three, the
    physical order (PostgreSQL ``ctid``, SQLite ``rowid``, MariaDB the
    clustered index's order, i.e. the order of ``SELECT *``).
    ``timestamp_column``: a date/timestamp column whose values the keys carry
    (running maximum in the chosen order, as the key migration does); default:
    the time of the run for every row.
    ``keep_unique_key``: with ``unique_key``, ``False`` drops that unique key
    once the primary key exists (the downgrade recreates it); default: kept.
    ``batch_size``: rows per batch. ``seed``: makes the keys reproducible
    (default random, recorded). ``server_default``: new rows get their key on
    the server (PostgreSQL ``DEFAULT``, MariaDB a ``BEFORE INSERT`` trigger;
    SQLite has no server function, rows need keys from the application).
    ``online``: PostgreSQL and MariaDB (there with ``unique_key=`` or
    ``order_by=``): add the key while the application keeps writing (each step
    short, under ``lock_timeout``; docs/migration.md).
    ``lock_timeout``: online, seconds a step may wait for a lock before it
    gives up and tries again.
    """

    column: str = "id"
    unique_key: str | None = None
    order_by: tuple[str, ...] = ()
    timestamp_column: str | None = None
    keep_unique_key: bool = True
    batch_size: int = 10_000
    seed: str | None = None
    server_default: bool = True
    online: bool = False
    lock_timeout: float = 2.0

    def __post_init__(self) -> None:
        order = self.order_by
        if isinstance(order, str):
            order = (order,)
        object.__setattr__(self, "order_by", tuple(order))
        for name in ("column", "unique_key", "timestamp_column"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{name} must be a non-empty name, got {value!r}")
        if not all(isinstance(c, str) and c for c in self.order_by):
            raise ValueError(f"order_by takes column names, got {self.order_by!r}")
        if len(set(self.order_by)) != len(self.order_by):
            raise ValueError(f"order_by names a column twice: {self.order_by!r}")
        if self.unique_key is not None and self.order_by:
            raise ValueError(
                "give unique_key (the order of that key's columns) or order_by, not both"
            )
        if not self.keep_unique_key and self.unique_key is None:
            raise ValueError("keep_unique_key=False needs unique_key= (the key to drop)")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int):
            raise ValueError(f"batch_size must be a whole number, got {self.batch_size!r}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")
        if self.seed is not None and not isinstance(self.seed, str):
            object.__setattr__(self, "seed", str(self.seed))
        timeout = self.lock_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ValueError(f"lock_timeout must be a number of seconds > 0, got {timeout!r}")

    def to_dict(self) -> dict[str, Any]:
        """The fields that differ from the defaults (JSON-serialisable)."""
        default = AddKeyOptions()
        result: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value != getattr(default, f.name):
                result[f.name] = list(value) if isinstance(value, tuple) else value
        return result

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AddKeyOptions:
        """Rebuild options saved by :meth:`to_dict`."""
        values = dict(data)
        if "order_by" in values:
            values["order_by"] = tuple(values["order_by"])
        return cls(**values)


def build_add_key_options(
    options: AddKeyOptions | None, overrides: Mapping[str, Any]
) -> AddKeyOptions:
    """``options`` (or the defaults) with keyword ``overrides`` applied."""
    base = options if options is not None else AddKeyOptions()
    if not isinstance(base, AddKeyOptions):
        raise TypeError(f"options must be an AddKeyOptions, got {type(base).__name__}")
    try:
        return dataclasses.replace(base, **overrides) if overrides else base
    except TypeError as error:
        known = ", ".join(f.name for f in dataclasses.fields(AddKeyOptions))
        raise TypeError(f"{error} (known options: {known})") from None


@dataclass
class UniqueKey:
    """An existing unique constraint or unique index, as the database defines it.

    ``kind``: ``"constraint"`` or ``"index"``; ``definition``: what recreates
    it (PostgreSQL's ``pg_get_constraintdef``/``pg_get_indexdef``, SQLite's
    ``CREATE UNIQUE INDEX``; MariaDB: the key's line of ``SHOW CREATE TABLE``,
    or one made from its columns in a record written before). PostgreSQL also
    records the index behind a constraint (``index``, its name, and
    ``index_definition``, its ``pg_get_indexdef``): an online undo builds it
    ``CONCURRENTLY`` and makes the constraint from it (empty in a record
    written before they were). ``after``: the statements that give back what
    the definition does not carry, run once the key is back (PostgreSQL: the
    comments on the constraint and its index).
    """

    name: str
    columns: list[str]
    kind: str
    definition: str = ""
    index: str = ""
    index_definition: str = ""
    after: list[str] = field(default_factory=list)


@dataclass
class AddKeyPlan:
    """What :func:`~sqla_ids.migration.add_key.add_uuid7_key` does, reflected first.

    ``order_columns``: the ordering columns (empty: physical order);
    ``original_sql``: SQLite's ``CREATE`` statements of the table, its indexes
    and triggers, replayed verbatim by the downgrade; ``triggers``: MariaDB's
    ``BEFORE INSERT`` triggers filling new rows' keys; ``parked_triggers``:
    MariaDB's application ``UPDATE`` triggers, dropped while the fill writes and
    created again after (a killed run's re-run or drop puts them back); ``handle_column``:
    MariaDB's temporary numbering column, dropped at the end; ``state``:
    :data:`DONE`, or :data:`STARTED` while a run whose DDL commits on its own
    (MariaDB) is under way -- recorded before its first change, so a run killed
    in between is found by the next run (which continues it) or by the drop
    (which removes what it left).
    """

    dialect: str
    table: str
    column: str
    key_type_sql: str
    order_columns: list[str]
    timestamp_column: str | None
    row_count: int
    seed: str
    base_time_ms: int
    options: AddKeyOptions
    unique_key: UniqueKey | None = None
    original_sql: list[str] = field(default_factory=list)
    triggers: list[str] = field(default_factory=list)
    default_sql: str | None = None
    handle_column: str | None = None
    state: str = "done"
    parked_triggers: list[ParkedTrigger] = field(default_factory=list)

    @property
    def order_label(self) -> str:
        """The chosen order, for messages."""
        return ", ".join(self.order_columns) if self.order_columns else "physical order"

    def describe(self) -> str:
        """One line for logs and dry runs."""
        time = f"times from {self.timestamp_column}" if self.timestamp_column else "time of the run"
        return (
            f"add UUIDv7 key {self.table}.{self.column} ({self.row_count} rows, in"
            f" {self.order_label} order, {time})"
        )

    def to_json(self) -> str:
        """The plan as JSON (stored in :data:`RECORD_TABLE`)."""
        data = asdict(self)
        data["options"] = self.options.to_dict()
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> AddKeyPlan:
        """Rebuild a plan stored by :meth:`to_json`."""
        data = json.loads(text)
        data["options"] = AddKeyOptions.from_dict(data["options"])
        if data["unique_key"] is not None:
            data["unique_key"] = UniqueKey(**data["unique_key"])
        data["parked_triggers"] = [ParkedTrigger(**t) for t in data.get("parked_triggers", [])]
        return cls(**data)


def load_record(connection: Connection, table: str) -> AddKeyPlan | None:
    """The recorded plan of the key added to ``table``, if any."""
    if not inspect(connection).has_table(RECORD_TABLE):
        return None
    text = connection.execute(
        sa.select(record_table.c.plan).where(record_table.c.table_name == table)
    ).scalar()
    return None if text is None else AddKeyPlan.from_json(text)


def save_record(connection: Connection, plan: AddKeyPlan) -> None:
    """Record ``plan`` (creates the record table on first use)."""
    create_table(connection, record_table)
    connection.execute(sa.delete(record_table).where(record_table.c.table_name == plan.table))
    connection.execute(sa.insert(record_table).values(table_name=plan.table, plan=plan.to_json()))


def forget_record(connection: Connection, table: str) -> None:
    """Remove ``table``'s record; drop the record table once it is empty."""
    connection.execute(sa.delete(record_table).where(record_table.c.table_name == table))
    if not connection.execute(sa.select(sa.func.count()).select_from(record_table)).scalar():
        record_table.drop(connection)


def filled_so_far(connection: Connection, plan: AddKeyPlan) -> tuple[int, int]:
    """How far a killed run's fill got: the rows with a key, and the last key
    number given (``-1``: none). Each batch committed whole, in the chosen order,
    and the keys sort like it, so the greatest key is the last one given."""
    key: sa.ColumnClause[Any] = sa.column(plan.column, uuid_type())
    table = sa.table(plan.table, key)
    rows = connection.execute(sa.select(sa.func.count(key)).select_from(table)).scalar_one()
    # ORDER BY ... LIMIT 1, not max(): PostgreSQL has no max(uuid) before 18.
    greatest = connection.execute(
        sa.select(key).where(key.is_not(None)).order_by(key.desc()).limit(1)
    ).scalar()
    return rows, -1 if greatest is None else key_number(greatest)


def fill_keys(
    connection: Connection,
    plan: AddKeyPlan,
    handle: Sequence[sa.ColumnElement[Any]],
    timestamp_type: sa.types.TypeEngine[Any] | None,
    batch: Callable[[], AbstractContextManager[Any]] = nullcontext,
    write: Callable[[sa.Update, list[dict[str, Any]]], None] | None = None,
    *,
    done: int = 0,
    prev: int = -1,
) -> int:
    """Give every row its key, ``batch_size`` rows at a time, in the plan's order.

    ``handle``: the expressions that find one row for its ``UPDATE`` (the
    database's row address: ``ctid``, ``rowid``, a temporary numbered column);
    without ordering columns they are the order too. ``batch()`` wraps each
    batch's updates (MariaDB: one transaction each); ``write(update, params)``
    writes them (default: ``update`` executed for each of ``params``). Each batch reads the next
    rows still without a key after the last one read (keyset, never ``OFFSET``),
    computes their keys (:func:`~sqla_ids.migration.core.mapping.key_numbers`,
    continuing from the batch before) and updates them by their handle.
    ``done`` rows already filled (the first ones in the order, a killed run's
    committed batches) and ``prev``, the last of their key numbers, continue
    that run: the keys are those one run would have given.
    Returns the rows filled, ``done`` included.
    """
    key = sa.column(plan.column, uuid_type())
    order: list[sa.ColumnElement[Any]] = [sa.column(c) for c in plan.order_columns]
    selected: list[sa.ColumnElement[Any]] = [*order, *handle]
    if plan.timestamp_column is not None:
        selected.append(sa.column(plan.timestamp_column, timestamp_type))
    sort = order or list(handle)
    source = sa.table(plan.table, key)
    n_order, n_handle = len(sort), len(handle)
    update = (
        sa.update(source)
        .where(*(h == sa.bindparam(f"sqla_ids_h{i}") for i, h in enumerate(handle)))
        .values({plan.column: sa.bindparam("sqla_ids_key", type_=uuid_type())})
    )
    progress = Progress(f"{plan.table}: new keys", plan.row_count)
    progress.done = done
    last = None
    while True:
        query = (
            sa.select(*selected)
            .select_from(source)
            .where(key.is_(None))
            .order_by(*sort)
            .limit(plan.options.batch_size)
        )
        if last is not None:
            # Keyset: rows after the last one read, in the chosen order.
            query = query.where(
                sa.tuple_(*sort) > sa.tuple_(*last) if n_order > 1 else sort[0] > last[0]
            )
        rows = connection.execute(query).all()
        if not rows:
            return done
        if plan.timestamp_column is None:
            times: list[int | None] = [plan.base_time_ms] * len(rows)
        else:
            times = [time_point(row[-1]) for row in rows]
        params = []
        for n, (row, number) in enumerate(zip(rows, key_numbers(times, prev), strict=True)):
            handle_values = row[len(order) : len(order) + n_handle]
            entry: dict[str, Any] = {f"sqla_ids_h{i}": v for i, v in enumerate(handle_values)}
            entry["sqla_ids_key"] = new_key(number, plan.seed, done + n)
            params.append(entry)
        with batch():
            if write is None:
                connection.execute(update, params)
            else:
                write(update, params)
        prev = key_number(params[-1]["sqla_ids_key"])
        last = tuple(rows[-1][:n_order])  # the sort columns come first
        done += len(rows)
        progress.advance(len(rows))
