"""Alembic operations for ``FormattedOrderNumber`` columns and their sequences.

``op.add_order_number_column`` gives an existing table customer-facing
numbers. ``create_table`` already creates a ``FormattedOrderNumber``'s
sequence and CHECK constraint; adding the column to a table that has rows
needs more: create the sequence, number the existing rows in a chosen order
(oldest order gets the first number), then add the unique index and, where
the dialect can ``ALTER TABLE … ADD CONSTRAINT``, the CHECK constraint::

    op.add_order_number_column(
        "orders", "number", FormattedOrderNumber("shop", sequence="order_numbers"),
        order_by="created_at",
    )

The reverse, ``op.drop_order_number_column``, drops the column, its index and
constraint, and the sequence. Both need a live database (the numbers are
drawn from the sequence row by row), so offline ``--sql`` mode is refused
with a clear message.

``op.create_order_number_sequence(name)`` / ``op.drop_order_number_sequence(name)``
create and drop a sequence alone (a PostgreSQL/MariaDB ``SEQUENCE``, a row of
SQLite's counter table); ``table=``/``column=`` name what it numbers, which
the database keeps with the sequence. Autogenerate writes them next to
``op.create_table`` of a table with a ``FormattedOrderNumber(sequence=...)``
column and next to ``op.drop_table`` of such a table gone from the models,
so a sequence goes with its table and a table created again numbers from 1
(see :func:`compare_order_number_sequences`).

Every operation has a renderer and a ``reverse()`` that keeps all its
arguments. Importing this module registers the operations and the
autogenerate comparator.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import comparators, renderers
from alembic.autogenerate.api import AutogenContext
from alembic.operations import MigrateOperation, Operations, ops
from alembic.util import DispatchPriority, PriorityDispatchResult

from sqla_ids.alembic.render import import_operations, render_item
from sqla_ids.dialects import UnsupportedDialectError, for_dialect
from sqla_ids.dialects.order_number_owner import OrderNumberOwner, OwnedSequence
from sqla_ids.dialects.sql import quote_name, text_sql
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration.backends import backend_for
from sqla_ids.types.order_number import FormattedOrderNumber
from sqla_ids.types.order_number_ddl import order_number_check_name
from sqla_ids.types.order_number_sequence import OrderNumberSequence

__all__ = [
    "AddOrderNumberColumnOp",
    "CreateOrderNumberSequenceOp",
    "DropOrderNumberColumnOp",
    "DropOrderNumberSequenceOp",
    "compare_order_number_sequences",
    "order_number_index_name",
]

_BACKFILL_BATCH = 500

# A child of Alembic's logger: ``alembic revision --autogenerate`` shows it
# next to Alembic's own "Detected ..." lines.
logger = logging.getLogger("alembic.sqla_ids.order_numbers")


def order_number_index_name(table_name: str, column_name: str) -> str:
    """Name of the unique index ``op.add_order_number_column`` gives the column.

    >>> order_number_index_name("orders", "number")
    'uq_orders_number'
    """
    return f"uq_{table_name}_{column_name}"[:63]


def _sequence(type_: FormattedOrderNumber) -> OrderNumberSequence:
    sequence = type_.number_sequence
    assert sequence is not None  # checked by AddOrderNumberColumnOp
    return sequence


def _arguments(*pairs: tuple[str, Any, Any]) -> str:
    """``, name=value`` for each (name, value, default) whose value is not the default."""
    return "".join(f", {name}={value!r}" for name, value, default in pairs if value != default)


# --- add / drop a numbered column ------------------------------------------------------


@Operations.register_operation("add_order_number_column")
class AddOrderNumberColumnOp(MigrateOperation):
    """Add a ``FormattedOrderNumber`` column and number the existing rows.

    ``key_column`` identifies a row, ``order_by`` (default: ``key_column``)
    orders the numbering; ``schema`` is the table's schema, where the
    sequence is created too.
    """

    def __init__(
        self,
        table_name: str,
        column_name: str,
        type_: FormattedOrderNumber,
        *,
        key_column: str = "id",
        order_by: str | None = None,
        schema: str | None = None,
        nullable: bool = True,
    ) -> None:
        if not isinstance(type_, FormattedOrderNumber) or type_.sequence is None:
            raise ValueError(
                "add_order_number_column needs a FormattedOrderNumber with a sequence= name"
            )
        self.table_name = table_name
        self.column_name = column_name
        self.type_ = type_
        self.key_column = key_column
        self.order_by = order_by
        self.schema = schema
        self.nullable = nullable

    @classmethod
    def add_order_number_column(
        cls,
        operations: Operations,
        table_name: str,
        column_name: str,
        type_: FormattedOrderNumber,
        *,
        key_column: str = "id",
        order_by: str | None = None,
        schema: str | None = None,
        nullable: bool = True,
    ) -> Any:
        """Add ``column_name`` to ``table_name``; existing rows are numbered by ``order_by``.

        ``key_column`` (default ``"id"``) identifies a row; ``order_by``
        (default: the key) is the column whose order the numbers follow;
        ``schema`` is the table's schema (the sequence is created there);
        ``nullable=False`` makes the column ``NOT NULL`` once every row has
        its number.
        """
        return operations.invoke(
            cls(
                table_name,
                column_name,
                type_,
                key_column=key_column,
                order_by=order_by,
                schema=schema,
                nullable=nullable,
            )
        )

    def reverse(self) -> DropOrderNumberColumnOp:
        """The downgrade: drop the column, its constraints and its sequence."""
        return DropOrderNumberColumnOp(
            self.table_name,
            self.column_name,
            self.type_,
            self.schema,
            key_column=self.key_column,
            order_by=self.order_by,
            nullable=self.nullable,
        )

    def to_diff_tuple(self) -> tuple[Any, ...]:
        """For ``compare_metadata()`` and ``alembic check``."""
        return ("add_order_number_column", self.schema, self.table_name, self.column_name)


@Operations.register_operation("drop_order_number_column")
class DropOrderNumberColumnOp(MigrateOperation):
    """Drop a column added by ``add_order_number_column``, with its sequence.

    ``key_column`` and ``order_by`` are not needed to drop the column; they
    are kept so that :meth:`reverse` numbers the rows as the upgrade did.
    """

    def __init__(
        self,
        table_name: str,
        column_name: str,
        type_: FormattedOrderNumber,
        schema: str | None = None,
        *,
        key_column: str = "id",
        order_by: str | None = None,
        nullable: bool = True,
    ) -> None:
        if not isinstance(type_, FormattedOrderNumber) or type_.sequence is None:
            raise ValueError(
                "drop_order_number_column needs the FormattedOrderNumber (with its sequence= "
                "name) the column was added with"
            )
        self.table_name = table_name
        self.column_name = column_name
        self.type_ = type_
        self.schema = schema
        self.key_column = key_column
        self.order_by = order_by
        self.nullable = nullable

    @classmethod
    def drop_order_number_column(
        cls,
        operations: Operations,
        table_name: str,
        column_name: str,
        type_: FormattedOrderNumber,
        schema: str | None = None,
        *,
        key_column: str = "id",
        order_by: str | None = None,
        nullable: bool = True,
    ) -> Any:
        """Drop ``column_name`` and the sequence of ``type_``.

        ``key_column``, ``order_by`` and ``nullable`` only matter to the reverse
        operation.
        """
        return operations.invoke(
            cls(
                table_name,
                column_name,
                type_,
                schema,
                key_column=key_column,
                order_by=order_by,
                nullable=nullable,
            )
        )

    def reverse(self) -> AddOrderNumberColumnOp:
        """The upgrade again, numbering the rows the same way."""
        return AddOrderNumberColumnOp(
            self.table_name,
            self.column_name,
            self.type_,
            key_column=self.key_column,
            order_by=self.order_by,
            schema=self.schema,
            nullable=self.nullable,
        )

    def to_diff_tuple(self) -> tuple[Any, ...]:
        """For ``compare_metadata()`` and ``alembic check``."""
        return ("drop_order_number_column", self.schema, self.table_name, self.column_name)


# --- create / drop a sequence alone ----------------------------------------------------


def _owner(table: str | None, column: str | None) -> OrderNumberOwner | None:
    if table is None:
        if column is not None:
            raise ValueError("an order-number sequence's column= needs its table=")
        return None
    return OrderNumberOwner(table, column)


@Operations.register_operation("create_order_number_sequence")
class CreateOrderNumberSequenceOp(MigrateOperation):
    """Create the order-number sequence ``sequence_name`` (nothing if it exists).

    A ``SEQUENCE`` starting at 1 on PostgreSQL and MariaDB, a counter row
    at 0 in SQLite's ``sqla_ids_counters``. ``schema`` is the schema of the
    table whose column it numbers; ``table`` and ``column`` name them, and
    are added to the tables the sequence records (also on an existing
    sequence), so that autogenerate drops the sequence with its tables.
    """

    def __init__(
        self,
        sequence_name: str,
        *,
        schema: str | None = None,
        table: str | None = None,
        column: str | None = None,
    ) -> None:
        _owner(table, column)
        self.sequence_name = sequence_name
        self.schema = schema
        self.table = table
        self.column = column

    @classmethod
    def create_order_number_sequence(
        cls,
        operations: Operations,
        sequence_name: str,
        *,
        schema: str | None = None,
        table: str | None = None,
        column: str | None = None,
    ) -> Any:
        """Create the order-number sequence ``sequence_name`` in ``schema`` if missing.

        ``table``/``column``: what it numbers, added to the tables the
        sequence records (also on an existing sequence).
        """
        return operations.invoke(cls(sequence_name, schema=schema, table=table, column=column))

    def reverse(self) -> DropOrderNumberSequenceOp:
        """Dropping the sequence undoes this."""
        return DropOrderNumberSequenceOp(
            self.sequence_name, schema=self.schema, table=self.table, column=self.column
        )

    def to_diff_tuple(self) -> tuple[Any, ...]:
        """For ``compare_metadata()`` and ``alembic check``."""
        return ("add_order_number_sequence", self.schema, self.sequence_name)


@Operations.register_operation("drop_order_number_sequence")
class DropOrderNumberSequenceOp(MigrateOperation):
    """Drop the order-number sequence ``sequence_name`` if it exists.

    On SQLite its counter row goes (and the counter table once empty).
    ``table`` and ``column``, the table it numbered, are not needed to drop
    it: they are kept so that :meth:`reverse` records them again.
    """

    def __init__(
        self,
        sequence_name: str,
        *,
        schema: str | None = None,
        table: str | None = None,
        column: str | None = None,
    ) -> None:
        _owner(table, column)
        self.sequence_name = sequence_name
        self.schema = schema
        self.table = table
        self.column = column

    @classmethod
    def drop_order_number_sequence(
        cls,
        operations: Operations,
        sequence_name: str,
        *,
        schema: str | None = None,
        table: str | None = None,
        column: str | None = None,
    ) -> Any:
        """Drop the order-number sequence ``sequence_name`` in ``schema`` if it exists.

        ``table``/``column`` only matter to the reverse operation.
        """
        return operations.invoke(cls(sequence_name, schema=schema, table=table, column=column))

    def reverse(self) -> CreateOrderNumberSequenceOp:
        """Creating the sequence again (numbering from 1) undoes this."""
        return CreateOrderNumberSequenceOp(
            self.sequence_name, schema=self.schema, table=self.table, column=self.column
        )

    def to_diff_tuple(self) -> tuple[Any, ...]:
        """For ``compare_metadata()`` and ``alembic check``."""
        return ("remove_order_number_sequence", self.schema, self.sequence_name)


# --- implementations -------------------------------------------------------------------


def _live_connection(operations: Operations, name: str) -> sa.Connection:
    if operations.get_context().as_sql:
        raise MigrationRefusedError(
            f"op.{name} cannot run in offline --sql mode: existing rows are numbered from the "
            "database sequence one by one; run this migration online"
        )
    return operations.get_bind()


def _sequence_bind(operations: Operations, name: str) -> sa.Connection:
    """The connection to create/drop a sequence with (Alembic's SQL printer in ``--sql`` mode)."""
    bind = operations.get_bind()
    if operations.get_context().as_sql and bind.dialect.name == "sqlite":
        raise MigrationRefusedError(
            f"op.{name} cannot run in offline --sql mode on SQLite: its sequences are rows of "
            "the counter table sqla_ids_counters, maintained by statements that depend on "
            "what the table holds; run this migration online"
        )
    return bind


def _quiet_writes(
    connection: sa.Connection, table: str, schema: str | None
) -> AbstractContextManager[tuple[str, ...]]:
    """The migration backend's :meth:`~sqla_ids.migration.backends.base.RowWrites.quiet`;
    on a database without one (CockroachDB, YugabyteDB: no key migration), the
    rows are written plainly, as before."""
    try:
        backend = backend_for(connection)
    except UnsupportedDialectError:
        return nullcontext(())
    return backend.writes.quiet(connection, table, schema)


@Operations.implementation_for(AddOrderNumberColumnOp)
def add_order_number_column(operations: Operations, operation: AddOrderNumberColumnOp) -> None:
    """Create the sequence, add and fill the column, then constrain it."""
    connection = _live_connection(operations, "add_order_number_column")
    type_ = operation.type_
    sequence = _sequence(type_)
    schema = operation.schema
    dialect = for_dialect(connection.dialect)
    order_by = operation.order_by or operation.key_column
    table = sa.table(
        operation.table_name,
        sa.column(operation.key_column),
        sa.column(order_by),
        sa.column(operation.column_name),
        schema=schema,
    )
    # The numbering writes every row, which is no application update: the table's
    # UPDATE triggers are kept quiet (before the first change: a refusal changes
    # nothing), MariaDB's ON UPDATE CURRENT_TIMESTAMP columns keep their values.
    with _quiet_writes(connection, operation.table_name, schema) as kept:
        # Plain string storage: the type's CHECK and default are added below.
        operations.add_column(
            operation.table_name,
            sa.Column(
                operation.column_name,
                sa.String(type_.order_numbers.format.max_length),
                nullable=True,
            ),
            schema=schema,
        )
        sequence.create(
            connection, schema, OrderNumberOwner(operation.table_name, operation.column_name)
        )
        keys = (
            connection.execute(
                sa.select(table.c[operation.key_column]).order_by(
                    table.c[order_by], table.c[operation.key_column]
                )
            )
            .scalars()
            .all()
        )
        written = sa.table(
            operation.table_name,
            *map(sa.column, dict.fromkeys([operation.key_column, operation.column_name, *kept])),
            schema=schema,
        )
        update = (
            written.update()
            .where(written.c[operation.key_column] == sa.bindparam("_key"))
            .values(
                {
                    operation.column_name: sa.bindparam("_number"),
                    **{c: written.c[c] for c in kept},  # (they keep their values)
                }
            )
        )
        for start in range(0, len(keys), _BACKFILL_BATCH):
            chunk = keys[start : start + _BACKFILL_BATCH]
            # Numbers come from the sequence in the table's schema, where it was created.
            connection.execute(
                update,
                [
                    {"_key": key, "_number": sequence.next_number(connection, schema)}
                    for key in chunk
                ],
            )
    operations.create_index(
        order_number_index_name(operation.table_name, operation.column_name),
        operation.table_name,
        [operation.column_name],
        unique=True,
        schema=schema,
    )
    if dialect.alter_table_add_check:
        # The name as the database reads it, in text() that escapes what it must for
        # its driver (SQLAlchemy's preparer doubles a "%" itself; text() again).
        quoted = quote_name(connection.dialect, operation.column_name)
        condition = dialect.order_number_format_check(quoted, type_.order_numbers.format)
        operations.create_check_constraint(
            order_number_check_name(operation.table_name, operation.column_name),
            operation.table_name,
            text_sql(connection.dialect, condition),
            schema=schema,
        )
    if not operation.nullable:
        # Every row has its number now. SQLite cannot alter a column: batch mode
        # rebuilds the table there (copying the numbers), and alters in place elsewhere.
        with operations.batch_alter_table(operation.table_name, schema=schema) as batch:
            batch.alter_column(
                operation.column_name,
                existing_type=sa.String(type_.order_numbers.format.max_length),
                nullable=False,
            )


@Operations.implementation_for(DropOrderNumberColumnOp)
def drop_order_number_column(operations: Operations, operation: DropOrderNumberColumnOp) -> None:
    """Drop the column with its index and CHECK, then its sequence."""
    connection = _live_connection(operations, "drop_order_number_column")
    check_name = order_number_check_name(operation.table_name, operation.column_name)
    inspector = sa.inspect(connection)
    checks = {
        c["name"] for c in inspector.get_check_constraints(operation.table_name, operation.schema)
    }
    if check_name in checks and for_dialect(connection.dialect).alter_table_add_check:
        operations.drop_constraint(
            check_name, operation.table_name, type_="check", schema=operation.schema
        )
    operations.drop_index(
        order_number_index_name(operation.table_name, operation.column_name),
        operation.table_name,
        schema=operation.schema,
    )
    operations.drop_column(operation.table_name, operation.column_name, schema=operation.schema)
    _sequence(operation.type_).drop(connection, operation.schema)


@Operations.implementation_for(CreateOrderNumberSequenceOp)
def create_order_number_sequence(
    operations: Operations, operation: CreateOrderNumberSequenceOp
) -> None:
    """``CREATE SEQUENCE IF NOT EXISTS`` (SQLite: insert the counter row)."""
    bind = _sequence_bind(operations, "create_order_number_sequence")
    for_dialect(bind.dialect).order_number_create_sequence(
        bind, operation.sequence_name, operation.schema, _owner(operation.table, operation.column)
    )


@Operations.implementation_for(DropOrderNumberSequenceOp)
def drop_order_number_sequence(
    operations: Operations, operation: DropOrderNumberSequenceOp
) -> None:
    """``DROP SEQUENCE IF EXISTS`` (SQLite: delete the counter row)."""
    bind = _sequence_bind(operations, "drop_order_number_sequence")
    for_dialect(bind.dialect).order_number_drop_sequence(
        bind, operation.sequence_name, operation.schema
    )


# --- renderers -------------------------------------------------------------------------


def _render_type(autogen_context: AutogenContext, type_: FormattedOrderNumber) -> str:
    rendered = render_item("type", type_, autogen_context)
    assert isinstance(rendered, str)
    return rendered


@renderers.dispatch_for(AddOrderNumberColumnOp)
def _render_add_column(autogen_context: AutogenContext, op: AddOrderNumberColumnOp) -> str:
    import_operations(autogen_context)
    return (
        f"op.add_order_number_column({op.table_name!r}, {op.column_name!r}, "
        f"{_render_type(autogen_context, op.type_)}"
        + _arguments(
            ("key_column", op.key_column, "id"),
            ("order_by", op.order_by, None),
            ("schema", op.schema, None),
            ("nullable", op.nullable, True),
        )
        + ")"
    )


@renderers.dispatch_for(DropOrderNumberColumnOp)
def _render_drop_column(autogen_context: AutogenContext, op: DropOrderNumberColumnOp) -> str:
    import_operations(autogen_context)
    return (
        f"op.drop_order_number_column({op.table_name!r}, {op.column_name!r}, "
        f"{_render_type(autogen_context, op.type_)}"
        + _arguments(
            ("schema", op.schema, None),
            ("key_column", op.key_column, "id"),
            ("order_by", op.order_by, None),
            ("nullable", op.nullable, True),
        )
        + ")"
    )


def _sequence_arguments(op: CreateOrderNumberSequenceOp | DropOrderNumberSequenceOp) -> str:
    return _arguments(
        ("schema", op.schema, None), ("table", op.table, None), ("column", op.column, None)
    )


@renderers.dispatch_for(CreateOrderNumberSequenceOp)
def _render_create_sequence(
    autogen_context: AutogenContext, op: CreateOrderNumberSequenceOp
) -> str:
    import_operations(autogen_context)
    return f"op.create_order_number_sequence({op.sequence_name!r}{_sequence_arguments(op)})"


@renderers.dispatch_for(DropOrderNumberSequenceOp)
def _render_drop_sequence(autogen_context: AutogenContext, op: DropOrderNumberSequenceOp) -> str:
    import_operations(autogen_context)
    return f"op.drop_order_number_sequence({op.sequence_name!r}{_sequence_arguments(op)})"


# --- autogenerate ----------------------------------------------------------------------


def _numbered_columns(columns: Any) -> Iterator[tuple[str, FormattedOrderNumber]]:
    """(column name, type) of the columns drawing from a sequence."""
    for column in columns:
        if (
            isinstance(column, sa.Column)
            and isinstance(column.type, FormattedOrderNumber)
            and column.type.sequence is not None
        ):
            yield column.name, column.type


@comparators.dispatch_for("schema", priority=DispatchPriority.LAST)
def compare_order_number_sequences(
    autogen_context: AutogenContext, upgrade_ops: ops.UpgradeOps, schemas: Any
) -> PriorityDispatchResult:
    """Autogenerate: an order-number sequence comes and goes with its table.

    Before each ``op.create_table`` of a table with a
    ``FormattedOrderNumber(sequence=...)`` column it puts
    ``op.create_order_number_sequence(name, table=..., column=...)``, which
    records the table with the sequence; the downgrade, the reverse, then
    reads ``op.drop_table(...)`` followed by
    ``op.drop_order_number_sequence(name, ...)``.

    After each ``op.drop_table`` of a table gone from the models it puts
    ``op.drop_order_number_sequence(name, table=..., column=...)`` for every
    sequence that records this table (asked of the database:
    ``Database.order_number_sequences``); the downgrade creates the sequence
    again before the table. Either way the sequence (SQLite: the counter
    row) goes with its table and a table created again numbers from 1.

    A sequence is left alone while a table of the models draws from it, or
    another table it records stays in the database; so is one that a dropped
    table used and a new table draws from (its numbers go on). A dropped
    table's order-number column that no sequence records (sequences created
    before sqla_ids recorded their tables) gets a warning, to add
    ``op.drop_order_number_sequence`` by hand.

    Registered for every autogenerate run once :mod:`sqla_ids.alembic` is
    imported, after Alembic's own comparisons.
    """
    created = {
        (op.schema, op.table_name) for op in upgrade_ops.ops if isinstance(op, ops.CreateTableOp)
    }
    dropped = {
        (op.schema, op.table_name) for op in upgrade_ops.ops if isinstance(op, ops.DropTableOp)
    }
    in_models: set[tuple[str | None, str]] = set()  # sequences some model draws from
    kept: set[tuple[str | None, str]] = set()  # sequences of tables not created here
    for table in autogen_context.sorted_tables:
        sequences = {(table.schema, t.sequence or "") for _, t in _numbered_columns(table.c)}
        in_models |= sequences
        if (table.schema, table.name) not in created:
            kept |= sequences
    owners = _Owners(autogen_context, dropped)
    for schema, name in dropped:
        kept.update((schema, s.name) for s in owners.of_table(schema, name))
    created_sequences: set[tuple[str | None, str]] = set()
    dropped_sequences: set[tuple[str | None, str, str]] = set()  # (schema, name, table)
    result: list[Any] = []
    for op in upgrade_ops.ops:
        if isinstance(op, ops.CreateTableOp):
            for column_name, type_ in _numbered_columns(op.columns):
                sequence = (op.schema, type_.sequence or "")
                if sequence not in kept and sequence not in created_sequences:
                    created_sequences.add(sequence)
                    result.append(
                        CreateOrderNumberSequenceOp(
                            sequence[1], schema=op.schema, table=op.table_name, column=column_name
                        )
                    )
            result.append(op)
        elif isinstance(op, ops.DropTableOp):
            result.append(op)
            owned = owners.of_table(op.schema, op.table_name)
            for found in owned:
                if (op.schema, found.name) in in_models or owners.used_elsewhere(op.schema, found):
                    continue
                if (op.schema, found.name, op.table_name) not in dropped_sequences:
                    dropped_sequences.add((op.schema, found.name, op.table_name))
                    result.append(
                        DropOrderNumberSequenceOp(
                            found.name, schema=op.schema, table=found.table, column=found.column
                        )
                    )
            _warn_about_dropped_numbers(autogen_context, op, owned)
        else:
            result.append(op)
    upgrade_ops.ops[:] = result
    return PriorityDispatchResult.CONTINUE


class _Owners:
    """The database's order-number sequences and their tables, read once per schema."""

    def __init__(
        self, autogen_context: AutogenContext, dropped: set[tuple[str | None, str]]
    ) -> None:
        self.connection = autogen_context.connection
        self.dropped = dropped
        self.sequences: dict[str | None, list[OwnedSequence]] = {}
        self.tables: dict[str | None, set[str]] = {}

    def _read(self, schema: str | None) -> list[OwnedSequence]:
        if self.connection is None:
            return []
        if schema not in self.sequences:
            database = for_dialect(self.connection.dialect)
            try:
                found = database.order_number_sequences(self.connection, schema)
            except UnsupportedDialectError:  # a database without order-number sequences
                found = []
            self.sequences[schema] = found
            if found:
                self.tables[schema] = set(sa.inspect(self.connection).get_table_names(schema))
        return self.sequences[schema]

    def of_table(self, schema: str | None, table: str) -> list[OwnedSequence]:
        """The sequences of ``schema`` that record ``table``."""
        return [sequence for sequence in self._read(schema) if sequence.table == table]

    def used_elsewhere(self, schema: str | None, owned: OwnedSequence) -> bool:
        """Whether another table the sequence records stays in the database."""
        return any(
            other.name == owned.name
            and other.table != owned.table
            and other.table in self.tables.get(schema, ())
            and (schema, other.table) not in self.dropped
            for other in self._read(schema)
        )


def _warn_about_dropped_numbers(
    autogen_context: AutogenContext, op: ops.DropTableOp, owned: list[OwnedSequence]
) -> None:
    """Warn about the dropped table's order-number columns no sequence records."""
    connection = autogen_context.connection
    if connection is None:
        return
    covered = {sequence.column for sequence in owned}
    if None in covered:  # a sequence recorded for the whole table
        return
    inspector = sa.inspect(connection)
    try:
        checks = inspector.get_check_constraints(op.table_name, op.schema)
    except NotImplementedError:  # a dialect that cannot reflect CHECK constraints
        return
    names = {check["name"] for check in checks}
    for column in inspector.get_columns(op.table_name, op.schema):
        if column["name"] in covered:
            continue
        if order_number_check_name(op.table_name, column["name"]) in names:
            logger.warning(
                "dropped table %r has the order-number column %r, and no sequence records "
                "it as its owner (sequences created before sqla_ids recorded owners): if a "
                'sequence numbered it, add op.drop_order_number_sequence("<sequence>") after '
                "op.drop_table (and op.create_order_number_sequence before op.create_table in "
                "the downgrade)",
                op.table_name,
                column["name"],
            )
