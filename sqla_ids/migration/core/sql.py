"""Small SQL tools every backend shares: counting, complete statements, literals, views.

Names reach SQL through SQLAlchemy constructs (quoted by the dialect) or
:func:`~sqla_ids.dialects.sql.quote_name`; values are bound, except in DDL, which
takes no parameters -- there :func:`literal` renders them with SQLAlchemy's
escaping. How the text reaches the driver (as written, or through ``text()``) is
:mod:`sqla_ids.dialects.sql`, shared with the layers below the engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import execute_sql, literal_for, text_sql
from sqla_ids.errors import MigrationVerificationError
from sqla_ids.migration.core.model import PkMigrationPlan, View


def count(connection: Connection, table: str | sa.TableClause, *where: Any) -> int:
    """``SELECT count(*)`` of ``table`` (optionally filtered)."""
    source = sa.table(table) if isinstance(table, str) else table
    query = sa.select(sa.func.count()).select_from(source)
    if where:
        query = query.where(*where)
    return int(connection.execute(query).scalar_one())


def count_orphans(connection: Connection, parent: str, key: str, child: str, column: str) -> int:
    """Rows of ``child`` whose non-null ``column`` matches no ``parent.key``."""
    parents = sa.table(parent, sa.column(key)).alias("parent")  # may be the child itself
    children = sa.table(child, sa.column(column))
    return int(
        connection.execute(
            sa.select(sa.func.count())
            .select_from(children)
            .where(
                children.c[column].is_not(None),
                ~sa.exists().where(parents.c[key] == children.c[column]),
            )
        ).scalar_one()
    )


#: Rows an error names (the count says how many there are in all).
EXAMPLES = 5


def examples(connection: Connection, query: sa.Select[Any]) -> str:
    """The first :data:`EXAMPLES` rows of ``query``, for an error message:
    ``id=3 order_id=17; id=4 order_id=18`` (each column's name and value)."""
    rows = connection.execute(query.limit(EXAMPLES)).mappings().all()
    return "; ".join(" ".join(f"{k}={v!r}" for k, v in row.items()) for row in rows)


def orphans(
    connection: Connection, parent: str, key: str, child: str, column: str, *named: str
) -> tuple[int, str]:
    """How many rows of ``child`` have a non-null ``column`` matching no
    ``parent.key``, and the first few (``named`` columns, then ``column``)."""
    parents = sa.table(parent, sa.column(key)).alias("parent")  # may be the child itself
    children = sa.table(child, *map(sa.column, dict.fromkeys([*named, column])))
    query = sa.select(*children.c).where(
        children.c[column].is_not(None),
        ~sa.exists().where(parents.c[key] == children.c[column]),
    )
    found = int(connection.execute(query.with_only_columns(sa.func.count())).scalar_one())
    return found, examples(connection, query) if found else ""


def literal(connection: Connection, value: str) -> str:
    """``value`` as a string literal of this database (for DDL, which takes no
    bound parameters: ``COMMENT``); see :func:`literal_for`."""
    return literal_for(connection.dialect, value)


@dataclass(frozen=True)
class Statement:
    """One SQL statement a step will run, exactly as it will run: names quoted,
    values literals (DDL) or bound ``params``. ``str()`` gives the SQL (a dry
    run prints it; tests compare it)."""

    sql: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.sql


def execute(connection: Connection, statements: Iterable[Statement]) -> None:
    """Run ``statements`` in order (bound parameters through ``text()``; complete
    statements as they are, see :func:`execute_sql`)."""
    for statement in statements:
        if statement.params:
            connection.execute(text_sql(connection.dialect, statement.sql), dict(statement.params))
        else:
            execute_sql(connection, statement.sql)


def drop_views(connection: Connection, plan: PkMigrationPlan) -> None:
    """Drop the views over affected columns, those built on others first."""
    for view in reversed(plan.views):
        execute_sql(connection, view.drop_sql)


def recreate_views(connection: Connection, plan: PkMigrationPlan) -> None:
    """Recreate the dropped views from their recorded definitions; a failure names
    the view (a comparison with an unconverted column is the usual reason)."""
    for view in plan.views:
        for sql in [view.create_sql, *view.after_sql]:
            try:
                execute_sql(connection, sql)
            except sa.exc.DBAPIError as error:
                raise view_error(view, error) from error


def view_error(view: View, error: sa.exc.DBAPIError) -> MigrationVerificationError:
    """The error for a view that could not be recreated, naming it and the way out."""
    reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
    return MigrationVerificationError(
        f"could not recreate view {view.shown} (it depends on {view.depends_on}): {reason}."
        " If the view compares a converted column with one that holds the same keys"
        " without a foreign key, name that column in extra_references=[(table, column)];"
        " otherwise drop the view before the migration and create it again after. Stopped"
        " there: on PostgreSQL and SQLite the transaction rolls back, nothing has changed"
    )
