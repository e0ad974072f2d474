"""MariaDB: the *before* and *after* versions of an online migration's tables.

With the ``versions`` option (:mod:`sqla_ids.migration.core.versions`) two
databases of views serve the application's database from the expand until
the contract, ``<prefix>_before_<db>`` and ``<prefix>_after_<db>``
(:func:`~sqla_ids.migration.core.versions.version_database`); a connection
picks its version with its current database, which it keeps for the whole
window (MariaDB has no ``search_path``: a name that is not in the current
database is not looked up anywhere else):

* before the swap, *before* holds pass-through views of the affected tables
  (the base tables are *before* then) and *after* views presenting the new
  UUID columns under the original names, the old columns hidden;
* the swap turns them round: *before* presents the parked old columns
  (``<key>_old``, the children's old values) under the original names, the
  UUIDs hidden, and *after* becomes pass-through;
* every other table of the application's database has a pass-through view in
  both, made at the expand (a table created later has none);
* the contract and every undo drop both databases.

The views are ``ALGORITHM=MERGE`` over one table with plain column
references, so MariaDB makes them updatable: an ``INSERT`` through one goes
to the base table, whose defaults fill the hidden columns and whose triggers
(two-way with ``versions``) fill the other version's columns;
``LAST_INSERT_ID()`` is the base table's ``AUTO_INCREMENT``. They are
``SQL SECURITY DEFINER`` (the migration's user reads the tables); the
application's privileges on the tables are granted on the views.

**The swap.** MariaDB refuses ``CREATE VIEW`` under ``LOCK TABLES`` (1192),
and a view naming a column the swap renamed fails every statement using it
(1356). So the swap locks the versions' views with the tables, and *other*
sessions of the migration queue ``CREATE OR REPLACE VIEW`` for each of them
while the tables are locked (:class:`Replacements`): each waits for its
view's metadata lock, which the application's statements wait for too. On
``UNLOCK TABLES`` MariaDB grants the pending exclusive locks before the
shared ones (measured on 10.11, whichever came first), and a ``CREATE VIEW``
resolves its columns only once it holds its lock -- after the swap's renames:
the application's statements, queued or new, read the new definitions.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect

from sqla_ids.dialects.sql import execute_sql, literal_for, query_sql, quote_name
from sqla_ids.migration.backends.mysql.privileges import session_grantee
from sqla_ids.migration.core import state
from sqla_ids.migration.core.model import PkMigrationPlan
from sqla_ids.migration.core.names import child_old, references
from sqla_ids.migration.core.progress import logger
from sqla_ids.migration.core.sql import Statement
from sqla_ids.migration.core.versions import (
    MAX_DATABASE_NAME,
    VERSIONS,
    Version,
    prefix_of,
    version_database,
)

# Where a locked step's queued view replacements wait for the unlock.
_PENDING = "sqla_ids_version_replacements"
# Set while the session holds a locked step's tables (Replacements.locked):
# only then are replacements queued -- a dry run builds the steps' statements
# without taking the lock, and must change nothing.
_LOCKED = "sqla_ids_version_locked"

# How long a queued replacement waits for its view's metadata lock (whole
# seconds: lock_wait_timeout takes no fraction). The swap holds the tables
# for well under this; a replacement left waiting longer gives up, and the
# unlock repairs its view (:meth:`Replacements.release`).
_REPLACEMENT_WAIT_SECONDS = 60

# How long the unlock waits for every replacement to be queued on its lock.
_QUEUE_SECONDS = 10.0

# The sessions the replacements will run in, opened before the lock is taken
# (Replacements.locked): opening six under it (a connection's start-up, then
# two round trips each) took 147 ms of the swap's 206 ms on MariaDB 10.11,
# every application statement on the tables waiting meanwhile.
_SESSIONS = "sqla_ids_version_sessions"

_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE")


def _q(dialect: Dialect, name: str) -> str:
    return quote_name(dialect, name)


def _application_database(connection: Connection) -> str:
    return str(query_sql(connection, "SELECT DATABASE()").scalar_one())


def databases(connection: Connection, plan: PkMigrationPlan) -> dict[Version, str] | None:
    """The plan's version databases for the current (application's) database, or
    ``None`` when it serves no versions."""
    prefix = prefix_of(plan.options.versions)
    if prefix is None:
        return None
    database = _application_database(connection)
    return {version: version_database(prefix, version, database) for version in VERSIONS}


def _sharing(connection: Connection, plan: PkMigrationPlan) -> list[PkMigrationPlan]:
    """The other online migrations in progress in this database serving versions
    under the same prefix: they share the version databases (each shapes the
    views of its own tables), which go with the last one."""
    prefix = prefix_of(plan.options.versions)
    return [
        other
        for table, (step, other) in sorted(state.recorded_plans(connection).items())
        if table != plan.table and step.phase.online and prefix_of(other.options.versions) == prefix
    ]


def _affected(plan: PkMigrationPlan) -> list[str]:
    # The parent first: an application writes a parent before its children.
    rest = sorted({r.table for _, r in references(plan)} - {plan.table})
    return [plan.table, *rest]


def _columns(connection: Connection, database: str, table: str) -> list[str]:
    return list(
        connection.execute(
            sa.text(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = :d"
                " AND TABLE_NAME = :t ORDER BY ORDINAL_POSITION"
            ),
            {"d": database, "t": table},
        ).scalars()
    )


def _pairs(plan: PkMigrationPlan, table: str) -> list[tuple[str, str, str]]:
    """``(original, temporary UUID, parked old)`` names of ``table``'s converted columns."""
    pairs: list[tuple[str, str, str]] = []
    if table == plan.table:
        pairs.append((plan.column, plan.temp_column(plan.table, plan.column), plan.old_column))
    for n, ref in references(plan):
        if ref.table == table:
            pairs.append(
                (ref.column, plan.temp_column(ref.table, ref.column), child_old(plan, n, ref))
            )
    return pairs


def swapped_columns(plan: PkMigrationPlan, table: str, columns: list[str]) -> list[str]:
    """``table``'s columns as the swap leaves them, from ``columns`` as they are
    now: each UUID column in its original's place (the swap moves it there),
    the parked old value right after it. A swap resumed half-way has renamed
    some already: each pair is renamed only while its temporary column is there."""
    pairs = [pair for pair in _pairs(plan, table) if pair[1] in columns]
    moved = {original: parked for original, _, parked in pairs}
    temporary = {temporary for _, temporary, _ in pairs}
    result: list[str] = []
    for column in columns:
        if column in temporary:
            continue
        result += [column, moved[column]] if column in moved else [column]
    return result


def _items(
    plan: PkMigrationPlan, table: str, columns: list[str], version: Version
) -> list[tuple[str, str]]:
    """``(base column, view column)`` of ``version``'s view of ``table`` whose
    columns are ``columns``, each converted column as its pair stands there:
    before the swap while its temporary UUID column is there, after it once
    it is gone (a swap stopped half-way has swapped some pairs only).

    Where the base table is the version (*before* before the swap, *after*
    after it) its columns pass through, but for the other version's columns
    that go before this version's views do -- the temporary UUIDs with an undo
    before the swap, the children's parked old values at the contract -- so
    that the views outlive them (a view naming a dropped column fails every
    statement using it); inserts leave them to their defaults and the
    triggers. Otherwise the other version's columns show under the original
    names and this version's are hidden."""
    source: dict[str, str] = {}
    hidden: set[str] = set()
    for original, temporary, parked in _pairs(plan, table):
        swapped = temporary not in columns
        if version == ("after" if swapped else "before"):
            if not swapped:
                hidden.add(temporary)
            elif parked != plan.old_column:  # (the parent's <key>_old stays)
                hidden.add(parked)
        elif not swapped:  # *after* before the swap: the UUIDs under the original names
            source[original] = temporary
            hidden.add(temporary)
        else:  # *before* after it: the parked old values under the original names
            source[original] = parked
            hidden.add(parked)
    return [(source.get(column, column), column) for column in columns if column not in hidden]


def _view_sql(
    dialect: Dialect,
    database: str,
    application: str,
    table: str,
    items: list[tuple[str, str]],
    replace: bool = True,
) -> str:
    """``CREATE OR REPLACE`` of one version view: MERGE (an updatable view the
    server merges into each statement, so the base table's indexes serve it),
    the migration's user reading the table (DEFINER)."""
    listed = ", ".join(
        _q(dialect, source) if source == name else f"{_q(dialect, source)} AS {_q(dialect, name)}"
        for source, name in items
    )
    how = "OR REPLACE " if replace else ""
    exists = "" if replace else " IF NOT EXISTS"
    return (
        f"CREATE {how}ALGORITHM=MERGE SQL SECURITY DEFINER VIEW{exists}"
        f" {_q(dialect, database)}.{_q(dialect, table)} AS SELECT {listed}"
        f" FROM {_q(dialect, application)}.{_q(dialect, table)}"
    )


# --- grants ----------------------------------------------------------------------------

_GRANTEE = re.compile(r"^'(.*)'@'(.*)'$", re.DOTALL)


def _grantee(dialect: Dialect, grantee: str) -> str:
    """``information_schema``'s ``'user'@'host'`` as a GRANT names it (a role, with
    no host, by its name alone)."""
    found = _GRANTEE.match(grantee)
    if found is None:
        return literal_for(dialect, grantee.strip("'"))
    user, host = found.group(1), found.group(2)
    if not host:
        return literal_for(dialect, user)
    return f"{literal_for(dialect, user)}@{literal_for(dialect, host)}"


def _grant(privilege: str, on: str, to: str, grantable: str) -> Statement:
    option = " WITH GRANT OPTION" if grantable == "YES" else ""
    return Statement(f"GRANT {privilege} ON {on} TO {to}{option}")


def _grants(
    connection: Connection, application: str, database: str, tables: list[str]
) -> list[Statement]:
    """The application's privileges carried to ``database``'s views: its
    database-wide ones (``GRANT SELECT ON app.*``) on the version database, its
    table ones on the view of the same name, its column ones on the view's
    column of the same name -- the column the application was granted, in this
    version (under *after*, ``shop_id`` shows the UUID reference with the
    grants the old ``shop_id`` had)."""
    dialect = connection.dialect
    db = _q(dialect, database)
    everything = f"{_q(dialect, _escaped(database))}.*"
    # Not the migration's own user's: what it holds on the version databases
    # it holds already (planned: backends/mysql/privileges.py), and granting
    # itself would need GRANT OPTION there for nothing.
    me = session_grantee(connection)
    statements = [
        _grant(privilege, everything, _grantee(dialect, grantee), grantable)
        for grantee, privilege, grantable in connection.execute(
            sa.text(
                "SELECT GRANTEE, PRIVILEGE_TYPE, IS_GRANTABLE FROM information_schema"
                ".SCHEMA_PRIVILEGES WHERE TABLE_SCHEMA = :d AND PRIVILEGE_TYPE IN :p"
                " AND GRANTEE <> :me ORDER BY 1, 2"
            ).bindparams(sa.bindparam("p", expanding=True)),
            {"d": application, "p": list(_PRIVILEGES), "me": me},
        ).all()
    ]
    rows = connection.execute(
        sa.text(
            "SELECT TABLE_NAME, GRANTEE, PRIVILEGE_TYPE, IS_GRANTABLE FROM information_schema"
            ".TABLE_PRIVILEGES WHERE TABLE_SCHEMA = :d AND TABLE_NAME IN :t"
            " AND PRIVILEGE_TYPE IN :p AND GRANTEE <> :me ORDER BY 1, 2, 3"
        ).bindparams(sa.bindparam("t", expanding=True), sa.bindparam("p", expanding=True)),
        {"d": application, "t": tables, "p": list(_PRIVILEGES), "me": me},
    ).all()
    statements += [
        _grant(privilege, f"{db}.{_q(dialect, table)}", _grantee(dialect, grantee), grantable)
        for table, grantee, privilege, grantable in rows
    ]
    rows = connection.execute(
        sa.text(
            "SELECT TABLE_NAME, COLUMN_NAME, GRANTEE, PRIVILEGE_TYPE, IS_GRANTABLE"
            " FROM information_schema.COLUMN_PRIVILEGES WHERE TABLE_SCHEMA = :d"
            " AND TABLE_NAME IN :t AND PRIVILEGE_TYPE IN :p AND GRANTEE <> :me"
            " ORDER BY 1, 2, 3, 4"
        ).bindparams(sa.bindparam("t", expanding=True), sa.bindparam("p", expanding=True)),
        {"d": application, "t": tables, "p": list(_PRIVILEGES), "me": me},
    ).all()
    statements += [
        _grant(
            f"{privilege} ({_q(dialect, column)})",
            f"{db}.{_q(dialect, table)}",
            _grantee(dialect, grantee),
            grantable,
        )
        for table, column, grantee, privilege, grantable in rows
    ]
    return statements


def _escaped(database: str) -> str:
    """``database`` as a database-level ``GRANT`` must name it: there ``_`` and
    ``%`` are wildcards (``\\`` escapes), so unescaped, a grant on
    ``sqla_ids_after_shop`` would reach every database the pattern matches --
    and a migration user granted ``sqla\\_ids\\_%`` (a DBA's usual pattern)
    could not grant it at all (1044)."""
    return re.sub(r"([\\_%])", r"\\\1", database)


def _revokes(connection: Connection, database: str) -> list[Statement]:
    """MariaDB keeps a dropped view's (and database's) privileges, which would
    apply again to a database of that name: revoked before the drop (as they
    are held: by the escaped name, or by the name itself from a migration begun
    before the grants were escaped)."""
    dialect = connection.dialect
    db = _q(dialect, database)
    statements = []
    for held, grantee, privilege in connection.execute(
        sa.text(
            "SELECT DISTINCT TABLE_SCHEMA, GRANTEE, PRIVILEGE_TYPE FROM"
            " information_schema.SCHEMA_PRIVILEGES WHERE TABLE_SCHEMA IN :d ORDER BY 1, 2, 3"
        ).bindparams(sa.bindparam("d", expanding=True)),
        {"d": sorted({database, _escaped(database)})},
    ).all():
        on = f"{_q(dialect, str(held))}.*"
        statements.append(
            Statement(f"REVOKE {privilege} ON {on} FROM {_grantee(dialect, grantee)}")
        )
    # REVOKE ALL on a table takes its column privileges too, not its GRANT OPTION.
    for table, grantee, grantable in connection.execute(
        sa.text(
            "SELECT TABLE_NAME, GRANTEE, MAX(IS_GRANTABLE) FROM (SELECT TABLE_NAME, GRANTEE,"
            " IS_GRANTABLE FROM information_schema.TABLE_PRIVILEGES WHERE TABLE_SCHEMA = :d"
            " UNION ALL SELECT TABLE_NAME, GRANTEE, IS_GRANTABLE FROM"
            " information_schema.COLUMN_PRIVILEGES WHERE TABLE_SCHEMA = :d) AS g"
            " GROUP BY TABLE_NAME, GRANTEE ORDER BY 1, 2"
        ),
        {"d": database},
    ).all():
        on = f"{db}.{_q(dialect, table)} FROM {_grantee(dialect, grantee)}"
        statements.append(Statement(f"REVOKE ALL PRIVILEGES ON {on}"))
        if grantable == "YES":
            statements.append(Statement(f"REVOKE GRANT OPTION ON {on}"))
    return statements


# --- the steps ---------------------------------------------------------------------------


def _existing(connection: Connection, names: Iterable[str]) -> set[str]:
    wanted = sorted(names)
    if not wanted:
        return set()
    return set(
        connection.execute(
            sa.text(
                "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME IN :n"
            ).bindparams(sa.bindparam("n", expanding=True)),
            {"n": wanted},
        ).scalars()
    )


def refusals(connection: Connection, plan: PkMigrationPlan) -> list[str]:
    """Version databases whose names MariaDB cannot hold, or that exist already
    (another online migration with versions in this database, or the
    application's own), and sequences, which no view can serve: refused by
    name, before anything changes."""
    found = databases(connection, plan)
    if found is None:
        return []
    problems = [
        f"versions: the version database {name} would be longer than MariaDB's"
        f" {MAX_DATABASE_NAME} characters; choose a shorter prefix (versions='<prefix>')"
        for name in found.values()
        if len(name) > MAX_DATABASE_NAME
    ]
    # A sequence is used by name (NEXT VALUE FOR seq, NEXTVAL(seq)), which a
    # view cannot stand for: the application's statements on it would fail in
    # either version database.
    problems += [
        f"versions: {_application_database(connection)}.{name} is a sequence, which a"
        " version database cannot serve through a view (NEXT VALUE FOR needs the"
        " sequence itself); migrate without versions"
        for name in connection.execute(
            sa.text(
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"
                " AND TABLE_TYPE = 'SEQUENCE' ORDER BY 1"
            )
        ).scalars()
    ]
    sharing = _sharing(connection, plan)
    if not sharing:
        problems += [
            f"versions: the database {name} exists already (a database of the"
            " application, or left by a migration stopped half-way): drop it, or choose"
            " another prefix (versions='<prefix>')"
            for name in sorted(_existing(connection, found.values()))
        ]
    ours = set(_affected(plan))
    for other in sharing:
        shared = sorted(ours & set(_affected(other)))
        if shared:
            problems.append(
                f"versions: {', '.join(shared)} is served in the version databases by the"
                f" online migration of {other.table} too: contract that migration first, or"
                " choose another prefix (versions='<prefix>')"
            )
    return problems


def create_statements(connection: Connection, plan: PkMigrationPlan) -> list[Statement]:
    """At the expand's end: both version databases, a view of every table of the
    application's database in each (the affected ones shaped for their
    version, the others passed through) and the application's privileges on
    them. Each statement commits on its own; all of them can run again."""
    found = databases(connection, plan)
    if found is None:
        return []
    dialect = connection.dialect
    application = _application_database(connection)
    charset, collation = connection.execute(
        sa.text(
            "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM"
            " information_schema.SCHEMATA WHERE SCHEMA_NAME = :d"
        ),
        {"d": application},
    ).one()
    # Every table's columns in one query (one per table and version before).
    everything: dict[str, list[str]] = {}
    for table, column in connection.execute(
        sa.text(
            "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = :d ORDER BY TABLE_NAME, ORDINAL_POSITION"
        ),
        {"d": application},
    ).all():
        everything.setdefault(str(table), []).append(str(column))
    tables = list(everything)  # (in the ORDER BY's collation)
    affected = set(_affected(plan))
    statements: list[Statement] = []
    for version in VERSIONS:
        database = found[version]
        statements.append(
            Statement(
                f"CREATE DATABASE IF NOT EXISTS {_q(dialect, database)} CHARACTER SET"
                f" {_q(dialect, str(charset))} COLLATE {_q(dialect, str(collation))}"
            )
        )
        for table in tables:
            columns = everything[table]
            if table in affected:
                items = _items(plan, table, columns, version)
                sql = _view_sql(dialect, database, application, table, items)
            else:
                # Kept if there: another migration sharing the databases shaped it.
                items = [(column, column) for column in columns]
                sql = _view_sql(dialect, database, application, table, items, replace=False)
            statements.append(Statement(sql))
        statements += _grants(connection, application, database, tables)
    return statements


def drop_statements(connection: Connection, plan: PkMigrationPlan) -> list[Statement]:
    """Contract and undo: both version databases go (their privileges first),
    unless another migration still shares them (see :func:`passthrough_statements`)."""
    found = databases(connection, plan)
    if found is None or _sharing(connection, plan):
        return []
    present = _existing(connection, found.values())
    statements: list[Statement] = []
    for version in VERSIONS:
        if found[version] in present:
            statements += _revokes(connection, found[version])
            statements.append(
                Statement(f"DROP DATABASE IF EXISTS {_q(connection.dialect, found[version])}")
            )
    return statements


def passthrough_statements(connection: Connection, plan: PkMigrationPlan) -> list[Statement]:
    """After an undo, while another migration still shares the version databases:
    this migration's tables passed through again in both, its mapping's view gone."""
    found = databases(connection, plan)
    if found is None or not _sharing(connection, plan):
        return []
    dialect = connection.dialect
    application = _application_database(connection)
    present = _existing(connection, found.values())
    statements = []
    for version in VERSIONS:
        if found[version] not in present:
            continue
        for table in _affected(plan):
            items = [(column, column) for column in _columns(connection, application, table)]
            statements.append(
                Statement(_view_sql(dialect, found[version], application, table, items))
            )
        statements.append(
            Statement(
                f"DROP VIEW IF EXISTS {_q(dialect, found[version])}"
                f".{_q(dialect, plan.mapping_table)}"
            )
        )
    return statements


@dataclass
class _Views:
    """The version views of a migration's tables, read in one round trip."""

    found: dict[Version, str]
    """The version databases (:func:`databases`)."""
    application: str
    present: list[tuple[str, str]]
    """``(database, table)`` of the views there, in order."""
    columns: dict[str, list[str]]
    """Each affected table's columns in the database asked for, in their order."""


def _views(
    connection: Connection,
    plan: PkMigrationPlan,
    columns_of: Version | Literal["application"] | None,
) -> _Views | None:
    """The versions' views of the affected tables there, and the affected tables'
    columns in ``columns_of`` (``None``: none; ``"application"``: the base
    tables; or a version's views).

    The swap and its undo read this under their lock, where every round trip
    is a wait for the application: one query, where one for the views and one
    per table and version took 15 ms of the undo's stall (MariaDB 10.11). A
    schema named by ``=``, each in its own branch: ``TABLE_SCHEMA IN (...)``
    makes MariaDB scan every database of the server (``Scanned all
    databases``), ``=`` the one named."""
    prefix = prefix_of(plan.options.versions)
    if prefix is None:
        return None
    application = _application_database(connection)
    found = {version: version_database(prefix, version, application) for version in VERSIONS}
    affected = _affected(plan)
    branches = [
        f"SELECT 0 AS k, TABLE_SCHEMA AS d, TABLE_NAME AS t, NULL AS c, 0 AS o FROM"
        f" information_schema.VIEWS WHERE TABLE_SCHEMA = :v{n} AND TABLE_NAME IN :t"
        for n, _ in enumerate(VERSIONS)
    ]
    values: dict[str, object] = {f"v{n}": found[version] for n, version in enumerate(VERSIONS)}
    if columns_of is not None:
        branches.append(
            "SELECT 1, TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION FROM"
            " information_schema.COLUMNS WHERE TABLE_SCHEMA = :c AND TABLE_NAME IN :t"
        )
        values["c"] = application if columns_of == "application" else found[columns_of]
    rows = connection.execute(
        sa.text(" UNION ALL ".join(branches) + " ORDER BY k, d, t, o").bindparams(
            sa.bindparam("t", expanding=True)
        ),
        {**values, "t": affected},
    ).all()
    read = _Views(found, application, [], {})
    for kind, database, table, column, _ in rows:
        if kind == 0:
            read.present.append((str(database), str(table)))
        else:
            read.columns.setdefault(str(table), []).append(str(column))
    return read


def lock_names(connection: Connection, plan: PkMigrationPlan) -> list[str]:
    """The versions' views of the affected tables (quoted, database-qualified),
    locked with the tables by a locked step: the application's statements
    through them then wait at the view, where the step's replacements
    (:class:`Replacements`) queue ahead of them."""
    read = _views(connection, plan, None)
    if read is None:
        return []
    dialect = connection.dialect
    return [f"{_q(dialect, database)}.{_q(dialect, table)}" for database, table in read.present]


def swap_replacements(connection: Connection, plan: PkMigrationPlan) -> list[str]:
    """Under the swap's lock, before its statements run: the views of both
    versions as the swap leaves the tables (built from the columns now,
    renamed as the swap will rename them)."""
    return _views_of_both(connection, plan, swapped=True)


def unswap_replacements(connection: Connection, plan: PkMigrationPlan) -> list[str]:
    """Under the undo's lock: both versions' views passing the tables through
    (their columns get the original names back, which *before*'s views show;
    the UUID columns go); the undo then drops both databases, unless another
    migration shares them."""
    read = _views(connection, plan, "before")
    if read is None:
        return []
    dialect = connection.dialect
    found, application = read.found, read.application
    present = set(read.present)
    replacements = []
    for table in _affected(plan):
        if (found["before"], table) in present:
            items = [(column, column) for column in read.columns.get(table, [])]
            replacements.append(_view_sql(dialect, found["before"], application, table, items))
            if (found["after"], table) in present:
                replacements.append(_view_sql(dialect, found["after"], application, table, items))
    return replacements


@dataclass
class _Replacement:
    sql: str
    connection: Connection
    session: int
    thread: threading.Thread | None = None
    error: BaseException | None = None


@dataclass
class Replacements:
    """View replacements queued by other sessions while a locked step holds the
    tables and the views (see the module docstring), run as the step unlocks."""

    plan: PkMigrationPlan
    repair: Callable[[Connection], list[str]]
    """After the unlock, should a replacement have failed: the views' statements
    for the state the tables are in then."""
    pending: list[_Replacement] = field(default_factory=list)

    @staticmethod
    def queue(
        connection: Connection,
        plan: PkMigrationPlan,
        statements: list[str],
        repair: Callable[[Connection], list[str]],
    ) -> None:
        """Each statement in a session of its own, waiting for its view's lock
        (the caller holds it). Once per locked step: a retry under the lock
        builds the same views (see :func:`swapped_columns`)."""
        if not statements or _PENDING in connection.info or _LOCKED not in connection.info:
            return
        queued = Replacements(plan, repair)
        connection.info[_PENDING] = queued
        ready: list[tuple[Connection, int]] = connection.info.get(_SESSIONS, [])
        for sql in statements:
            helper, session = ready.pop() if ready else _open_session(connection)
            item = _Replacement(sql, helper, session)
            item.thread = threading.Thread(target=_run, args=(item,), daemon=True)
            item.thread.start()
            queued.pending.append(item)

    @staticmethod
    def locked(connection: Connection, sessions: int) -> None:
        """The session holds a locked step's tables from now on (see :meth:`queue`):
        called before it takes them, with the number of views locked with them
        (at most one replacement each), whose sessions open now."""
        ready: list[tuple[Connection, int]] = connection.info.setdefault(_SESSIONS, [])
        try:
            ready += _open_sessions(connection, sessions - len(ready))
        except BaseException:
            for helper, _ in connection.info.pop(_SESSIONS, []):
                helper.close()  # the step stops before its lock: none is left open
            raise
        connection.info[_LOCKED] = True

    @staticmethod
    def release(connection: Connection, unlock: list[Statement]) -> None:
        """Once every queued replacement waits for its lock, ``unlock`` (the
        tables and views unlocked), then wait for them; a replacement that
        failed (the step failed before renaming: its view names columns not
        there; or it waited too long) is run again here, from the catalog."""
        connection.info.pop(_LOCKED, None)
        for helper, _ in connection.info.pop(_SESSIONS, []):
            helper.close()  # not needed: the step queued fewer, or failed to lock
        queued = connection.info.pop(_PENDING, None)
        if not isinstance(queued, Replacements):
            return
        deadline = time.monotonic() + _QUEUE_SECONDS
        sessions = {item.session for item in queued.pending}
        while time.monotonic() < deadline:
            waiting = set(
                connection.execute(
                    sa.text(
                        "SELECT ID FROM information_schema.PROCESSLIST WHERE ID IN :i"
                        " AND STATE LIKE 'Waiting for%lock'"
                    ).bindparams(sa.bindparam("i", expanding=True)),
                    {"i": sorted(sessions)},
                ).scalars()
            )
            done = {
                item.session
                for item in queued.pending
                if item.thread and not item.thread.is_alive()
            }
            if sessions <= waiting | done:
                break
            time.sleep(0.01)
        for statement in unlock:
            execute_sql(connection, statement.sql)
        failed = []
        for item in queued.pending:
            if item.thread is not None:
                item.thread.join(_REPLACEMENT_WAIT_SECONDS + 5)
            item.connection.close()
            if item.error is not None:
                failed.append(item)
        if failed:
            logger.info(
                "%s: %d version view replacement(s) failed under the lock (%s)",
                queued.plan.table,
                len(failed),
                "; ".join(str(item.error).splitlines()[0] for item in failed),
            )
            for sql in queued.repair(connection):
                try:
                    execute_sql(connection, sql)
                except sa.exc.DBAPIError as error:
                    # Called as the step unlocks (also when it failed): the
                    # step's own error, if any, is the one to see; the views
                    # are built again by the step's next run.
                    logger.warning("%s: version view not rebuilt: %s", queued.plan.table, error)


def swap_repair(connection: Connection, plan: PkMigrationPlan) -> list[str]:
    """The views of both versions for the columns as they are (each pair as it
    stands: see :func:`_items`), should a replacement have failed; a swap
    stopped half-way has them right for what it did, and the resumed swap
    replaces them all."""
    return _views_of_both(connection, plan, swapped=False)


def _views_of_both(connection: Connection, plan: PkMigrationPlan, *, swapped: bool) -> list[str]:
    """Each affected table's view in both version databases (those there), from
    its columns now -- ``swapped``: renamed as the swap will rename them."""
    read = _views(connection, plan, "application")
    if read is None:
        return []
    dialect = connection.dialect
    present = set(read.present)
    statements = []
    for version in VERSIONS:
        for table in _affected(plan):
            if (read.found[version], table) not in present:
                continue
            columns = read.columns.get(table, [])
            if swapped:
                columns = swapped_columns(plan, table, columns)
            items = _items(plan, table, columns, version)
            statements.append(
                _view_sql(dialect, read.found[version], read.application, table, items)
            )
    return statements


def unswap_repair(connection: Connection, plan: PkMigrationPlan) -> list[str]:
    """The undo's views again, once the parent's old key has its name back."""
    application = _application_database(connection)
    if plan.old_column in _columns(connection, application, plan.table):
        return []
    return unswap_replacements(connection, plan)


def _open_session(connection: Connection) -> tuple[Connection, int]:
    """A session of the migration's engine for one replacement, and its id."""
    helper = connection.engine.connect()
    session = int(query_sql(helper, "SELECT CONNECTION_ID()").scalar_one())
    # Autocommit: a DDL commits anyway, and the pool's reset after it must not
    # wait for anything.
    query_sql(helper, f"SET SESSION lock_wait_timeout = {_REPLACEMENT_WAIT_SECONDS}")
    helper.commit()
    return helper, session


def _open_sessions(connection: Connection, count: int) -> list[tuple[Connection, int]]:
    """``count`` sessions (:func:`_open_session`), opened at once: a new MariaDB
    connection took 50-100 ms (10.11, PyMySQL), and one after the other six
    of them made each attempt at the swap or its undo 0.3-0.6 s longer. An
    error opening one is raised once the others are open, and closed: none is
    left checked out."""
    if count <= 0:
        return []
    if count == 1:
        return [_open_session(connection)]
    opened: list[tuple[Connection, int]] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            session = _open_session(connection)
        except BaseException as error:  # raised by the caller's thread below
            errors.append(error)
        else:
            opened.append(session)  # (list.append is atomic)

    threads = [threading.Thread(target=open_one, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        for helper, _ in opened:
            helper.close()
        raise errors[0]
    return opened


def _run(item: _Replacement) -> None:
    try:
        execute_sql(item.connection, item.sql)
        item.connection.commit()
    except Exception as error:  # reported (and the view repaired) by release()
        item.error = error
