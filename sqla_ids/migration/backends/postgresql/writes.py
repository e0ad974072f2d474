"""PostgreSQL: writes to every row that are not the application's, kept quiet.

A run that writes every row of a table -- the fill of a new key, the numbering
of a new order-number column -- is no application update: the table's user
triggers are disabled meanwhile, in the run's transaction (a failure rolls the
``DISABLE`` back too), and enabled again exactly as they were.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import execute_sql, quote_name

_TRIGGER_MODE = {"O": "", "A": "ALWAYS ", "R": "REPLICA "}
"""``pg_trigger.tgenabled`` -> the ``ENABLE ... TRIGGER`` that sets it again."""


def user_trigger_statements(
    connection: Connection, tables: list[str], schema: str | None = None
) -> tuple[list[str], list[str]]:
    """``DISABLE`` the user triggers that fire now on ``tables`` (of ``schema``, or
    found by the ``search_path``); ``ENABLE`` them again as they were
    (``ALWAYS``/``REPLICA`` kept). The statements are for
    :func:`~sqla_ids.migration.core.sql.execute_sql` (names quoted as they read)."""

    def q(name: str) -> str:
        return quote_name(connection.dialect, name)

    found = []
    for t in tables:
        here = f"{q(schema)}.{q(t)}" if schema else q(t)
        for name, enabled in connection.execute(
            sa.text(
                "SELECT g.tgname, g.tgenabled FROM pg_trigger g"
                " WHERE g.tgrelid = to_regclass(:t) AND NOT g.tgisinternal"
                " AND g.tgparentid = 0 AND g.tgenabled <> 'D' ORDER BY 1"
            ),
            {"t": here},
        ).all():
            found.append((here, name, enabled))
    disable = [f"ALTER TABLE {t} DISABLE TRIGGER {q(name)}" for t, name, _ in found]
    enable = [
        f"ALTER TABLE {t} ENABLE {_TRIGGER_MODE[enabled]}TRIGGER {q(name)}"
        for t, name, enabled in found
    ]
    return disable, enable


@contextmanager
def quiet(
    connection: Connection, table: str, schema: str | None = None
) -> Iterator[tuple[str, ...]]:
    """``table``'s user triggers disabled inside, enabled again as they were after;
    no column needs assigning to itself (PostgreSQL has no ``ON UPDATE``)."""
    disable, enable = user_trigger_statements(connection, [table], schema)
    for sql in disable:
        execute_sql(connection, sql)
    yield ()
    for sql in enable:
        execute_sql(connection, sql)
