"""How SQL text reaches the driver: names quoted as the database reads them,
statements sent as written or through ``text()`` with only their parameters read
as parameters. Shared by every layer that writes SQL text (the order-number
counters here, the migration engine, the Alembic operations).

Two things stand between a quoted name and the database. A driver with the
``format`` paramstyle (psycopg, PyMySQL) reads ``%`` as a placeholder when it is
given parameters, so SQLAlchemy's preparer and compiler double every ``%`` for
it; and ``text()`` reads every ``:word`` as a bound parameter, inside a quoted
name (``"ref :x"``) too. Statements without parameters therefore go to the
driver as written (:func:`execute_sql`, :func:`query_sql`), with names quoted
by :func:`quote_name`; statements with parameters go through :func:`text_sql`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect

from sqla_ids.dialects.base import for_dialect


def text_sql(dialect: Dialect, sql: str) -> sa.TextClause:
    """``text(sql)`` for a statement with bound parameters whose quoted names or
    literals may hold a colon: ``text()`` reads every ``:word`` as a parameter, in a
    name (``"ref :x"``) too, so those inside quotes and comments are escaped
    (``\\:``, which ``text()`` gives back as ``:``) and only those outside them
    stay parameters. (A ``%`` needs nothing: ``text()`` escapes it for its driver.)"""
    return sa.text(_escaped_colons(sql, backslashes=for_dialect(dialect).backslash_escapes))


#: What ``text()`` reads as a bound parameter: SQLAlchemy's own pattern (it differs
#: between 2.0 and 2.1; escaping a colon it would not read leaves a backslash).
_BIND: re.Pattern[str] = sa.TextClause._bind_params_regex
#: Where a quoted name, a literal or a comment starts, and what ends it.
_QUOTED = re.compile(r"[\"'`]|--|/\*")


@functools.lru_cache(maxsize=512)  # the same few statements, run once per row (counters)
def _escaped_colons(sql: str, backslashes: bool) -> str:
    """``sql`` with each ``:word`` inside a quoted name (``"..."``, ``` `...` ```),
    a literal (``'...'``; a doubled quote stays inside, and a backslash escapes
    the next character where ``backslashes``: MariaDB/MySQL) or a comment escaped
    for ``text()``. Dollar-quoted bodies are read as the SQL they hold."""
    out: list[str] = []
    at = 0
    while (start := _QUOTED.search(sql, at)) is not None:
        out.append(sql[at : start.start()])
        opener = start.group()
        if opener == "--":
            end = sql.find("\n", start.end())
        elif opener == "/*":
            end = sql.find("*/", start.end())
            end = -1 if end < 0 else end + 1
        else:
            end = start.end()
            while end < len(sql):
                if (backslashes and opener == "'" and sql[end] == "\\") or (
                    sql[end] == opener and sql.startswith(opener, end + 1)
                ):
                    end += 2
                elif sql[end] == opener:
                    break
                else:
                    end += 1
        at = len(sql) if end < 0 or end >= len(sql) else end + 1
        out.append(_BIND.sub(r"\\\g<0>", sql[start.start() : at]))
    out.append(sql[at:])
    return "".join(out)


def quote_name(dialect: Dialect, name: str) -> str:
    """``name`` quoted as an identifier where needed, as the database reads it: for a
    bound value (``to_regclass(:t)``), a message, or SQL sent through
    :func:`execute_sql` (which sends it as it is) or ``text()`` (which escapes
    what it must for its driver). SQLAlchemy's preparer doubles ``%`` for the
    drivers that read it as a placeholder (psycopg, PyMySQL; not
    mysql-connector), as its compiled statements need; undone here (:func:`_undoubled`)."""
    return _undoubled(str(dialect.identifier_preparer.quote(name)), name)


def quoter(dialect: Dialect) -> Callable[[str], str]:
    """:func:`quote_name` for ``dialect`` as a one-argument function (``q(name)``)."""
    return lambda name: quote_name(dialect, name)


def ddl_sql(element: sa.schema.ExecutableDDLElement, dialect: Dialect) -> str:
    """A DDL construct (``CreateTable``...) as the SQL :func:`execute_sql` sends as
    written. SQLAlchemy's compiler doubles every ``%`` for the drivers that read it as
    a placeholder (the text is meant for ``cursor.execute`` with parameters); a DDL
    statement has no parameters, so each pair is one ``%`` of a name or a default."""
    rendered = str(element.compile(dialect=dialect))
    if quote_name(dialect, "%") != dialect.identifier_preparer.quote("%"):
        return rendered.replace("%%", "%")
    return rendered


def _undoubled(rendered: str, value: str) -> str:
    """``rendered`` (``value`` quoted or made a literal by SQLAlchemy) with its
    ``%`` as in ``value``: when SQLAlchemy doubled every one (it does or not
    by driver), the pairs undo exactly."""
    if value.count("%") and rendered.count("%") == 2 * value.count("%"):
        return rendered.replace("%%", "%")
    return rendered


def execute_sql(connection: Connection, sql: str) -> None:
    """Run a complete SQL statement (no parameters) exactly as written
    (:func:`query_sql`)."""
    query_sql(connection, sql)


def query_sql(connection: Connection, sql: str) -> sa.CursorResult[*tuple[Any, ...]]:
    """Run a complete SQL statement (no parameters) exactly as written, and return
    its rows. ``no_parameters``: the driver gets the text alone. Given an empty
    parameter list, a driver with the ``format`` paramstyle reads a ``%`` in the
    text -- ``LIKE 'a%'`` in a recreated definition, a name -- as a placeholder
    or not depending on the driver (PyMySQL and psycopg do, made ``sqla_a%s``
    into ``sqla_a{}``; mysql-connector does not, and would keep an escaping
    ``%%``): no escaping suits both, the text alone suits every driver."""
    return connection.exec_driver_sql(sql, execution_options={"no_parameters": True})


def literal_for(dialect: Dialect, value: str) -> str:
    """``value`` as a string literal of ``dialect`` (for DDL, which takes no bound
    parameters), escaped by SQLAlchemy's literal renderer -- never by hand:
    it knows the server's ``standard_conforming_strings`` and backslashes.

    The renderer doubles ``%`` for ``format``-paramstyle drivers; that is undone
    here: :func:`execute_sql` sends the statement as it is."""
    rendered = str(
        sa.literal(value, sa.String()).compile(
            dialect=dialect, compile_kwargs={"literal_binds": True}
        )
    )
    return _undoubled(rendered, value)
