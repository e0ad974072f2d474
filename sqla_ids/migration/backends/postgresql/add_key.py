"""PostgreSQL: adding a UUIDv7 primary key in place, in one transaction.

``ADD COLUMN`` without a default changes only the catalog; the fill updates
the rows found by their ``ctid``; ``SET NOT NULL`` and ``ADD PRIMARY KEY``
then scan the table once and build the index. Without ordering columns the
physical order is the ``ctid`` order of the rows still without a key: an
updated row's new version may land anywhere, but it has its key and is
skipped, while the rows still to do keep their ``ctid``.
"""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.types import UserDefinedType

from sqla_ids.migration.backends.add_key import KeyAdder
from sqla_ids.migration.core.added_key import AddKeyPlan, UniqueKey, quoted
from sqla_ids.migration.core.mapping import RawType
from sqla_ids.migration.core.sql import execute_sql
from sqla_ids.types.server_functions import install_uuid7_function, uuid7_column_default_sql


class Tid(UserDefinedType[Any]):
    """``tid``: the driver returns a row address as text; it is cast back when bound."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        """The type's SQL."""
        return "tid"

    def bind_expression(self, bindvalue: Any) -> Any:
        """``CAST(:value AS tid)``: the text the driver returned, as a row address."""
        return sa.cast(bindvalue, RawType("tid"))


class PostgreSQLKeyAdder(KeyAdder):
    """See the module docstring."""

    transactional = True

    def unique_key(self, connection: Connection, table: str, name: str) -> UniqueKey | str | None:
        """From ``pg_index`` (and ``pg_constraint`` for a constraint's index)."""
        row = connection.execute(
            sa.text(
                "SELECT ic.relname, con.oid IS NOT NULL AS is_constraint,"
                " CASE WHEN con.oid IS NOT NULL THEN pg_get_constraintdef(con.oid)"
                " ELSE pg_get_indexdef(i.indexrelid) END AS definition,"
                " i.indpred IS NOT NULL AS partial, 0 = ANY(i.indkey::int2[]) AS expression,"
                " ARRAY(SELECT a.attname FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(n, o)"
                "  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n"
                "  ORDER BY k.o) AS columns"
                " FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid"
                " LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.contype = 'u'"
                " WHERE i.indrelid = to_regclass(:table) AND i.indisunique AND NOT i.indisprimary"
                " AND coalesce(con.conname, ic.relname) = :name"
            ),
            {"table": quoted(connection, table), "name": name},
        ).first()
        if row is None:
            return None
        if row.partial or row.expression:
            return f"unique index {name} is {'partial' if row.partial else 'on an expression'}"
        kind = "constraint" if row.is_constraint else "index"
        return UniqueKey(name, list(row.columns), kind, row.definition)

    def start(self, connection: Connection, plan: AddKeyPlan) -> list[sa.ColumnElement[Any]]:
        """``ADD COLUMN`` (no default: no rewrite); the rows' handle is ``ctid``."""
        q = functools.partial(quoted, connection)
        execute_sql(
            connection,
            f"ALTER TABLE {q(plan.table)} ADD COLUMN {q(plan.column)} {plan.key_type_sql}",
        )
        return [sa.literal_column("ctid", Tid())]

    def finish(self, connection: Connection, plan: AddKeyPlan) -> None:
        """``SET NOT NULL`` and ``ADD PRIMARY KEY`` in one statement (one scan)."""
        q = functools.partial(quoted, connection)
        table, column = q(plan.table), q(plan.column)
        execute_sql(
            connection,
            f"ALTER TABLE {table} ALTER COLUMN {column} SET NOT NULL, ADD PRIMARY KEY ({column})",
        )
        if plan.options.server_default:
            install_uuid7_function(connection)
            plan.default_sql = uuid7_column_default_sql(connection.dialect)
            execute_sql(
                connection,
                f"ALTER TABLE {table} ALTER COLUMN {column} SET DEFAULT {plan.default_sql}",
            )
        unique = plan.unique_key
        if unique is not None and not plan.options.keep_unique_key:
            if unique.kind == "constraint":
                execute_sql(connection, f"ALTER TABLE {table} DROP CONSTRAINT {q(unique.name)}")
            else:
                # The index lives in the table's schema: regclass names it as it
                # must be written from here (quoted, schema-qualified if needed).
                index = connection.execute(
                    sa.text("SELECT to_regclass(:t)::oid::regclass::text"),
                    {"t": _qualified_index(connection, plan.table, unique.name)},
                ).scalar_one()
                execute_sql(connection, f"DROP INDEX {index}")

    def undo(self, connection: Connection, plan: AddKeyPlan) -> None:
        """``DROP COLUMN`` (its primary key and default go with it), then the
        dropped unique key recreated from its recorded definition."""
        q = functools.partial(quoted, connection)
        execute_sql(connection, f"ALTER TABLE {q(plan.table)} DROP COLUMN {q(plan.column)}")
        unique = plan.unique_key
        if unique is not None and not plan.options.keep_unique_key:
            if unique.kind == "constraint":
                execute_sql(
                    connection,
                    f"ALTER TABLE {q(plan.table)} ADD CONSTRAINT {q(unique.name)}"
                    f" {unique.definition}",
                )
            else:
                execute_sql(connection, unique.definition)


def _qualified_index(connection: Connection, table: str, index: str) -> str:
    """``schema.index`` of an index of ``table`` (an index shares its table's schema)."""
    schema = connection.execute(
        sa.text(
            "SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = to_regclass(:t)"
        ),
        {"t": quoted(connection, table)},
    ).scalar_one()
    return f"{schema}.{quoted(connection, index)}"
