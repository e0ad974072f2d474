"""Small SQL tools every backend shares: counting, complete statements, literals, views.

Names reach SQL through SQLAlchemy constructs (quoted by the dialect) or the
dialect's identifier preparer; values are bound, except in DDL, which takes no
parameters -- there :func:`literal` renders them with SQLAlchemy's escaping.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect

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


def text_sql(dialect: Dialect, sql: str) -> sa.TextClause:
    """``text(sql)`` for a statement with bound parameters whose quoted names or
    literals may hold a colon: ``text()`` reads every ``:word`` as a parameter, in a
    name (``"ref :x"``) too, so those inside quotes and comments are escaped
    (``\\:``, which ``text()`` gives back as ``:``) and only those outside them
    stay parameters. (A ``%`` needs nothing: ``text()`` escapes it for its driver.)"""
    return sa.text(_escaped_colons(sql, backslashes=dialect.name in ("mysql", "mariadb")))


#: What ``text()`` reads as a bound parameter: SQLAlchemy's own pattern (it differs
#: between 2.0 and 2.1; escaping a colon it would not read leaves a backslash).
_BIND: re.Pattern[str] = sa.TextClause._bind_params_regex
#: Where a quoted name, a literal or a comment starts, and what ends it.
_QUOTED = re.compile(r"[\"'`]|--|/\*")


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


def literal(connection: Connection, value: str) -> str:
    """``value`` as a string literal of this database (for DDL, which takes no
    bound parameters: ``COMMENT``); see :func:`literal_for`."""
    return literal_for(connection.dialect, value)


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
