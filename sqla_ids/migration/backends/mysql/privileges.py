"""MariaDB: the privileges the key migration needs, checked before it changes anything.

MariaDB's DDL commits statement by statement, so a privilege missing halfway
(``TRIGGER`` for the online mode's sync triggers, after the new columns were
added; ``CREATE`` on a version database, at the expand's end) would leave a
half-made migration behind. The planner asks here first and refuses by name.

The grants are read from ``information_schema`` (``USER_PRIVILEGES``,
``SCHEMA_PRIVILEGES``, ``TABLE_PRIVILEGES``), which show a user its own
privileges: global ones, database ones -- whose names are ``LIKE`` patterns,
as the server matches them (``sqla\\_ids\\_%``) -- and table ones, with those
granted to ``PUBLIC`` (MariaDB 10.11+). A session with a role enabled
(``SET ROLE``) is not checked: a role's privileges may come from other roles,
which these tables do not resolve, and a refusal the server would not make
is worse than an error the server makes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import query_sql, quote_name
from sqla_ids.migration.core.model import Work
from sqla_ids.migration.core.versions import VERSIONS, prefix_of, version_database

#: What every key migration does to each affected table: reads and updates
#: rows, alters the table, builds indexes (``INDEX``).
TABLE_PRIVILEGES = ("SELECT", "UPDATE", "ALTER", "INDEX")

#: What it does in the application's database: creates the mapping and state
#: tables (``CREATE``) -- which its user then reads and writes, and the sync
#: triggers too, running as their definer (MariaDB grants a table's creator
#: nothing on it) -- and drops the mapping at the contract or undo (``DROP``;
#: adding a key makes no mapping).
DATABASE_PRIVILEGES = ("CREATE", "SELECT", "INSERT", "UPDATE", "DELETE")

#: What a version database needs (``versions``): created and dropped
#: (``CREATE``, ``DROP``), filled with views (``CREATE VIEW``, and ``SHOW
#: VIEW``/``SELECT`` for the views the swap replaces).
VERSION_PRIVILEGES = ("CREATE", "DROP", "CREATE VIEW", "SHOW VIEW", "SELECT")


def session_grantee(connection: Connection) -> str:
    """The session's user as ``information_schema`` names a grantee (``'user'@'host'``)."""
    user = str(query_sql(connection, "SELECT CURRENT_USER()").scalar_one())
    name, _, host = user.rpartition("@")  # a host has no "@"; a user name may
    return f"'{name}'@'{host}'"


def _grantees(connection: Connection) -> list[str] | None:
    """The session's user and ``PUBLIC`` as grantees; ``None`` with a role
    enabled (not checked: see above)."""
    if query_sql(connection, "SELECT CURRENT_ROLE()").scalar() is not None:
        return None
    return [session_grantee(connection), "PUBLIC", "'PUBLIC'"]


def _granted(
    connection: Connection, grantees: list[str], database: str, table: str | None
) -> set[str]:
    """The privileges the grantees hold on ``database`` (and on ``table`` in it),
    from every level that reaches it."""
    bind = {"g": grantees, "d": database, "t": table}
    queries = [
        "SELECT PRIVILEGE_TYPE, IS_GRANTABLE FROM information_schema.USER_PRIVILEGES"
        " WHERE GRANTEE IN :g",
        # A database grant's name is a pattern (``_`` and ``%`` are wildcards
        # unless escaped), matched as the server matches it.
        "SELECT PRIVILEGE_TYPE, IS_GRANTABLE FROM information_schema.SCHEMA_PRIVILEGES"
        " WHERE GRANTEE IN :g AND :d LIKE TABLE_SCHEMA",
    ]
    if table is not None:
        queries.append(
            "SELECT PRIVILEGE_TYPE, IS_GRANTABLE FROM information_schema.TABLE_PRIVILEGES"
            " WHERE GRANTEE IN :g AND TABLE_SCHEMA = :d AND TABLE_NAME = :t"
        )
    found: set[str] = set()
    for sql in queries:
        query = sa.text(sql).bindparams(sa.bindparam("g", expanding=True))
        names = {key: value for key, value in bind.items() if f":{key}" in sql}
        for privilege, grantable in connection.execute(query, names):
            found.add(str(privilege).upper())
            if grantable == "YES":  # (not a privilege of its own in these tables)
                found.add("GRANT OPTION")
    return found


#: Where MariaDB keeps the grants the expand carries to the version databases:
#: the session's user sees other users' grants in ``information_schema`` only
#: with ``SELECT`` on this database (on its tables alone is not enough:
#: measured on 10.11).
GRANT_DATABASE = "mysql"


def _others_granted(connection: Connection, grantees: list[str], database: str) -> bool:
    """Whether users other than the session's hold privileges on ``database`` or
    its tables or columns (the grants the expand carries)."""
    return any(
        connection.execute(
            sa.text(
                f"SELECT 1 FROM information_schema.{view} WHERE TABLE_SCHEMA = :d"
                " AND GRANTEE NOT IN :g LIMIT 1"
            ).bindparams(sa.bindparam("g", expanding=True)),
            {"d": database, "g": grantees},
        ).first()
        # (names of information_schema's own views, not data)
        for view in ("SCHEMA_PRIVILEGES", "TABLE_PRIVILEGES", "COLUMN_PRIVILEGES")
    )


def missing_privileges(connection: Connection, tables: Sequence[str], work: Work) -> list[str]:
    """Each privilege ``work`` on ``tables`` (the key's table first, then the
    referencing ones) needs and the session's user lacks, as a refusal naming
    it and where it is needed."""
    grantees = _grantees(connection)
    if grantees is None:
        return []
    database = str(query_sql(connection, "SELECT DATABASE()").scalar_one())
    dialect = connection.dialect
    shown = quote_name(dialect, database)
    problems: list[str] = []

    def lacking(needed: Sequence[str], held: set[str]) -> list[str]:
        return [p for p in needed if p not in held and "ALL PRIVILEGES" not in held]

    # Online, every affected table gets sync triggers; offline, a table's own
    # triggers are set aside and put back.
    triggered = set(
        connection.execute(
            sa.text(
                "SELECT DISTINCT EVENT_OBJECT_TABLE FROM information_schema.TRIGGERS"
                " WHERE EVENT_OBJECT_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE IN :t"
            ).bindparams(sa.bindparam("t", expanding=True)),
            {"t": list(tables)},
        ).scalars()
    )
    # The key's table also gets the trigger that gives new rows their UUID (a
    # stored function is not allowed in DEFAULT), the server default's.
    keyed = tables[0] if work.key_trigger else None
    for table in dict.fromkeys(tables):
        needed: tuple[str, ...] = TABLE_PRIVILEGES
        if work.online or table in triggered or table == keyed:
            needed = (*needed, "TRIGGER")
        missing = lacking(needed, _granted(connection, grantees, database, table))
        if missing:
            where = f"{shown}.{quote_name(dialect, table)}"
            problems.append(
                f"the user lacks {', '.join(missing)} on {where}, which the migration needs"
                f" (GRANT {', '.join(missing)} ON {where} TO ...)"
            )
    # The online backfill's batches read their rows into a temporary table
    # first; adding a key numbers its rows in one.
    in_database: tuple[str, ...] = DATABASE_PRIVILEGES
    if work.mapping:
        in_database = (*in_database, "DROP")
    if work.online or not work.mapping:
        in_database = (*in_database, "CREATE TEMPORARY TABLES")
    missing = lacking(in_database, _granted(connection, grantees, database, None))
    if missing:
        problems.append(
            f"the user lacks {', '.join(missing)} on the database {shown}, where the"
            " migration keeps its own tables (mapping, state, temporary)"
            f" (GRANT {', '.join(missing)} ON {shown}.* TO ...)"
        )
    prefix = prefix_of(work.versions) if work.online else None
    if prefix is None:
        return problems
    # The expand carries the application's grants (other users') to the views:
    # it must see them, and may grant them only with GRANT OPTION there.
    versions_need: tuple[str, ...] = VERSION_PRIVILEGES
    if lacking(("SELECT",), _granted(connection, grantees, GRANT_DATABASE, None)):
        problems.append(
            f"versions: the user cannot read the other users' grants on {shown}"
            f" (SELECT on {GRANT_DATABASE}.*), which the expand carries to the version"
            " databases so that the application's users reach its views"
            f" (GRANT SELECT ON {GRANT_DATABASE}.* TO ...)"
        )
    elif _others_granted(connection, grantees, database):
        versions_need = (*versions_need, "GRANT OPTION")
    for version in VERSIONS:
        name = version_database(prefix, version, database)
        missing = lacking(versions_need, _granted(connection, grantees, name, None))
        if missing:
            problems.append(
                f"versions: the user lacks {', '.join(missing)} on the version database"
                f" {quote_name(dialect, name)}, which the expand creates (GRANT"
                f" {', '.join(missing)} ON {quote_name(dialect, name)}.* TO ...,"
                " or on a pattern such as `sqla\\_ids\\_%`.*)"
            )
    return problems
