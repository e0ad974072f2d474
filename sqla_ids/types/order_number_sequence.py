"""The database sequence behind a ``FormattedOrderNumber`` column, and its numbers.

:class:`OrderNumberSequence` creates and drops the sequence (PostgreSQL/MariaDB
``SEQUENCE``, an atomically updated counter table on SQLite) and draws the
next order number: the database gives the next value, the scheme maps it to
the value it encodes (:meth:`~sqla_ids.order_numbers.SequenceScheme.value_for`)
and encodes it. Values whose number is never issued (step 4 of the
algorithm, docs/order_numbers.md) are passed over. The SQL of each database
lives in :mod:`sqla_ids.dialects`.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from sqla_ids.dialects import for_dialect
from sqla_ids.dialects.order_number_owner import OrderNumberOwner
from sqla_ids.order_numbers.errors import SkippedValueError
from sqla_ids.order_numbers.schemes import SequenceScheme

__all__ = ["OrderNumberSequence"]


class OrderNumberSequence:
    """The database sequence ``name``, whose values ``scheme`` turns into order numbers.

    ``schema`` arguments name the schema the sequence lives in (that of the
    table whose column it numbers; ``None`` for the default one).
    """

    def __init__(self, name: str, scheme: SequenceScheme) -> None:
        self.name = name
        self.scheme = scheme

    def __repr__(self) -> str:
        return f"OrderNumberSequence({self.name!r}, {self.scheme!r})"

    def create(
        self,
        connection: Connection,
        schema: str | None = None,
        owner: OrderNumberOwner | None = None,
    ) -> None:
        """Create the sequence (nothing if it exists).

        ``owner``, the table (and column) it numbers, is added to the tables
        the sequence records: Alembic's autogenerate then drops the sequence
        with the last of them.
        """
        for_dialect(connection.dialect).order_number_create_sequence(
            connection, self.name, schema, owner
        )

    def drop(self, connection: Connection, schema: str | None = None) -> None:
        """Drop the sequence if it exists."""
        for_dialect(connection.dialect).order_number_drop_sequence(connection, self.name, schema)

    def next_number(self, connection: Connection, schema: str | None = None) -> str:
        """Take the next sequence value and return its order number."""
        database = for_dialect(connection.dialect)
        while True:
            value = database.order_number_next_value(connection, self.name, schema)
            try:
                return self.scheme.encode(self.scheme.value_for(value))
            except SkippedValueError:
                continue
