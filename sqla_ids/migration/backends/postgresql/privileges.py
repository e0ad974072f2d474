"""PostgreSQL: the privileges the key migration needs, checked before it changes anything.

``ALTER TABLE``, ``CREATE TRIGGER`` and ``CREATE INDEX`` need the table's
owner (or a member of its owner role); the mapping table needs ``CREATE`` on
the table's schema; the version schemas (``versions``) need ``CREATE`` on the
database, or, where they exist already (another migration shares them),
``CREATE`` on each. The offline mode's one transaction would roll a failure
back, but the online mode commits phase by phase: a missing privilege at the
expand's end (the version schemas) would leave its columns and triggers
behind. PostgreSQL answers for the session's role with its inherited
memberships (``pg_has_role``, ``has_schema_privilege``,
``has_database_privilege``; a superuser has every privilege).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import query_sql, quote_name
from sqla_ids.migration.core.model import Work
from sqla_ids.migration.core.versions import VERSIONS, prefix_of, version_schema


def missing_privileges(connection: Connection, tables: Sequence[str], work: Work) -> list[str]:
    """Each privilege ``work`` on ``tables`` (the key's table first, then the
    referencing ones) needs and the session's role lacks, as a refusal naming
    it and where it is needed."""
    problems: list[str] = []
    rows = connection.execute(
        sa.text(
            "SELECT t.name, c.oid::regclass::text, pg_get_userbyid(c.relowner),"
            " pg_has_role(c.relowner, 'USAGE'), n.nspname,"
            " has_schema_privilege(c.relnamespace, 'CREATE')"
            " FROM unnest(CAST(:t AS text[])) WITH ORDINALITY t(name, n)"
            " JOIN pg_class c ON c.oid = to_regclass(t.name)"
            " JOIN pg_namespace n ON n.oid = c.relnamespace ORDER BY t.n"
        ),
        {"t": [quote_name(connection.dialect, table) for table in dict.fromkeys(tables)]},
    ).all()
    schemas: dict[str, bool] = {}
    for _, shown, owner, owns, schema, creates in rows:
        if not owns:
            problems.append(
                f"the role {_role(connection)} does not own {shown} (its owner is"
                f" {quote_name(connection.dialect, owner)}), which ALTER TABLE, CREATE"
                " TRIGGER and CREATE INDEX need: run the migration as the owner, or"
                f" GRANT {quote_name(connection.dialect, owner)} TO {_role(connection)}"
            )
        schemas[schema] = creates
    for schema, creates in schemas.items():
        if work.mapping and not creates:
            problems.append(
                f"the role {_role(connection)} lacks CREATE on the schema"
                f" {quote_name(connection.dialect, schema)}, where the migration creates its"
                f" mapping table (GRANT CREATE ON SCHEMA {quote_name(connection.dialect, schema)}"
                f" TO {_role(connection)})"
            )
    prefix = prefix_of(work.versions) if work.online else None
    if prefix is not None:
        problems += _version_problems(connection, prefix)
    return problems


def _role(connection: Connection) -> str:
    return quote_name(
        connection.dialect, str(query_sql(connection, "SELECT current_user").scalar_one())
    )


def _version_problems(connection: Connection, prefix: str) -> list[str]:
    """The version schemas: ``CREATE`` on each that exists, on the database for
    those the expand creates."""
    problems = []
    names = [version_schema(prefix, version) for version in VERSIONS]
    existing = {
        str(name): bool(creates)
        for name, creates in connection.execute(
            sa.text(
                "SELECT nspname, has_schema_privilege(oid, 'CREATE') FROM pg_namespace"
                " WHERE nspname = ANY(:n)"
            ),
            {"n": names},
        )
    }
    for name in names:
        shown = quote_name(connection.dialect, name)
        if name in existing and not existing[name]:
            problems.append(
                f"versions: the role {_role(connection)} lacks CREATE on the version schema"
                f" {shown}, whose views the migration makes (GRANT CREATE ON SCHEMA {shown}"
                f" TO {_role(connection)})"
            )
    creates = query_sql(
        connection, "SELECT has_database_privilege(current_database(), 'CREATE')"
    ).scalar_one()
    if not creates and any(name not in existing for name in names):
        database = quote_name(
            connection.dialect,
            str(query_sql(connection, "SELECT current_database()").scalar_one()),
        )
        problems.append(
            f"versions: the role {_role(connection)} lacks CREATE on the database {database},"
            " which creating the version schemas"
            f" ({', '.join(quote_name(connection.dialect, n) for n in names)}) needs"
            f" (GRANT CREATE ON DATABASE {database} TO {_role(connection)})"
        )
    return problems
