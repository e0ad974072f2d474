"""MariaDB/MySQL: writes to every row that are not the application's, kept quiet.

MariaDB cannot disable a trigger: the application's ``UPDATE`` triggers on the
table are dropped for the run's writes and created again from their own
definitions after (:func:`~sqla_ids.migration.backends.mysql.offline.park_triggers`),
also when the run fails; and every ``UPDATE`` assigns each ``ON UPDATE
CURRENT_TIMESTAMP`` column to itself, so those keep their values.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import query_sql
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration.backends.mysql.offline import park, unpark
from sqla_ids.migration.backends.mysql.reflect import update_triggers


def _current(connection: Connection) -> str:
    return str(query_sql(connection, "SELECT DATABASE()").scalar_one())


def preserved(connection: Connection, table: str, schema: str | None = None) -> tuple[str, ...]:
    """``table``'s ``ON UPDATE CURRENT_TIMESTAMP`` columns (of ``schema``, or the
    current database)."""
    rows = connection.execute(
        sa.text(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = COALESCE(:s, DATABASE()) AND TABLE_NAME = :t"
            " AND LOWER(EXTRA) LIKE '%on update%' ORDER BY ORDINAL_POSITION"
        ),
        {"s": schema, "t": table},
    ).scalars()
    return tuple(rows)


@contextmanager
def quiet(
    connection: Connection, table: str, schema: str | None = None
) -> Iterator[tuple[str, ...]]:
    """The application's ``UPDATE`` triggers on ``table`` set aside inside, back
    after (a failure too, unless the connection is what failed); yields the
    columns each ``UPDATE`` must assign to themselves. In another database than
    the current one, a trigger would come back in the wrong one: refused there,
    before any change, when the table has ``UPDATE`` triggers."""
    if schema is not None and schema != _current(connection):
        there = (
            connection.execute(
                sa.text(
                    "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = :s"
                    " AND EVENT_OBJECT_TABLE = :t AND EVENT_MANIPULATION = 'UPDATE'"
                ),
                {"s": schema, "t": table},
            )
            .scalars()
            .all()
        )
        if there:
            raise MigrationRefusedError(
                f"{schema}.{table} has UPDATE triggers ({', '.join(there)}), which would fire"
                " on every row written; run it with that database as the connection's, or"
                " drop them first and create them again after; nothing was changed"
            )
        yield preserved(connection, table, schema)
        return
    triggers = update_triggers(connection, {table: set()})
    park(connection, triggers)
    try:
        yield preserved(connection, table)
    except BaseException:
        with suppress(sa.exc.DBAPIError):
            unpark(connection, triggers)
        raise
    unpark(connection, triggers)
