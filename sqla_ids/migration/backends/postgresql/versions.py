"""PostgreSQL: the *before* and *after* versions of an online migration's tables.

With the ``versions`` option (:mod:`sqla_ids.migration.core.versions`), the
affected tables -- the migrated one and its children -- are served in two
shapes from the expand until the contract:

* before the swap the base tables are *before*; the schema ``<prefix>_after``
  holds one simple view per table presenting *after*: the new key (the
  temporary UUID column) under the key's name, each child's UUID reference
  under the reference's name, the old integer/text columns hidden;
* the swap drops those views and, in the same transaction (the tables are
  locked), creates ``<prefix>_before``: the old key (``<key>_old``) and the
  children's parked old values under their original names, the UUIDs hidden;
* the contract and every undo drop them.

The views are simple (one table, column references only), so PostgreSQL
makes them updatable: ``INSERT``/``UPDATE``/``DELETE``/``RETURNING`` go to the
base table, whose column defaults apply to the columns a view leaves out
(the old key's sequence under *after*, the UUID default under *before*), and
the sync triggers (made two-way by the option) fill in the other version's
columns. A connection picks a version with ``search_path =
<prefix>_<version>, <app schema>``: a table the migration does not touch has
no view and resolves to the application's schema, and once the version's
schema is dropped every name resolves to the base tables -- so each
application version keeps one ``search_path`` for the whole migration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect

from sqla_ids.dialects.sql import literal_for, quote_name, text_sql
from sqla_ids.migration.backends.base import Ddl, Mode
from sqla_ids.migration.backends.postgresql import partitions
from sqla_ids.migration.backends.postgresql.locks import lock_tree
from sqla_ids.migration.core.model import PkMigrationPlan
from sqla_ids.migration.core.names import child_old, object_name, references
from sqla_ids.migration.core.sql import Statement
from sqla_ids.migration.core.versions import Version, plan_schemas


def _q(dialect: Dialect, name: str) -> str:
    return quote_name(dialect, name)


def _tables(plan: PkMigrationPlan) -> list[str]:
    return sorted({plan.table, *(r.table for _, r in references(plan))})


def _renamed(plan: PkMigrationPlan, table: str, swapped: bool) -> tuple[dict[str, str], set[str]]:
    """For ``table`` (columns named as before the swap): original name -> the
    column the other version reads it from, and the columns it hides.

    Before the swap (*after* served by views) the original names come from
    the temporary UUID columns; after it (*before* served) from where the swap
    parked the old values, the UUID columns (then under the original names)
    hidden -- listed here under their pre-swap temporary names, which is
    where they are in the column order.
    """
    pairs: list[tuple[str, str, str]] = []  # original, temporary, parked old
    if table == plan.table:
        pairs.append((plan.column, plan.temp_column(plan.table, plan.column), plan.old_column))
    for n, ref in references(plan):
        if ref.table == table:
            pairs.append(
                (ref.column, plan.temp_column(ref.table, ref.column), child_old(plan, n, ref))
            )
    source = {orig: (old if swapped else tmp) for orig, tmp, old in pairs}
    return source, {tmp for _, tmp, _ in pairs}


def _create_views(
    connection: Connection, plan: PkMigrationPlan, version: Version
) -> list[Statement]:
    """The schema of ``version`` and its views (built from the columns as they are
    before the step that runs with them: the expand's end, or the swap), in one
    statement (see :func:`_batched`)."""
    schemas = plan_schemas(plan)
    if schemas is None:
        return []
    dialect = connection.dialect
    swapped = version == "before"
    read = _read(connection, _tables(plan))
    app = read.schema
    schema = _q(dialect, schemas[version])
    statements = [f"CREATE SCHEMA IF NOT EXISTS {schema}"]
    roles: set[str] = set()
    for table in _tables(plan):
        source, hidden = _renamed(plan, table, swapped)
        items = []
        shown = [column for column in read.columns.get(table, []) if column not in hidden]
        for column in shown:
            if column in source:
                items.append(f"{_q(dialect, source[column])} AS {_q(dialect, column)}")
            else:
                items.append(_q(dialect, column))
        # A simple view (one table, plain column references): automatically
        # updatable, and the base table's defaults fill what it leaves out.
        view = f"{schema}.{_q(dialect, table)}"
        statements.append(
            f"CREATE VIEW {view} AS SELECT {', '.join(items)}"
            f" FROM {_q(dialect, app)}.{_q(dialect, table)}"
        )
        for role, privilege, grantable in read.grants.get(table, []):
            roles.add(role)
            statements.append(
                f"GRANT {privilege} ON {view} TO {_role(dialect, role)}"
                + (" WITH GRANT OPTION" if grantable else "")
            )
        # Column grants (``GRANT UPDATE (note) ON item``) go to the view's column
        # of that name: the one the base column *is* in this version (under
        # *after*, ``shop_id`` shows the UUID reference, granted as the
        # application's ``shop_id`` was). Built before the swap runs, so the
        # base columns are still the ones the application was granted.
        for column, role, privilege, grantable in read.column_grants.get(table, []):
            if column not in shown:
                continue
            roles.add(role)
            statements.append(
                f"GRANT {privilege} ({_q(dialect, column)}) ON {view}"
                f" TO {_role(dialect, role)}" + (" WITH GRANT OPTION" if grantable else "")
            )
    statements += [
        f"GRANT USAGE ON SCHEMA {schema} TO {_role(dialect, role)}" for role in sorted(roles)
    ]
    return [_batched(dialect, statements)]


class _Code(str):
    """A line of PL/pgSQL in a :func:`_batched` block, run as it is."""

    __slots__ = ()


def _batched(dialect: Dialect, statements: list[str], declare: str = "") -> Statement:
    """``statements`` (plain SQL) run by one ``DO`` block: one round trip.

    The swap and its undo run these with the tables locked, each round trip
    a wait for every application statement on them (the undo's eleven drops,
    one by one, took 5-10 ms of its lock on a loaded machine); in one transaction either
    way, so one statement fails, or commits, with all the others. Each runs
    by ``EXECUTE`` of its text as a literal: PL/pgSQL substitutes no variable
    into it (a column named like one stays a column), and the names in it
    are quoted as they would be outside."""
    lines = [
        line if isinstance(line, _Code) else f"EXECUTE {literal_for(dialect, line)};"
        for line in statements
    ]
    body = "\n".join([declare + "BEGIN", *lines, "END"])
    tag = "$sqla_ids_versions$"
    while tag in body:
        tag = tag[:-1] + "_$"
    return Statement(f"DO {tag}\n{body}\n{tag}")


def _role(dialect: Dialect, role: str) -> str:
    return "PUBLIC" if role == "PUBLIC" else _q(dialect, role)


@dataclass
class _Catalog:
    """What a version's views are built from, for each table (by name)."""

    schema: str
    """The application's schema (``current_schema()``)."""
    columns: dict[str, list[str]] = field(default_factory=dict)
    """The table's columns in their order."""
    grants: dict[str, list[tuple[str, str, bool]]] = field(default_factory=dict)
    """``(grantee, privilege, grantable)`` of the table's privileges a view can have:
    the application's roles use the views with the privileges they have on the
    tables (the views read the tables with their owner's, the migration's role)."""
    column_grants: dict[str, list[tuple[str, str, str, bool]]] = field(default_factory=dict)
    """``(column, grantee, privilege, grantable)`` of its columns' own privileges
    (``pg_attribute.attacl``) that a view's column can have."""


# One query for every table, where one per table and question took ten round
# trips under the swap's lock (each an application statement's wait).
_CATALOG = (
    "WITH x AS (SELECT n, to_regclass(q) AS r FROM unnest(CAST(:n AS text[]),"
    " CAST(:q AS text[])) AS x(n, q))"
    " SELECT 0 AS kind, NULL AS n, current_schema()::text AS col, NULL AS grantee,"
    " NULL AS privilege, false AS grantable, 0 AS pos"
    " UNION ALL SELECT 1, x.n, att.attname::text, NULL, NULL, false, att.attnum"
    " FROM x JOIN pg_attribute att ON att.attrelid = x.r"
    " WHERE att.attnum > 0 AND NOT att.attisdropped"
    " UNION ALL SELECT 2, x.n, NULL, CASE WHEN a.grantee = 0 THEN 'PUBLIC'"
    " ELSE pg_get_userbyid(a.grantee)::text END, a.privilege_type, a.is_grantable, 0"
    " FROM x JOIN pg_class c ON c.oid = x.r, aclexplode(c.relacl) a"
    " WHERE a.grantee <> c.relowner AND a.privilege_type IN ('SELECT', 'INSERT', 'UPDATE',"
    " 'DELETE')"
    " UNION ALL SELECT 3, x.n, att.attname::text, CASE WHEN a.grantee = 0 THEN 'PUBLIC'"
    " ELSE pg_get_userbyid(a.grantee)::text END, a.privilege_type, a.is_grantable, 0"
    " FROM x JOIN pg_attribute att ON att.attrelid = x.r JOIN pg_class c ON c.oid = att.attrelid,"
    " aclexplode(att.attacl) a WHERE a.grantee <> c.relowner"
    " AND a.privilege_type IN ('SELECT', 'INSERT', 'UPDATE')"
    " ORDER BY kind, pos, col, grantee, privilege"
)


def _read(connection: Connection, tables: list[str]) -> _Catalog:
    """The columns and privileges of ``tables`` (in the caller's ``search_path``)."""
    rows = connection.execute(
        text_sql(connection.dialect, _CATALOG),
        {"n": tables, "q": [_q(connection.dialect, table) for table in tables]},
    ).all()
    read = _Catalog(schema=str(rows[0][2]))
    for kind, table, column, grantee, privilege, grantable, _ in rows[1:]:
        if kind == 1:
            read.columns.setdefault(str(table), []).append(str(column))
        elif kind == 2:
            read.grants.setdefault(str(table), []).append(
                (str(grantee), str(privilege), bool(grantable))
            )
        else:
            read.column_grants.setdefault(str(table), []).append(
                (str(column), str(grantee), str(privilege), bool(grantable))
            )
    return read


def _drop_views(dialect: Dialect, plan: PkMigrationPlan, version: Version) -> list[str]:
    """Drop ``version``'s views of this migration, and its schema once empty (another
    migration's views may still be in it): lines of a :func:`_batched` block
    declaring ``s``."""
    schemas = plan_schemas(plan)
    if schemas is None:
        return []
    schema = schemas[version]
    lines = [
        f"DROP VIEW IF EXISTS {_q(dialect, schema)}.{_q(dialect, table)}" for table in _tables(plan)
    ]
    # Every object in a schema depends on it (pg_depend): none left, it goes.
    lines += [
        _Code(
            f"SELECT oid INTO s FROM pg_namespace WHERE nspname = {literal_for(dialect, schema)};"
        ),
        _Code(
            "IF s IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_depend WHERE refclassid ="
            " 'pg_namespace'::regclass AND refobjid = s) THEN"
        ),
        f"DROP SCHEMA {_q(dialect, schema)}",
        _Code("END IF;"),
    ]
    return lines


_DECLARE_S = "DECLARE s oid;\n"


def expand_views(connection: Connection, plan: PkMigrationPlan) -> list[Statement]:
    """At the expand's end: *after* as views over the base tables (*before*)."""
    return _create_views(connection, plan, "after")


def swap_views_first(connection: Connection, plan: PkMigrationPlan) -> list[Statement]:
    """First in the swap's transaction: *after*'s views go (the base tables become
    *after*; the views would otherwise follow their columns' renames)."""
    lines = _drop_views(connection.dialect, plan, "after")
    return [_batched(connection.dialect, lines, _DECLARE_S)] if lines else []


def swap_views_last(connection: Connection, plan: PkMigrationPlan) -> list[Statement]:
    """Last in the swap's transaction: *before* as views over the base tables.
    Built before the swap's statements run, from the columns' pre-swap names
    (see :func:`_renamed`)."""
    return _create_views(connection, plan, "before")


def old_indexes(plan: PkMigrationPlan) -> list[tuple[str, str, str, bool]]:
    """``(table, column, index name, unique)`` built at the prepare on the old key
    and each child's old reference, serving versions.

    The swap moves the primary key and the children's indexes to the UUID
    columns; *before* then reads the old ones -- an old instance looking a row
    up by key, or a parent's children by reference -- which would have no
    index left until the contract. Built ``CONCURRENTLY`` beside the ones in
    use, they follow their columns through the swap (``<key>_old``, the parked
    old values) and go at the contract or with an undo.
    """
    if plan_schemas(plan) is None:
        return []
    indexes = [(plan.table, plan.column, object_name(plan, "vk", 0), True)]
    indexes += [
        (ref.table, ref.column, object_name(plan, "vr", n), False) for n, ref in references(plan)
    ]
    return indexes


def unprepare_indexes(plan: PkMigrationPlan) -> list[Ddl]:
    """Undoing the swap: the old columns' indexes go once the undo has built its
    own over the same columns, and before its foreign keys over the old key --
    which PostgreSQL would otherwise attach to the unique index there first,
    and the undo could not drop it after. Not earlier: the old code keeps
    finding rows by old key and children by old value through *before* while
    the undo runs.

    ``CONCURRENTLY`` (no blocking lock), except on a partitioned table, whose
    index PostgreSQL drops only at once (``cannot drop partitioned index
    concurrently``): there under the lock timeout, retried -- a catalog change
    that reads no row.
    """

    def drop(table: str, name: str, partitioned: bool) -> Callable[[Connection], list[Statement]]:
        def statements(connection: Connection) -> list[Statement]:
            if partitions.is_partitioned(connection, table) != partitioned:
                return []
            how = "" if partitioned else " CONCURRENTLY"
            drop = Statement(f"DROP INDEX{how} IF EXISTS {_q(connection.dialect, name)}")
            if not partitioned:
                return [drop]
            if not partitions.existing_indexes(connection, [name]):
                return []
            # It takes each piece's lock in turn: the tree first (see lock_tree).
            return [*lock_tree(connection, table, "ACCESS EXCLUSIVE"), drop]

        return statements

    tasks = []
    for table, _, name, _ in old_indexes(plan):
        tasks.append(Ddl(f"drop index {name}", drop(table, name, False), Mode.AUTOCOMMIT))
        tasks.append(Ddl(f"drop index {name} (partitioned)", drop(table, name, True)))
    return tasks


def drop_all_views(dialect: Dialect, plan: PkMigrationPlan) -> list[Statement]:
    """Both versions' views and the old columns' indexes (contract, undo): before
    the columns they read go. One statement (:func:`_batched`): the undo runs
    it with the tables locked."""
    lines = (
        _drop_views(dialect, plan, "after")
        + _drop_views(dialect, plan, "before")
        + [f"DROP INDEX IF EXISTS {_q(dialect, name)}" for _, _, name, _ in old_indexes(plan)]
    )
    return [_batched(dialect, lines, _DECLARE_S)] if lines else []


def version_views(connection: Connection, plan: PkMigrationPlan) -> set[str]:
    """This migration's views, in ``pg_describe_object``'s words (``view
    sqla_ids_after.item``): the objects-created-since guard leaves them out."""
    schemas = plan_schemas(plan)
    if schemas is None:
        return set()
    return set(
        connection.execute(
            sa.text(
                "SELECT pg_describe_object('pg_class'::regclass, c.oid, 0) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = ANY(:s) AND c.relkind = 'v' AND c.relname = ANY(:t)"
            ),
            {"s": sorted(schemas.values()), "t": _tables(plan)},
        ).scalars()
    )


def version_refusals(connection: Connection, plan: PkMigrationPlan) -> list[str]:
    """A view of the same name already in a version schema (another migration's,
    sharing a child with this one, or the application's): refused by name."""
    schemas = plan_schemas(plan)
    if schemas is None:
        return []
    problems = []
    taken = connection.execute(
        sa.text(
            "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE n.nspname = ANY(:s) AND c.relname = ANY(:t)"
            " ORDER BY 1, 2"
        ),
        {"s": sorted(schemas.values()), "t": _tables(plan)},
    ).all()
    for schema, table in taken:
        problems.append(
            f"versions: {schema}.{table} exists already (another online migration with versions"
            f" sharing {table}, or an object of the application): contract that migration"
            " first, drop the object, or choose another prefix (versions='<prefix>')"
        )
    return problems


def lock_views(connection: Connection, plan: PkMigrationPlan) -> list[str]:
    """The versions' views (quoted, schema-qualified), to lock before the tables
    in a locked step (the swap, its undo), which drops them.

    An application statement through a view locks the view, then its table.
    Locking the tables first and dropping the views after would wait for such
    a statement while it waits for the tables: every attempt would end in the
    lock timeout as long as the application keeps reading through the views.
    ``LOCK TABLE`` on a view locks the view, then the tables it reads. The
    parent's first: an application writes (and reads) a parent before its
    children, and a step locking in another order would meet it half-way --
    each waiting for the other until the step's lock timeout, attempt after
    attempt while the application keeps writing.
    """
    schemas = plan_schemas(plan)
    if schemas is None:
        return []
    dialect = connection.dialect
    names = [
        f"{_q(dialect, schema)}.{_q(dialect, table)}"
        for schema in sorted(schemas.values())
        for table in [plan.table, *(t for t in _tables(plan) if t != plan.table)]
    ]
    # One round trip (in the step's transaction, before its lock).
    present = connection.execute(
        sa.text(
            "SELECT n FROM unnest(CAST(:n AS text[])) WITH ORDINALITY AS x(n, i)"
            " WHERE to_regclass(n) IS NOT NULL ORDER BY i"
        ),
        {"n": names},
    ).scalars()
    return [str(name) for name in present]
