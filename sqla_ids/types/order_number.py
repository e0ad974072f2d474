"""``FormattedOrderNumber``: the order number stored exactly as displayed.

The column holds ``943-130-351``-style text (``VARCHAR`` of the format's
maximum length) with a CHECK constraint that validates the shape in the
database (PostgreSQL regex, MariaDB ``REGEXP``, SQLite ``GLOB``). Values
compared with the column are user input: ``Order.number == "943130351"`` is
validated and normalized first, so it finds ``943-130-351`` -- and a typo
raises the specific :class:`~sqla_ids.order_numbers.OrderNumberError` when the
expression is built, before any query.

With ``sequence="orders_number_seq"`` the column also gets its default: the
next value of a real database sequence (PostgreSQL/MariaDB ``SEQUENCE``, an
atomically updated counter table on SQLite), encoded by the format. The
sequence is created and dropped with the table (``create_all``/``drop_all``,
``table.create()``/``table.drop()``, Alembic ``op.create_table``). Alembic's
``op.drop_table("orders")`` names only the table, so migrations drop the
sequence with ``op.drop_order_number_sequence``, which autogenerate writes
(:mod:`sqla_ids.alembic.order_numbers`).

The key is referred to by *name*; migrations and reprs never contain it.

This module is the type (validation and storage). What the column adds to
its table lives in :mod:`sqla_ids.types.order_number_ddl`, drawing numbers
from the sequence in :mod:`sqla_ids.types.order_number_sequence`.
"""

from __future__ import annotations

import inspect
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql import operators
from sqlalchemy.sql.expression import ColumnElement
from sqlalchemy.types import TypeDecorator, TypeEngine

from sqla_ids.order_numbers.codec import OrderNumberCodec
from sqla_ids.order_numbers.schemes import (
    PlainSequenceScheme,
    RandomIncrementScheme,
    SequenceScheme,
)
from sqla_ids.types.order_number_ddl import attach_to_column
from sqla_ids.types.order_number_sequence import OrderNumberSequence

__all__ = ["SCHEMES", "FormattedOrderNumber"]

#: Values of ``FormattedOrderNumber(scheme=...)``.
SCHEMES = ("ff3", "plain", "random-increment")

# Operators whose right-hand side is a whole order number typed by a user.
_WHOLE_VALUE_OPERATORS = {operators.eq, operators.ne, operators.in_op, operators.not_in_op}


class FormattedOrderNumber(TypeDecorator[str]):
    """Order-number column: display form stored, validated input, optional sequence default.

    ``scheme``: ``"ff3"`` (FF3-1 encrypted, default; needs the key ``key``),
    ``"plain"`` (sequence value + check digit) or ``"random-increment"``
    (plain, with random gaps of up to ``spread``). ``alphabet``,
    ``check_digit`` and ``separator`` choose the format (see
    :class:`~sqla_ids.order_numbers.OrderNumberCodec`).
    """

    impl = sa.String
    cache_ok = True

    def __init__(
        self,
        key: str = "default",
        *,
        scheme: str = "ff3",
        alphabet: str = "decimal",
        check_digit: str = "luhn",
        separator: str = "-",
        sequence: str | None = None,
        spread: int = 100,
        check_constraint: bool = True,
    ) -> None:
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, not {scheme!r}")
        self.key = key
        self.scheme = scheme
        self.alphabet = alphabet
        self.check_digit = check_digit
        self.separator = separator
        self.sequence = sequence
        self.spread = spread
        self.check_constraint = check_constraint
        self._scheme = self._build_scheme()
        self._sequence = None if sequence is None else OrderNumberSequence(sequence, self._scheme)
        super().__init__(length=self._scheme.format.max_length)

    def _build_scheme(self) -> SequenceScheme:
        if self.scheme == "ff3":
            return OrderNumberCodec(
                self.key,
                alphabet=self.alphabet,
                check_digit=self.check_digit,
                separator=self.separator,
            )
        if self.alphabet != "decimal":
            raise ValueError(f"the {self.scheme!r} scheme is decimal only")
        if self.scheme == "plain":
            return PlainSequenceScheme(check_digit=self.check_digit, separator=self.separator)
        return RandomIncrementScheme(
            spread=self.spread, check_digit=self.check_digit, separator=self.separator
        )

    def __repr__(self) -> str:
        # Constructor arguments that differ from their defaults, for Alembic's
        # autogenerate; the key is a name, never material.
        parameters = inspect.signature(FormattedOrderNumber.__init__).parameters
        args = [f"key={self.key!r}"]
        for name, parameter in parameters.items():
            if parameter.kind is parameter.KEYWORD_ONLY:
                value = getattr(self, name)
                if value != parameter.default:
                    args.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(args)})"

    @property
    def order_numbers(self) -> SequenceScheme:
        """The scheme that formats, parses and decodes this column's values."""
        return self._scheme

    @property
    def number_sequence(self) -> OrderNumberSequence | None:
        """The sequence numbering this column (``sequence=``), or ``None``."""
        return self._sequence

    def next_value(self, connection: Connection, schema: str | None = None) -> str:
        """Take the next sequence value and return its order number.

        This is the column default; call it directly to show a number before
        the row is inserted. Skipped values (step 4 of the algorithm,
        docs/order_numbers.md) are passed over.
        """
        if self._sequence is None:
            raise ValueError("this FormattedOrderNumber has no sequence")
        return self._sequence.next_number(connection, schema)

    # -- values -------------------------------------------------------------------

    @property
    def python_type(self) -> type[str]:
        """Values are the display strings."""
        return str

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        """Validate and normalize what goes to the database."""
        if value is None:
            return None
        return self._scheme.validate(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        """The stored display string, as is."""
        return None if value is None else str(value)

    def coerce_compared_value(self, op: Any, value: Any) -> TypeEngine[Any]:
        """Whole-value comparisons use this type (normalizing input); LIKE etc. plain text."""
        if op in _WHOLE_VALUE_OPERATORS:
            return self
        return sa.String()

    class comparator_factory(TypeDecorator.Comparator[str]):
        """Validate a typed number when the expression is built, not at execution."""

        def operate(self, op: Any, *other: Any, **kwargs: Any) -> ColumnElement[Any]:
            order_type: FormattedOrderNumber = self.type  # type: ignore[assignment]
            validate = order_type._scheme.validate
            if other and op in _WHOLE_VALUE_OPERATORS:
                value = other[0]
                if isinstance(value, str):
                    other = (validate(value), *other[1:])
                elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                    other = ([validate(v) for v in value], *other[1:])
            return super().operate(op, *other, **kwargs)


# CHECK constraint, sequence and default: added when a column of this type
# joins a table (also for copies of the column and its type).
event.listen(FormattedOrderNumber, "after_parent_attach", attach_to_column)
