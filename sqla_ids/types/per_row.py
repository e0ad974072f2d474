"""Client-side defaults that must differ per row refuse ``INSERT … SELECT``.

SQLAlchemy computes a Python-side column default once per statement. For an
``INSERT … SELECT`` (``insert().from_select()``) whose column list leaves
the column out, that one value goes into *every* row the ``SELECT`` returns.
Alembic's batch mode copies a table exactly that way when it rebuilds it
(SQLite's ``batch_alter_table``, Flask-Migrate's default rendering): a
``FormattedOrderNumber`` column added in the batch gave every existing row
the same order number. Keys and order numbers must differ per row, so their
defaults refuse such a statement, naming the column and the way out, instead
of writing one value many times.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine.default import DefaultExecutionContext

from sqla_ids.errors import SqlaIdsError

__all__ = ["OneValueForManyRowsError", "refuse_insert_from_select"]


class OneValueForManyRowsError(SqlaIdsError, ValueError):
    """A per-row default (UUIDv7 key, order number) was asked for once for an
    ``INSERT … SELECT``: every row would get the same value. Nothing was inserted."""


def _is_insert_from_select(context: DefaultExecutionContext) -> bool:
    compiled = context.compiled
    if compiled is None:
        return False
    statement = compiled.statement
    return isinstance(statement, sa.Insert) and statement.select is not None


def refuse_insert_from_select(context: DefaultExecutionContext, what: str, remedy: str) -> None:
    """Raise :class:`OneValueForManyRowsError` when ``context`` runs an ``INSERT … SELECT``.

    ``what`` names the value (``"order number"``), ``remedy`` says what to do
    instead; the message names the table and column being filled.
    """
    if not _is_insert_from_select(context):
        return
    column: Any = context.current_column
    name = "?" if column is None else f"{column.table.name}.{column.name}"
    raise OneValueForManyRowsError(
        f"column {name}: an INSERT ... SELECT would give every row the same {what} "
        "(SQLAlchemy computes a client-side default once per statement; Alembic's batch "
        f"mode copies a rebuilt table this way); {remedy}"
    )
