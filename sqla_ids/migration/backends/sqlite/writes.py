"""SQLite: writes to every row that are not the application's, kept quiet.

SQLite cannot disable a trigger: the table's triggers are dropped for the
run's writes and created again from their own SQL after, in the run's
transaction (a failure rolls the drop back too).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import query_sql, quote_name
from sqla_ids.errors import MigrationRefusedError


@contextmanager
def quiet(
    connection: Connection, table: str, schema: str | None = None
) -> Iterator[tuple[str, ...]]:
    """``table``'s triggers dropped inside, replayed after; no column needs
    assigning to itself. In an attached database (``schema``) a trigger's SQL
    would be replayed into ``main``: refused there, before any change, when the
    table has triggers."""
    master = (
        f"{quote_name(connection.dialect, schema)}.sqlite_master" if schema else "sqlite_master"
    )
    triggers = connection.exec_driver_sql(
        f"SELECT name, sql FROM {master} WHERE type = 'trigger' AND tbl_name = ? ORDER BY rowid",
        (table,),
    ).all()
    if triggers and schema:
        raise MigrationRefusedError(
            f"{schema}.{table} has triggers ({', '.join(n for n, _ in triggers)}), which would"
            " fire on every row written; in an attached database they cannot be set aside"
            " and put back: drop them first and create them again after; nothing was changed"
        )
    for name, _sql in triggers:
        query_sql(connection, f"DROP TRIGGER {quote_name(connection.dialect, name)}")
    yield ()
    for _name, sql in triggers:
        query_sql(connection, sql)
