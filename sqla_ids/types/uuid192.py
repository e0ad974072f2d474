"""``UUID192Type``: a column holding a :class:`~sqla_ids.UUID192` (UUID + 64-bit segment).

Stored as 16 or 24 big-endian bytes (``bytea``, ``VARBINARY(24)``, ``BLOB``)
so values sort by UUID first. :func:`uuid192_uuid` is the SQL expression
giving back the leading 128-bit UUID, comparable with a ``UUIDv7`` column for
joins.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import FromClause
from sqlalchemy.sql.type_api import TypeEngine
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.util import generic_repr

from sqla_ids.dialects import for_dialect
from sqla_ids.identifiers import UUID192
from sqla_ids.types.uuid7 import UUIDv7


class UUID192Type(sa.types.TypeDecorator[UUID192]):
    """A ``UUID192`` column: a UUID followed by an optional 64-bit segment.

    Accepts ``UUID192`` values and their text form; returns ``UUID192``.
    """

    impl = sa.LargeBinary
    cache_ok = True

    def __repr__(self) -> str:
        return generic_repr(self)

    @property
    def python_type(self) -> type[UUID192]:
        """Values are :class:`~sqla_ids.UUID192` instances."""
        return UUID192

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """Binary storage of up to 24 bytes, as the database says."""
        return dialect.type_descriptor(for_dialect(dialect).uuid192_storage())

    def process_bind_param(self, value: Any, dialect: Dialect) -> bytes | None:
        """``UUID192`` (or its text form) → 16/24 bytes."""
        if value is None:
            return None
        if isinstance(value, str):
            value = UUID192.parse(value)
        if not isinstance(value, UUID192):
            raise TypeError(f"a UUID192 column needs UUID192 values, got {type(value).__name__}")
        return value.bytes

    def process_result_value(self, value: Any, dialect: Dialect) -> UUID192 | None:
        """16/24 bytes → ``UUID192``."""
        return None if value is None else UUID192.from_bytes(bytes(value))

    class comparator_factory(sa.types.TypeDecorator.Comparator[UUID192]):
        """Adds ``.uuid()`` and ``.has_uuid()`` to UUID192 columns."""

        def uuid(self) -> ColumnElement[Any]:
            """SQL expression of the leading 128-bit UUID (see :func:`uuid192_uuid`)."""
            return uuid192_uuid(self.expr)

        def has_uuid(self, value: UUID | str) -> ColumnElement[bool]:
            """The values whose leading UUID is ``value``, whatever their segment.

            A range of the stored bytes -- from the UUID alone (no segment sorts
            first) to the UUID with the largest segment -- so the column's own
            index (a primary key's) finds them, where comparing
            :meth:`uuid` would read every row without an expression index.
            """
            leading = value if isinstance(value, UUID) else UUID(value)
            return self.expr.between(UUID192(leading), UUID192(leading, 2**64 - 1))


class _UUID192Leading(ColumnElement[Any]):
    """The leading UUID of a UUID192 value, in the dialect's UUID storage form."""

    inherit_cache = True
    _traverse_internals = [("expr", InternalTraversal.dp_clauseelement)]  # noqa: RUF012 - SQLAlchemy convention

    def __init__(self, expr: ColumnElement[Any]) -> None:
        self.expr = expr
        self.type = UUIDv7()

    @property
    def _from_objects(self) -> list[FromClause]:
        # Lets SELECT find the FROM clause of the wrapped column.
        return self.expr._from_objects


def uuid192_uuid(expr: ColumnElement[Any]) -> ColumnElement[Any]:
    """SQL expression giving the leading UUID of a ``UUID192Type`` expression.

    Typed ``UUIDv7``, so it can be selected and compared with UUID key
    columns (``JOIN … ON uuid192_uuid(ref.key) = orders.id``).
    """
    return _UUID192Leading(expr)


@compiles(_UUID192Leading)
def _compile_leading(element: _UUID192Leading, compiler: Any, **kw: Any) -> str:
    inner = compiler.process(element.expr, **kw)
    return for_dialect(compiler.dialect).uuid192_uuid_sql(inner)
