"""MariaDB: the key migration while the application keeps writing.

The same phases as on PostgreSQL, shaped by what InnoDB can do without
blocking writes (``ALGORITHM=INPLACE, LOCK=NONE``: the table stays readable
and writable while it is rebuilt; only the start and the end take a short
exclusive metadata lock, bounded by ``lock_wait_timeout``):

* **expand**: the mapping table, one UUID column per affected column
  (``ADD COLUMN`` is instant), triggers keeping them in step with every
  ``INSERT``, ``UPDATE`` and ``DELETE``, and a UUIDv7 from
  ``sqla_ids_uuid7()`` for every new parent row. MariaDB fires no trigger
  for a foreign key's cascade: that is harmless for ``CASCADE`` (the new key
  of a parent does not change when its old key does; a deleted child is
  gone) and handled for ``SET NULL`` by giving the new column its own
  foreign key, then sweeping the child once more (below).
* **backfill**: the parent's new keys computed in SQL in old-key order (as on
  PostgreSQL; with a ``timestamp_column``, by
  :func:`~sqla_ids.migration.core.mapping.key_numbers` from the rows read);
  then the parent's primary key moves to the new column in one
  online rebuild (``DROP PRIMARY KEY, ADD PRIMARY KEY (new), ADD UNIQUE
  (old)``): InnoDB cannot swap its clustered index without a rebuild, so the
  rebuild happens here, online, and the swap needs none. Each child is then
  backfilled from the parent in keyset batches, and only then gets the
  indexes of its old column built again on the new one (one sorted build,
  online) and a foreign key added without validation
  (``foreign_key_checks=0``: metadata only; the verification below proves it
  holds), so cascades keep the new column right from then on. A reference
  whose rule is ``SET NULL`` is swept once more after that, for the rows a
  cascade emptied between their backfill and the foreign key (only those:
  :class:`NulledReferences`). A child whose every reference is ``NOT NULL``
  gets its indexes, foreign keys and the prepare's ``NOT NULL`` in one
  online rebuild instead (:meth:`MariaDBOnline._rebuild`): built apart, its
  indexes were built twice.
* **prepare**: the other children's new columns become ``NOT NULL`` (and
  their old ones nullable) in one online rebuild each; every row is then
  compared through the mapping, in one snapshot.
* **swap**: under ``LOCK TABLES`` (the application waits, for the time of a
  few metadata-only ``ALTER TABLE`` statements): foreign keys dropped and
  added again under their names, columns and indexes renamed, the new key's
  default and ``BEFORE INSERT`` trigger, triggers turned round so the old
  columns stay in step until the contract. Views over the columns are left
  as they are: MariaDB stores a view's text, its columns named
  (`` `db`.`table`.`column` ``), and resolves it at each query, which waits
  for the locked tables; after the swap (or its undo) the same text reads the
  columns that have the names (``tests/test_migration_online_views.py``).
* **contract**: under ``LOCK TABLES`` again, drop those triggers, the
  indexes the swap parked and the children's old columns (an instant ``DROP
  COLUMN``). The parent keeps ``<key>_old`` (unique) and the
  mapping table, as the offline migration does.

With ``versions`` (rolling deploys), two databases of views serve the tables
as *before* and *after* from the expand to the contract
(:mod:`~sqla_ids.migration.backends.mysql.versions`): the expand makes them,
the sync triggers work both ways (a row written through the other version
carries only the other column, looked up in the mapping), the swap gives the
children's UUID references a placeholder default for inserts through
*before* and has the views replaced by other sessions as it unlocks, and the
contract and the undo drop them.

UUID192 keys (``target="uuid192"``) are ``VARBINARY(24)``: the UUIDv7 and the
row's segment, which the backfill reads with each batch and the triggers from
the row they fire for -- no column default can read the row, so the triggers
make every new row's key until the contract, after which the application
does (as after the offline migration). A child written before its parent
(foreign key checks off) leaves the parent's key pending until the parent's
insert brings its segment (:func:`sync_trigger_statements`).

Lock waits: a statement of the migration never waits for a metadata lock (it
is retried, up to 25 times ``swap_attempts``, after 20-200 ms); row locks
wait ``innodb_lock_wait_timeout``, whole seconds on MariaDB, so
``lock_timeout`` is rounded up to at least one second there.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect

from sqla_ids.dialects import for_dialect
from sqla_ids.dialects.sql import ddl_sql, literal_for, query_sql, quote_name, quoter, text_sql
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration.backends.base import Backfill, Ddl, Mode, OnlineStrategy, Probe, Task
from sqla_ids.migration.backends.mysql import guards, keys, reflect, versions
from sqla_ids.migration.backends.mysql.reflect import (
    catalog_rows,
    index_clause,
    preserved_columns,
)
from sqla_ids.migration.core import analysis, mapping
from sqla_ids.migration.core.backfill import (
    ParentKeysWalk,
    Walk,
    backfilled_below,
    first_ms,
    timestamp_refusals,
)
from sqla_ids.migration.core.model import (
    OLD_COLUMN_COMMENT,
    ColumnDefinition,
    PkMigrationPlan,
    Reference,
    refuse,
)
from sqla_ids.migration.core.names import (
    Sides,
    child_old,
    mentions_object_name,
    object_name,
    rebuilt,
    references,
)
from sqla_ids.migration.core.progress import logger
from sqla_ids.migration.core.sql import Statement
from sqla_ids.types.server_functions import uuid7_function_create_sql

# MariaDB error numbers retried as lock waits: ER_LOCK_WAIT_TIMEOUT (row and
# metadata locks) and ER_LOCK_DEADLOCK.
_LOCK_ERRORS = (1205, 1213)

# Where a session's own isolation level is kept while the migration changes it:
# a user variable of the session (its name a constant, not data), and a mark in
# the connection's info that it holds it.
_ISOLATION = "sqla_ids_online_isolation"
_SAVED_ISOLATION = "@sqla_ids_online_isolation"
# Where a session's own database is kept while it works in the caller's.
_DATABASE = "sqla_ids_online_database"

# RENAME COLUMN / RENAME INDEX (metadata only) need MariaDB 10.5.2.
_MIN_VERSION = (10, 5, 2)

# The temporary table of a child backfill batch (one per session).
_BATCH = "sqla_ids_online_batch"
# The temporary table of a parent batch's keys.
_KEYS = "sqla_ids_online_keys"
# Set by a parent backfill batch for its UPDATE: the parent's sync trigger
# leaves the mapping to the batch, which writes it set-wise (ParentKeys._mapped).
# A user variable of the session (its name a constant, not data).
_QUIET = "@sqla_ids_backfill"

# The smallest buffer pool, as a share of the tables a migration rewrites, that
# the benchmark measured without stalls over 1 s: with a sixth (128 MB for
# 750 MB) the longest stall was 335-395 ms; with a twelfth (64 MB) the
# application's statements on those tables waited up to 2.4 s in the backfill
# and 2.0 s in the downgrade (docs/migration.md, "Measured").
_POOL_SHARE = 1 / 6

# With the tables locked (swap, unswap): how long one statement waits for a
# metadata lock held by a background thread or a transaction on a linked
# table, and how often the locked work is retried before giving up. Whole
# seconds: MariaDB's lock_wait_timeout takes no fraction.
_LOCKED_WAIT_SECONDS = 1
_LOCKED_ATTEMPTS = 5


def _q(bind: Connection | Dialect, name: str) -> str:
    dialect = bind if isinstance(bind, Dialect) else bind.dialect
    return quote_name(dialect, name)


def _columns(connection: Connection, table: str) -> dict[str, dict[str, Any]]:
    rows = catalog_rows(
        connection,
        "SELECT COLUMN_NAME, IS_NULLABLE, COLUMN_KEY, COLUMN_DEFAULT FROM"
        " information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t",
        {"t": table},
    )
    # (COLUMN_DEFAULT is NULL for a column without a default; DEFAULT NULL reads 'NULL'.)
    return {
        r[0]: {"nullable": r[1] == "YES", "key": r[2], "default": r[3] is not None} for r in rows
    }


def _indexes(connection: Connection, table: str) -> dict[str, list[str]]:
    rows = catalog_rows(
        connection,
        "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS"
        " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t ORDER BY INDEX_NAME, SEQ_IN_INDEX",
        {"t": table},
    )
    found: dict[str, list[str]] = {}
    for name, column in rows:
        found.setdefault(name, []).append(column)
    return found


def _foreign_keys(connection: Connection, table: str) -> set[str]:
    rows = catalog_rows(
        connection,
        "SELECT CONSTRAINT_NAME FROM information_schema.REFERENTIAL_CONSTRAINTS"
        " WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = :t",
        {"t": table},
    )
    return {row[0] for row in rows}


def _triggers(connection: Connection) -> set[str]:
    rows = catalog_rows(
        connection,
        "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()",
    )
    return {row[0] for row in rows}


def _unquoted(name: str) -> str:
    """A name as :attr:`NewKeyDefault.triggers` keeps it (quoted where needed), bare."""
    if name.startswith("`") and name.endswith("`"):
        return name[1:-1].replace("``", "`")
    return name


def _attached(connection: Connection, table: str, names: set[str]) -> set[str]:
    """See :meth:`MariaDBOnline.attached` (one table)."""
    params = {"t": table}
    found = {
        f"index {index} on {table}"
        for index, column in catalog_rows(
            connection,
            "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t",
            params,
        )
        if column in names
    }
    for name, on, column, parent, key in catalog_rows(
        connection,
        "SELECT CONSTRAINT_NAME, TABLE_NAME, COLUMN_NAME, REFERENCED_TABLE_NAME,"
        " REFERENCED_COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE"
        " WHERE TABLE_SCHEMA = DATABASE() AND REFERENCED_TABLE_NAME IS NOT NULL"
        " AND (TABLE_NAME = :t OR REFERENCED_TABLE_NAME = :t)",
        params,
    ):
        if (on == table and column in names) or (parent == table and key in names):
            found.add(f"foreign key {name} on {on}")
    texts = [
        (
            "generated column {} on " + table,
            "SELECT COLUMN_NAME, GENERATION_EXPRESSION FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t",
        ),
        (
            "check constraint {} on " + table,
            "SELECT CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS"
            " WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = :t",
        ),
        (
            "trigger {} on " + table,
            "SELECT TRIGGER_NAME, ACTION_STATEMENT FROM information_schema.TRIGGERS"
            " WHERE TRIGGER_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = :t",
        ),
    ]
    for what, sql in texts:
        for name, text in catalog_rows(connection, sql, params):
            if text and analysis.mentions(str(text), sorted(names), "`"):
                found.add(what.format(name))
    # A view names its columns qualified: `db`.`table`.`column`.
    qualified = ["`" + table.replace("`", "``") + "`.`" + c.replace("`", "``") + "`" for c in names]
    for name, text in catalog_rows(
        connection,
        "SELECT TABLE_NAME, VIEW_DEFINITION FROM information_schema.VIEWS"
        " WHERE TABLE_SCHEMA = DATABASE()",
    ):
        if any(q in (text or "") for q in qualified):
            found.add(f"view {name}")
    return found


def _pk_column(connection: Connection, table: str) -> list[str]:
    return _indexes(connection, table).get("PRIMARY", [])


def _lock_name(name: str) -> str:
    return "sqla_ids:" + hashlib.sha1(name.encode()).hexdigest()


def _new_type(dialect: Dialect, plan: PkMigrationPlan) -> str:
    """The type of the new key and reference columns: the plugin's ``UUIDv7`` as
    this server stores it, or ``UUID192Type`` (``VARBINARY(24)``)."""
    return str(mapping.new_key_type(plan).compile(dialect=dialect))


def _pending_variable(dialect: Dialect, plan: PkMigrationPlan) -> str:
    """The user variable through which the parent's ``BEFORE INSERT`` trigger
    hands its ``AFTER INSERT`` trigger the pending key it completed (see
    :func:`sync_trigger_statements`): per migration, as a session may write
    the tables of two."""
    return "@" + _q(dialect, object_name(plan, "pending", 0))


def _actions(ref: Reference) -> str:
    # Rules come from information_schema's fixed vocabulary (CASCADE, SET NULL...).
    sql = ""
    for key, words in (("ondelete", "ON DELETE"), ("onupdate", "ON UPDATE")):
        rule = str(ref.options.get(key) or "")
        if rule in ("CASCADE", "SET NULL", "SET DEFAULT", "NO ACTION", "RESTRICT"):
            sql += f" {words} {rule}"
    return sql


def _sets_null(ref: Reference) -> bool:
    """Whether a cascade of ``ref``'s foreign key sets the column (``SET NULL``,
    or ``SET DEFAULT``, which InnoDB refuses but the catalog may name)."""
    return bool(ref.constraint) and any(
        str(ref.options.get(key) or "") in ("SET NULL", "SET DEFAULT")
        for key in ("ondelete", "onupdate")
    )


def _body(plan: PkMigrationPlan, table: str, column: str) -> str:
    """The recorded definition of ``table.column`` without its name and comment."""
    definition = plan.column_definition(table, column)
    if definition is None:  # pragma: no cover - every converted column is recorded
        raise refuse(f"no recorded definition of {table}.{column}", plan.table)
    line = definition.definition
    head = "`" + column.replace("`", "``") + "` "
    body = line[len(head) :] if line.startswith(head) else line
    if definition.comment:
        cut = body.rfind(" COMMENT '")
        body = body[:cut] if cut >= 0 else body
    return body


def _restored(dialect: Dialect, plan: PkMigrationPlan, table: str, column: str) -> str:
    """``MODIFY COLUMN`` putting ``table.column`` back exactly as recorded (comment too)."""
    definition = plan.column_definition(table, column)
    comment = definition.comment if definition is not None else ""
    return f"MODIFY COLUMN {_q(dialect, column)} {_body(plan, table, column)}" + (
        f" COMMENT {literal_for(dialect, comment)}" if comment else ""
    )


def _with_default(body: str, default: str) -> str:
    """A recorded column body with ``default`` if it has none."""
    if " DEFAULT " in f" {body} ":
        return body
    return f"{body} DEFAULT {default}"


def _nullable(body: str) -> str:
    return body.replace(" NOT NULL", " NULL", 1)


def old_key_index(connection: Connection, plan: PkMigrationPlan) -> str | None:
    """The unique index an online migration leaves on the parent's old key
    (named after it: it keeps the old key unique, and indexed as an
    ``AUTO_INCREMENT`` column must be, from the backfill on), if it is there.
    The offline restore after the contract drops it with the old column's name."""
    if not plan.options.online:
        return None
    found = _indexes(connection, plan.table).get(plan.old_column)
    return plan.old_column if found == [plan.old_column] else None


def _parked_index(plan: PkMigrationPlan, number: int) -> str:
    """Where the swap parks an original index over a column leaving (see
    :meth:`MariaDBOnline._index_swap`) until the contract drops it."""
    return object_name(plan, "ixo", number)


def link_keys(plan: PkMigrationPlan, table: str) -> list[tuple[int, list[str]]]:
    """The child's primary key over references of this migration (a link
    table's, or a one-to-one child's): its number and columns, if it has one."""
    return [
        (number, dep.columns)
        for number, dep in rebuilt(plan)
        if dep.table == table and dep.kind == "primary"
    ]


def _key_move(
    dialect: Dialect,
    plan: PkMigrationPlan,
    table: str,
    sides: Sides,
    indexes: dict[str, list[str]],
) -> list[str]:
    """Clauses moving a link table's primary key onto the columns replacing its
    references (``sides``), in the child's online rebuild; none where it has
    moved (``indexes``: the child's now).

    InnoDB's clustered index cannot change without a rebuild, so the key moves
    where the child is rebuilt anyway (its new column made ``NOT NULL``), and
    the swap only renames. The columns leaving the key stay indexed under a
    parked unique index: the foreign key on them needs one (a foreign key left
    without an index, as ``foreign_key_checks=0`` allows, fails every cascade
    through it with 1451), and reads by them keep theirs. Going up, the
    contract drops it; coming down, the undo of the swap."""

    def cols(names: list[str]) -> str:
        return ", ".join(_q(dialect, c) for c in names)

    result: list[str] = []
    for number, columns in link_keys(plan, table):
        if indexes.get("PRIMARY") != columns:
            continue
        target = [sides.new_column(table, c) for c in columns]
        parked = _parked_index(plan, number)
        result += ["DROP PRIMARY KEY", f"ADD PRIMARY KEY ({cols(target)})"]
        if parked in indexes:  # coming down: over the columns arriving (the old values)
            result.append(f"DROP INDEX {_q(dialect, parked)}")
        result.append(f"ADD UNIQUE INDEX {_q(dialect, parked)} ({cols(columns)})")
    return result


def _old_values_stay_not_null(plan: PkMigrationPlan) -> bool:
    """Whether a ``NOT NULL`` reference's old values stay ``NOT NULL`` from the
    swap to the contract.

    Between the two, the triggers fill a child's old column from its parent's
    ``<key>_old``, which an ``AUTO_INCREMENT`` key numbers for every new
    parent: the column never needs a ``NULL``. Leaving it ``NOT NULL`` spares
    the online downgrade a rebuild of every such child to make it ``NOT NULL``
    again -- a rebuild that must take the child's metadata lock, which every
    application transaction writing the parent holds too (MariaDB locks a
    foreign key's other table), so that waiting for it makes MariaDB roll back
    the application's transaction that writes a parent and then its child.
    Without ``AUTO_INCREMENT``, new parents have no old key; columns kept
    after the contract (``keep_child_old_columns``) outlive the triggers: both
    become nullable at the prepare, as before.
    """
    return plan.default.kind == "auto_increment" and not plan.keep_child_old_columns


def pool_advice(pool_bytes: int, tables_bytes: int, share: float = _POOL_SHARE) -> str | None:
    """What to do about a buffer pool smaller than ``share`` of the tables a
    migration rewrites (``None``: nothing)."""
    if tables_bytes <= 0 or pool_bytes >= share * tables_bytes:
        return None
    mb = 1024 * 1024
    return (
        f"the InnoDB buffer pool ({pool_bytes / mb:,.0f} MB) is"
        f" {100 * pool_bytes / tables_bytes:.0f}% of the {tables_bytes / mb:,.0f} MB of"
        " tables this migration rewrites; with a pool a twelfth of them the backfill"
        " stalled the application's statements on them for up to 2.4 s, from a sixth on"
        ' for under 400 ms (docs/migration.md, "Measured"): raise innodb_buffer_pool_size'
        f" (dynamic) to {-(-share * tables_bytes // mb):,.0f} MB or more before"
        " migrating, or expect such stalls"
    )


# --- what the statements are built from: the catalog --------------------------------


@dataclass
class Catalog:
    """The affected tables' columns, indexes, foreign keys and triggers, read
    just before a step's statements are built (:func:`read_catalog`).

    MariaDB's DDL commits statement by statement, and a step killed half-way
    continues from what the catalog shows: every statement is built only when
    the catalog says it is still to do. A builder that emits a statement
    applies its effect here too (:meth:`rename_index`...), so the statements
    after it are built from what the database will hold by then.
    """

    columns: dict[str, dict[str, bool]] = field(default_factory=dict)
    """table -> column -> nullable, in the table's order."""
    indexes: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    """table -> index -> its columns."""
    foreign_keys: dict[str, set[str]] = field(default_factory=dict)
    """table -> names of its foreign keys."""
    triggers: set[str] = field(default_factory=set)
    """Names of the database's triggers."""
    mapping: bool = False
    """Whether the mapping table exists."""
    defaults: dict[str, set[str]] = field(default_factory=dict)
    """table -> its columns with a default."""
    preserved: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """table -> its ``ON UPDATE CURRENT_TIMESTAMP`` columns (read for UUID192 keys
    only: the statements completing pending keys keep them, see :func:`_keeping`)."""

    def rename_column(self, table: str, old: str, new: str, nullable: bool | None = None) -> None:
        """``old`` is ``new`` from now on (its nullability changed or kept; its
        default kept, see :meth:`set_default`)."""
        columns = self.columns.setdefault(table, {})
        kept = columns.pop(old, True)
        columns[new] = kept if nullable is None else nullable
        defaults = self.defaults.setdefault(table, set())
        if old in defaults:
            defaults.discard(old)
            defaults.add(new)

    def set_default(self, table: str, column: str, default: bool) -> None:
        """``column`` has a default from now on, or none."""
        defaults = self.defaults.setdefault(table, set())
        if default:
            defaults.add(column)
        else:
            defaults.discard(column)

    def drop_column(self, table: str, column: str) -> None:
        """``column`` is gone, and the indexes only over it with it."""
        self.columns.get(table, {}).pop(column, None)
        for name, cols in list(self.indexes.get(table, {}).items()):
            if column in cols:
                cols.remove(column)
                if not cols:
                    del self.indexes[table][name]

    def rename_index(self, table: str, old: str, new: str) -> None:
        """Index ``old`` is ``new`` from now on."""
        indexes = self.indexes.setdefault(table, {})
        indexes[new] = indexes.pop(old, [])

    def drop_index(self, table: str, name: str) -> None:
        """Index ``name`` is gone."""
        self.indexes.get(table, {}).pop(name, None)


def read_catalog(connection: Connection, plan: PkMigrationPlan) -> Catalog:
    """The :class:`Catalog` of the affected tables as they are now."""
    catalog = Catalog()
    for table in plan.affected_tables:
        columns = _columns(connection, table)
        catalog.columns[table] = {name: info["nullable"] for name, info in columns.items()}
        catalog.defaults[table] = {name for name, info in columns.items() if info["default"]}
        if plan.uuid192:
            catalog.preserved[table] = preserved_columns(connection, table)
        catalog.indexes[table] = _indexes(connection, table)
        catalog.foreign_keys[table] = _foreign_keys(connection, table)
    catalog.triggers = _triggers(connection)
    catalog.mapping = bool(
        catalog_rows(
            connection,
            "SELECT COUNT(*) FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t",
            {"t": plan.mapping_table},
        )[0][0]
    )
    return catalog


# --- statements ------------------------------------------------------------------------


def _trigger_names(plan: PkMigrationPlan) -> list[tuple[str, str, str, str]]:
    """(name, table, timing, event) of every trigger this migration may create."""
    tables = sorted({plan.table, *(r.table for _, r in references(plan))})
    names = []
    for n, table in enumerate(tables):
        for kind, timing, event in (
            ("bi", "BEFORE", "INSERT"),
            ("bu", "BEFORE", "UPDATE"),
            ("ai", "AFTER", "INSERT"),
            ("ad", "AFTER", "DELETE"),
        ):
            names.append((object_name(plan, kind, n), table, timing, event))
    return names


def drop_trigger_statements(
    dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog
) -> list[Statement]:
    """Drop the sync triggers there are."""
    statements = []
    for name, *_ in _trigger_names(plan):
        if name in catalog.triggers:
            statements.append(Statement(f"DROP TRIGGER IF EXISTS {_q(dialect, name)}"))
            catalog.triggers.discard(name)
    return statements


def _old_references_follow(
    dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog, ok: str
) -> list[str]:
    """Trigger SQL, between the swap and the contract: a parent's old key changed
    (by the old code, through *before*, or on ``<key>_old``) does to the
    children's old values what their foreign key's ``ON UPDATE`` rule did
    before the swap -- the foreign keys are on the UUID columns now, and
    MariaDB fires no trigger for a cascade anyway: ``CASCADE`` follows, ``SET
    NULL`` (and ``SET DEFAULT``) empties the old value and the UUID reference
    both, ``NO ACTION``/``RESTRICT`` refuses the change (SQLSTATE 23000) while
    a child still has the old value. A table referencing itself
    is left out: a trigger may not write its own table (1442); its old values
    stay as they were (docs/migration.md)."""
    q = quoter(dialect)
    lines: list[str] = []
    for n, ref in references(plan):
        if ref.table == plan.table:
            continue
        c, old = q(ref.table), q(child_old(plan, n, ref))
        keep = _keeping(dialect, catalog, ref.table)
        rule = str(ref.options.get("onupdate") or "NO ACTION").upper()
        # Not once the undo has put a foreign key back on the old values: it
        # does the rule itself -- after the parent's row changed, where this
        # BEFORE trigger's rewrite of the children would point them at a key
        # no row has yet (1452). (A trigger's names resolve in its database.)
        lines.append(
            "  IF NOT EXISTS (SELECT 1 FROM information_schema.KEY_COLUMN_USAGE"
            " WHERE TABLE_SCHEMA = DATABASE()"
            f" AND TABLE_NAME = {literal_for(dialect, ref.table)}"
            f" AND COLUMN_NAME = {literal_for(dialect, child_old(plan, n, ref))}"
            f" AND REFERENCED_TABLE_NAME = {literal_for(dialect, plan.table)}) THEN"
        )
        if rule == "CASCADE":
            lines.append(f"  UPDATE {c} SET {old} = NEW.{ok}{keep} WHERE {old} = OLD.{ok};")
        elif rule in ("SET NULL", "SET DEFAULT"):
            # Both sides: the relationship is gone in *after* too.
            both = f"{old} = NULL, {q(ref.column)} = NULL"
            lines.append(f"  UPDATE {c} SET {both}{keep} WHERE {old} = OLD.{ok};")
        else:
            # (MESSAGE_TEXT holds 128 characters: the table's name, at most 64.)
            message = literal_for(dialect, f"the key is still referenced from {ref.table}")
            lines += [
                f"  IF EXISTS (SELECT 1 FROM {c} WHERE {old} = OLD.{ok}) THEN",
                f"    SIGNAL SQLSTATE '23000' SET MESSAGE_TEXT = {message};",
                "  END IF;",
            ]
        lines.append("  END IF;")
    return lines


def sync_trigger_statements(
    dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog, forward: bool
) -> list[Statement]:
    """Triggers keeping the other side in step: ``forward`` (before the swap)
    the new columns follow the old ones, otherwise the old follow the new.

    Each ``CREATE TRIGGER`` commits on its own and a retried expand continues
    where it stopped, so the application writes between two of them: the
    triggers that keep the mapping go first and the one giving new parent
    rows their key last -- a row inserted before it exists gets its key
    from the backfill, with its mapping. Turned round (at the swap, tables
    locked), the old ones go first.

    UUID192 keys carry their row's segment (:func:`keys.row_segment_sql`), so
    the triggers make them -- no column default can read the row. A child
    written before its parent chooses the parent's key *pending*
    (:data:`keys.PENDING_LENGTH`: the segment is not known yet); the parent's
    ``BEFORE INSERT`` completes its own, and hands the pending value to its
    ``AFTER INSERT`` (:func:`_pending_variable`), which completes the children
    that took it -- once the parent's row exists, which their foreign key on
    the new column looks for. A child in the parent's own table cannot be
    updated by the parent's trigger (MariaDB refuses a trigger writing the
    table its statement writes, 1442): the backfill's sweeps, the prepare's
    repair and the swap complete those (:func:`_completed_self_references`).
    """

    def q(name: str) -> str:
        return _q(dialect, name)

    statements = [] if forward else drop_trigger_statements(dialect, plan, catalog)
    m = q(plan.mapping_table)
    key_tmp = plan.temp_column(plan.table, plan.column)
    old_key, new_key = (plan.column, key_tmp) if forward else (plan.old_column, plan.column)
    ok, nk = q(old_key), q(new_key)
    nil = keys.placeholder_sql(plan)
    segment = keys.row_segment_sql(
        dialect, plan, "NEW", catalog.columns.get(plan.table, {}), swapped=not forward
    )
    made = keys.stored_key_sql(plan, "sqla_ids_uuid7()", segment)
    # The children the parent's insert completes (the other tables: see above).
    completing = (
        [(n, ref) for n, ref in references(plan) if ref.table != plan.table]
        if forward and segment is not None
        else []
    )
    pending = _pending_variable(dialect, plan)
    # Set by a child written through *after* before its parent (see below).
    orphans = "@" + q(object_name(plan, "orphans", 0))
    upsert = (
        f"INSERT INTO {m} (old_key, new_key) VALUES (NEW.{ok}, NEW.{nk})"
        " ON DUPLICATE KEY UPDATE new_key = VALUES(new_key);"
    )
    lines: dict[tuple[str, str, str], list[str]] = {}

    def add(table: str, timing: str, event: str, *body: str) -> None:
        lines.setdefault((table, timing, event), []).extend(body)

    # The parent: a key for every new row, and the mapping following inserts,
    # changes of the old key and deletes (cascaded deletes fire no trigger:
    # their mapping rows stay, unused, and are not counted by the checks).
    if forward:
        # The mapping is where a key's new value is chosen, first come first
        # served: a child written before its parent (foreign key checks off:
        # imports, fixtures) chose it already, and the parent takes it. An
        # AUTO_INCREMENT key is not known yet here (0): nothing can have chosen
        # its value, and the AFTER INSERT trigger maps it. A pending UUID192
        # key a child chose gets this row's segment, in the mapping at once (a
        # reference to the row itself, in this same row, reads it there); the
        # AFTER INSERT trigger completes the children (the variable is cleared
        # first: an INSERT IGNORE or upsert whose row was not inserted left it
        # set).
        full = keys.append_segment_sql(keys.pending_uuid_sql(f"NEW.{nk}"), segment)
        completed = [
            f"  IF {keys.is_pending_sql(f'NEW.{nk}')} THEN",
            *([f"    SET {pending} = NEW.{nk};"] if completing else []),
            f"    SET NEW.{nk} = {full};",
            f"    UPDATE {m} SET new_key = NEW.{nk} WHERE old_key = NEW.{ok};",
            "  END IF;",
        ]
        add(
            plan.table,
            "BEFORE",
            "INSERT",
            *([f"SET {pending} = NULL;"] if completing else []),
            f"IF NEW.{ok} IS NOT NULL AND NEW.{ok} <> 0 THEN",
            f"  INSERT INTO {m} (old_key, new_key) VALUES (NEW.{ok},"
            f" COALESCE(NULLIF(NEW.{nk}, {nil}), {made}))"
            " ON DUPLICATE KEY UPDATE old_key = old_key;",
            f"  SET NEW.{nk} = (SELECT new_key FROM {m} WHERE old_key = NEW.{ok});",
            *(completed if segment is not None else []),
            f"ELSEIF NEW.{nk} IS NULL OR NEW.{nk} = {nil} THEN",
            f"  SET NEW.{nk} = {made};",
            "END IF;",
        )
    elif plan.uuid192:
        # From the swap to the contract: a row inserted without a key (code
        # not switched yet) gets one with its segment, replacing the key's
        # placeholder default (UUIDv7 keys: plan.new_default's trigger).
        add(
            plan.table,
            "BEFORE",
            "INSERT",
            f"IF NEW.{nk} IS NULL OR NEW.{nk} = {nil} THEN SET NEW.{nk} = {made}; END IF;",
        )
    elif plan.options.versions:
        # Serving versions, the old code names old keys after the swap too: a
        # child it writes before its parent (foreign key checks off), or in the
        # same row (a row referencing itself), chose the parent's UUID in the
        # mapping by the old key -- first come first served, as before the swap:
        # the row maps itself before it is written, and takes the UUID chosen.
        add(
            plan.table,
            "BEFORE",
            "INSERT",
            f"IF NEW.{ok} IS NOT NULL AND NEW.{ok} <> 0 THEN",
            f"  INSERT INTO {m} (old_key, new_key) VALUES (NEW.{ok},"
            f" COALESCE(NULLIF(NEW.{nk}, {nil}), {made}))"
            " ON DUPLICATE KEY UPDATE old_key = old_key;",
            f"  SET NEW.{nk} = (SELECT new_key FROM {m} WHERE old_key = NEW.{ok});",
            "END IF;",
        )
    add(
        plan.table,
        "BEFORE",
        "UPDATE",
        f"IF NOT (NEW.{ok} <=> OLD.{ok}) AND OLD.{nk} IS NOT NULL THEN",
        f"  UPDATE {m} SET old_key = NEW.{ok} WHERE new_key = OLD.{nk};",
        *([] if forward else _old_references_follow(dialect, plan, catalog, ok)),
        "END IF;",
        # Not for a parent backfill batch's UPDATE (before the swap): it maps
        # its rows itself, set-wise (ParentKeys._mapped).
        f"IF NOT (NEW.{nk} <=> OLD.{nk}) AND NEW.{nk} IS NOT NULL AND NEW.{ok} IS NOT NULL"
        + (f" AND {_QUIET} IS NULL" if forward else "")
        + " THEN",
        f"  DELETE FROM {m} WHERE new_key = OLD.{nk};",
        f"  {upsert}",
        "END IF;",
    )
    add(
        plan.table,
        "AFTER",
        "INSERT",
        f"IF NEW.{ok} IS NOT NULL AND NEW.{nk} IS NOT NULL THEN {upsert} END IF;",
    )
    if completing:
        # Only when the BEFORE INSERT trigger completed a pending key: a search
        # of the children for every insert would take gap locks on their
        # indexes (REPEATABLE READ), which two transactions inserting parents
        # and then children deadlock on.
        add(
            plan.table,
            "AFTER",
            "INSERT",
            f"IF {pending} IS NOT NULL THEN",
            *(
                f"  UPDATE {q(ref.table)} SET {q(plan.temp_column(ref.table, ref.column))}"
                f" = NEW.{nk}{_keeping(dialect, catalog, ref.table)}"
                f" WHERE {q(ref.column)} = NEW.{ok}"
                f" AND {q(plan.temp_column(ref.table, ref.column))} = {pending};"
                for _, ref in completing
            ),
            f"  SET {pending} = NULL;",
            "END IF;",
        )
    add(plan.table, "AFTER", "DELETE", f"DELETE FROM {m} WHERE old_key = OLD.{ok};")
    if plan.options.versions and not forward:
        # After the swap the foreign keys are on the UUID columns: ON DELETE SET
        # NULL empties a child's UUID reference, and MariaDB fires no trigger
        # for it -- *before* would read the old value, pointing at no row. It
        # goes too, as the old foreign key did (not in the parent's own table:
        # 1442). CASCADE deletes the whole row.
        for n, ref in references(plan):
            if ref.table != plan.table and str(ref.options.get("ondelete") or "").upper() in (
                "SET NULL",
                "SET DEFAULT",
            ):
                old = q(child_old(plan, n, ref))
                add(
                    plan.table,
                    "AFTER",
                    "DELETE",
                    f"UPDATE {q(ref.table)} SET {old} = NULL"
                    f"{_keeping(dialect, catalog, ref.table)} WHERE {old} = OLD.{ok};",
                )
    p = q(plan.table)
    chosen = (
        keys.pending_key_sql("sqla_ids_uuid7()")
        if segment is not None
        else keys.stored_key_sql(plan, "sqla_ids_uuid7()", None)
    )
    for n, ref in references(plan):
        tmp = plan.temp_column(ref.table, ref.column)
        if forward:
            source, target, look, give = ref.column, tmp, plan.column, key_tmp
        else:
            source, target = ref.column, child_old(plan, n, ref)
            look, give = plan.column, plan.old_column
        s, t = q(source), q(target)
        # A locking read: it sees the parent row committed a moment ago even
        # in a REPEATABLE READ transaction whose snapshot is older (the
        # foreign key check reads it the same way).
        lookup = (
            f"SET NEW.{t} = (SELECT {q(give)} FROM {p} WHERE {q(look)} = NEW.{s}"
            " LOCK IN SHARE MODE);"
        )
        if not forward and _old_values_stay_not_null(plan) and not ref.nullable:
            # The old values stay NOT NULL until the contract: a child written
            # before its parent (checks off) gets a placeholder, which the
            # online undo's backfill replaces once the parent is there (the
            # checks take a value no parent has for unknown, not for wrong).
            placeholder = "0" if plan.key_kind == "integer" else "''"
            lookup = (
                f"SET NEW.{t} = COALESCE((SELECT {q(give)} FROM {p} WHERE {q(look)} = NEW.{s}"
                f" LOCK IN SHARE MODE), {placeholder});"
            )
        if forward:
            # A parent nowhere to be seen (foreign key checks off: written
            # later, or never): its new key is chosen here, in the mapping,
            # which the parent will take (pending, with a segment to come).
            # One that exists without a new key yet is not backfilled: the
            # backfill sets the child.
            lookup += (
                f" IF NEW.{t} IS NULL AND NEW.{s} IS NOT NULL AND NOT EXISTS"
                f" (SELECT 1 FROM {p} WHERE {q(look)} = NEW.{s}) THEN"
                f" INSERT INTO {m} (old_key, new_key) VALUES (NEW.{s}, {chosen})"
                " ON DUPLICATE KEY UPDATE old_key = old_key;"
                f" SET NEW.{t} = (SELECT new_key FROM {m} WHERE old_key = NEW.{s}); END IF;"
            )
        if not plan.options.versions:
            add(ref.table, "BEFORE", "INSERT", lookup)
            add(
                ref.table, "BEFORE", "UPDATE", f"IF NOT (NEW.{s} <=> OLD.{s}) THEN {lookup} END IF;"
            )
            continue
        # Two versions write (versions=...): a row written through the other
        # one carries only the following column -- a child inserted through
        # *after* before the swap only its UUID reference, one inserted
        # through *before* after it only its old value -- the leading one
        # holding what the view left it: NULL, its placeholder default, or
        # the implicit value of a NOT NULL column without one. The leading
        # value is then looked up in the mapping (a locking read, as above).
        # Not for the migration's own writes (the backfill sets the following
        # column from the mapping already).
        if forward:
            lead_empty = "0" if plan.key_kind == "integer" else "''"
            follow_empty, by, take = nil, "new_key", "old_key"
        else:
            lead_empty, by, take = nil, "old_key", "new_key"
            follow_empty = "0" if plan.key_kind == "integer" else "''"
        follow = f"SET NEW.{s} = (SELECT {take} FROM {m} WHERE {by} = NEW.{t} LOCK IN SHARE MODE);"
        # A parent nowhere to be seen (foreign key checks off: written later, or
        # never). After the swap, a child the old code writes (its old value
        # following) chooses the parent's UUID in the mapping, which the parent
        # takes (above). No old key can be chosen for a child the new code
        # writes (its UUID leading: through *after* before the swap, on the
        # tables after it) -- AUTO_INCREMENT makes it only as the parent's row
        # is written -- so its old value keeps what it has (NULL, or the
        # placeholder of a NOT NULL one), and the parent's AFTER INSERT gives
        # the children that took its UUID its old key: only in sessions that
        # wrote such a child (a search of the children for every insert would
        # take gap locks). Not in the parent's own table (1442): there the old
        # value stays empty (docs/migration.md, "Rolling deploys").
        missing = (
            f"NEW.{t} IS NOT NULL AND NEW.{s} IS NULL"
            f" AND NOT EXISTS (SELECT 1 FROM {p} WHERE {q(give)} = NEW.{t})"
        )
        if forward:
            old_value, uuid_value = s, t
            empty = "NULL" if ref.nullable else lead_empty
            follow += f" IF {missing} THEN SET NEW.{s} = {empty}; SET {orphans} = 1; END IF;"
        else:
            old_value, uuid_value = t, s
            stays = _old_values_stay_not_null(plan) and not ref.nullable
            empty = follow_empty if stays else "NULL"
            follow += (
                f" IF {missing} THEN INSERT INTO {m} (old_key, new_key) VALUES (NEW.{t}, {chosen})"
                " ON DUPLICATE KEY UPDATE old_key = old_key;"
                f" SET NEW.{s} = (SELECT new_key FROM {m} WHERE old_key = NEW.{t}); END IF;"
            )
            lookup += (
                f" IF {guards.VARIABLE} IS NULL AND NEW.{t} <=> {empty} AND NEW.{s} IS NOT NULL"
                f" AND NEW.{s} <> {nil} THEN SET {orphans} = 1; END IF;"
            )
        if ref.table != plan.table:
            o, u = old_value, uuid_value  # quoted (above)
            add(
                plan.table,
                "AFTER",
                "INSERT",
                f"IF {orphans} IS NOT NULL THEN UPDATE {q(ref.table)} SET {o} = NEW.{ok}"
                f"{_keeping(dialect, catalog, ref.table)} WHERE {u} = NEW.{nk}"
                f" AND {o} <=> {empty}; END IF;",
            )
        other = (
            f"{guards.VARIABLE} IS NULL AND NEW.{t} IS NOT NULL AND NEW.{t} <> {follow_empty}"
            f" AND (NEW.{s} IS NULL OR NEW.{s} = {lead_empty})"
        )
        add(ref.table, "BEFORE", "INSERT", f"IF {other} THEN {follow} ELSE {lookup} END IF;")
        add(
            ref.table,
            "BEFORE",
            "UPDATE",
            f"IF NOT (NEW.{s} <=> OLD.{s}) THEN {lookup}"
            f" ELSEIF {guards.VARIABLE} IS NULL AND NOT (NEW.{t} <=> OLD.{t}) THEN {follow}"
            " END IF;",
        )
    order = {"AFTER DELETE": 0, "AFTER INSERT": 1, "BEFORE UPDATE": 2, "BEFORE INSERT": 3}
    names = sorted(
        _trigger_names(plan),
        key=lambda t: (
            t[1] == plan.table and t[2:] == ("BEFORE", "INSERT"),
            order[" ".join(t[2:])],
        ),
    )
    for name, table, timing, event in names:
        body = lines.get((table, timing, event))
        if not body or name in catalog.triggers:
            continue
        statements.append(
            Statement(
                f"CREATE TRIGGER IF NOT EXISTS {q(name)} {timing} {event} ON {q(table)}"
                " FOR EACH ROW BEGIN\n" + "\n".join(body) + "\nEND"
            )
        )
        catalog.triggers.add(name)
    return statements


def expand_statements(
    connection: Connection, plan: PkMigrationPlan, catalog: Catalog
) -> list[Statement]:
    """The server function, the mapping table, new columns and sync triggers:
    what an earlier attempt did is skipped, by the catalog (each statement
    commits on its own; ``IF NOT EXISTS`` alone would still take the locks)."""
    dialect = connection.dialect
    schema = for_dialect(dialect).uuid7_function_schema(connection)
    statements = [Statement(sql) for sql in uuid7_function_create_sql(dialect, schema=schema)]
    if not catalog.mapping:
        create = sa.schema.CreateTable(mapping.mapping_table(plan))
        statements.append(Statement(ddl_sql(create, dialect)))
        catalog.mapping = True
    uuid_sql = _new_type(dialect, plan)
    for table, column in plan.targets():
        tmp = plan.temp_column(table, column)
        if tmp in catalog.columns.get(table, {}):
            continue
        definition = plan.column_definition(table, column)
        comment = (
            f" COMMENT {literal_for(dialect, definition.comment)}"
            if definition is not None and definition.comment
            else ""
        )
        # A nullable column added last is instant (LOCK=NONE: where the table's
        # format rules that out, an online rebuild rather than a lock); the
        # original column's comment goes with the values it will carry.
        statements.append(
            Statement(
                f"ALTER TABLE {_q(dialect, table)} ADD COLUMN IF NOT EXISTS"
                f" {_q(dialect, tmp)} {uuid_sql} NULL{comment}, LOCK=NONE"
            )
        )
        catalog.columns.setdefault(table, {})[tmp] = True
    if plan.options.versions:
        # *after*'s views hide the children's old values, which the triggers
        # fill; but MariaDB refuses an INSERT ... SELECT or an upsert through a
        # view leaving out a NOT NULL column without a default (1423), whatever
        # a trigger would set. A placeholder default (metadata only) lets them
        # through, as the swap's does for *before*; the abort drops it, the
        # swap's CHANGE COLUMN redefines the column.
        placeholder = "0" if plan.key_kind == "integer" else "''"
        for _, ref in references(plan):
            if not ref.nullable and ref.column not in catalog.defaults.get(ref.table, set()):
                statements.append(
                    Statement(
                        f"ALTER TABLE {_q(dialect, ref.table)} ALTER COLUMN"
                        f" {_q(dialect, ref.column)} SET DEFAULT {placeholder}, ALGORITHM=INSTANT"
                    )
                )
                catalog.set_default(ref.table, ref.column, True)
    return statements + sync_trigger_statements(dialect, plan, catalog, forward=True)


def lock_statements(
    dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog, views: Sequence[str] = ()
) -> list[Statement]:
    """``LOCK TABLES`` of every affected table and the mapping (if still there: a
    retried undo may have dropped it): the application waits, for the time of
    a few metadata-only statements, instead of seeing half a swap. MariaDB's
    DDL commits on its own; ``LOCK TABLES`` holds across those commits.
    ``views``: the versions' views (quoted, qualified; see
    :func:`versions.lock_names`), locked too."""
    tables = sorted(
        set(plan.affected_tables) | ({plan.mapping_table} if catalog.mapping else set())
    )
    locked = [f"{_q(dialect, t)} WRITE" for t in tables] + [f"{v} WRITE" for v in views]
    return [Statement("LOCK TABLES " + ", ".join(locked))]


def _position(
    dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog, table: str, column: str
) -> str:
    """Where ``table.column`` was (``FIRST``/``AFTER``): moving a column is instant."""
    definition = plan.column_definition(table, column)
    if definition is None:
        return ""
    if definition.after is None:
        return " FIRST"
    if definition.after not in catalog.columns.get(table, {}):
        return ""
    return f" AFTER {_q(dialect, definition.after)}"


def _leaving_index(plan: PkMigrationPlan, number: int) -> str:
    """Where an undo of the swap parks the migrated table's index over the UUID
    key until it drops it with the column (:func:`_index_swap`)."""
    return object_name(plan, "ixu", number)


def _leaving_indexes(plan: PkMigrationPlan, catalog: Catalog, table: str) -> list[str]:
    """The indexes :func:`_leaving_index` names that ``table`` has now."""
    indexes = catalog.indexes.get(table, {})
    return [
        _leaving_index(plan, number)
        for number, dep in rebuilt(plan)
        if dep.table == table and _leaving_index(plan, number) in indexes
    ]


def _index_swap(
    dialect: Dialect,
    plan: PkMigrationPlan,
    catalog: Catalog,
    table: str,
    sides: Sides,
    later: set[str] | frozenset[str] = frozenset(),
) -> list[str]:
    """The indexes over the columns arriving take the names of those over the
    columns leaving (not yet those over a column in ``later``), by renaming.

    Going up, each original index is parked under another name, next to its
    column, rather than dropped: the triggers keep that column in step
    until the contract, so the index stays right, and the online downgrade
    renames it back instead of building it again (an index build must get
    the table's metadata lock at its end). The contract drops it. Coming
    down, the UUID column's index goes (the undo drops the column) -- on the
    migrated table it is renamed aside first (:func:`_leaving_index`: not its
    build name, which a downgrade after an older swap gives the index it
    builds again), and goes just before its column: dropped in the statement
    that renames the columns, InnoDB refused
    it (1553, "needed in a foreign key constraint") when a child's foreign key
    to the key used it (a unique index starting with the key, once the primary
    key had moved back to the old column), not seeing the index that serves
    that foreign key under the columns' new names.
    """

    def q(name: str) -> str:
        return _q(dialect, name)

    existing = catalog.indexes.setdefault(table, {})
    clauses = []
    for number, dep in rebuilt(plan):
        if dep.table != table or dep.kind == "primary" or later & set(dep.columns):
            continue
        built, parked = object_name(plan, "ix", number), _parked_index(plan, number)
        # Coming down, the parked original if the swap parked it (an older
        # swap dropped it: the downgrade built it again).
        arriving = parked if not sides.up and parked in existing else built
        if arriving not in existing:
            continue
        if dep.name in existing:
            if sides.up and parked not in existing:
                clauses.append(f"RENAME INDEX {q(dep.name)} TO {q(parked)}")
                catalog.rename_index(table, dep.name, parked)
            elif not sides.up and table == plan.table and plan.column in dep.columns:
                leaving = _leaving_index(plan, number)
                clauses.append(f"RENAME INDEX {q(dep.name)} TO {q(leaving)}")
                catalog.rename_index(table, dep.name, leaving)
            else:
                clauses.append(f"DROP INDEX {q(dep.name)}")
                catalog.drop_index(table, dep.name)
        clauses.append(f"RENAME INDEX {q(arriving)} TO {q(dep.name)}")
        catalog.rename_index(table, arriving, dep.name)
    return clauses


def _exchange(
    dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog, sides: Sides
) -> list[Statement]:
    """The columns of ``sides`` exchange names and roles (metadata only).

    Every relationship stays enforced between any two statements: DDL commits
    statement by statement, and a migration killed between two of them leaves
    the application writing to the tables (unlocked) until it runs again.
    Each child has two foreign keys until its turn: the original one on the
    column leaving and ours on the column arriving.
    """

    def q(name: str) -> str:
        return _q(dialect, name)

    def comment_of(definition: ColumnDefinition | None) -> str:
        if definition is None or not definition.comment:
            return ""
        return f" COMMENT {literal_for(dialect, definition.comment)}"

    statements: list[Statement] = []
    uuid_sql = _new_type(dialect, plan)
    nil = keys.placeholder_sql(plan)
    # 1. The parent: names swapped, the key's default, comments. Both foreign
    # keys follow their parent column's new name.
    parent = catalog.columns.get(plan.table, {})
    if sides.key_new in parent and plan.column in parent:
        key_def = plan.column_definition(plan.table, plan.column)
        body = _body(plan, plan.table, plan.column)
        position = _position(dialect, plan, catalog, plan.table, plan.column)
        if sides.up:
            old_comment = OLD_COLUMN_COMMENT.format(table=plan.table, column=plan.column)
            old_body = body if plan.default.kind == "auto_increment" else _nullable(body)
            default = f" DEFAULT {plan.new_default_sql}" if plan.new_default_sql else ""
            if plan.uuid192:
                # Until the contract a row inserted without a key gets it from
                # the trigger, past the placeholder (an INSERT ... SELECT
                # leaving the column out needs a default).
                default = f" DEFAULT {nil}"
            clauses = [
                f"CHANGE COLUMN {q(plan.column)} {q(plan.old_column)} {old_body}"
                f" COMMENT {literal_for(dialect, old_comment)}",
                f"CHANGE COLUMN {q(sides.key_new)} {q(plan.column)} {uuid_sql} NOT NULL"
                f"{default}{comment_of(key_def)}{position}",
            ]
            catalog.rename_column(plan.table, plan.column, plan.old_column)
            catalog.rename_column(plan.table, sides.key_new, plan.column, nullable=False)
            catalog.set_default(plan.table, plan.column, bool(default))
        else:
            clauses = [
                f"CHANGE COLUMN {q(plan.column)} {q(sides.key_parked)} {uuid_sql}"
                f" NOT NULL DEFAULT {nil}",
                f"CHANGE COLUMN {q(plan.old_column)} {q(plan.column)} {body}"
                f"{comment_of(key_def)}{position}",
            ]
            catalog.rename_column(plan.table, plan.column, sides.key_parked, nullable=True)
            catalog.rename_column(plan.table, plan.old_column, plan.column)
        # A self-reference's indexes move with its foreign key, in step 2.
        self_references = {r.column for _, r in references(plan) if r.table == plan.table}
        clauses += _index_swap(dialect, plan, catalog, plan.table, sides, self_references)
        statements.append(
            Statement(f"ALTER TABLE {q(plan.table)} {', '.join(clauses)}, ALGORITHM=NOCOPY")
        )
    # 2. Each child, in two statements: the original foreign key goes with the
    # column leaving (ours still holds the one arriving), names swapped and
    # indexes renamed; then the original foreign key comes back on the
    # column that took its name, in the statement that drops ours (MariaDB
    # cannot drop and add one name in one statement).
    pairs = references(plan)
    for turn, (n, ref) in enumerate(pairs):
        columns = catalog.columns.get(ref.table, {})
        fks = catalog.foreign_keys.setdefault(ref.table, set())
        # A child referencing the parent twice (Sakila's film: language_id,
        # original_language_id) exchanges one column per statement: the indexes
        # over the other one wait for its turn. Coming down, the UUID column's
        # index goes, and the other column's foreign key still needs its own.
        waiting = {r.column for _, r in pairs[turn + 1 :] if r.table == ref.table}
        new, parked = sides.child_new(n, ref), sides.child_parked(n, ref)
        if new in columns and parked not in columns:
            definition = plan.column_definition(ref.table, ref.column)
            if sides.up:
                type_sql = f"{uuid_sql} {'NULL' if ref.nullable else 'NOT NULL'}"
                if plan.options.versions and not ref.nullable:
                    # Serving *before*: a child inserted through it leaves the
                    # UUID reference out, which the triggers then fill from the
                    # mapping (metadata only; the contract drops it).
                    type_sql += f" DEFAULT {nil}"
                    catalog.set_default(ref.table, ref.column, True)
                leaving = f"RENAME COLUMN {q(ref.column)} TO {q(parked)}"
                if not columns[ref.column]:
                    # The old values stay NOT NULL until the contract, filled by
                    # the triggers: a placeholder default lets an INSERT ...
                    # SELECT that leaves the column out through (metadata only).
                    placeholder = "0" if plan.key_kind == "integer" else "''"
                    leaving = (
                        f"CHANGE COLUMN {q(ref.column)} {q(parked)}"
                        f" {_with_default(_body(plan, ref.table, ref.column), placeholder)}"
                    )
            else:
                type_sql = _body(plan, ref.table, ref.column)
                # No trigger fills the UUID column leaving: a default (metadata
                # only; making it nullable would rebuild the table) lets the
                # application insert should the undo be stopped before it
                # drops the column (the lock ends with the connection).
                leaving = f"CHANGE COLUMN {q(ref.column)} {q(parked)} {uuid_sql}" + (
                    " NULL" if columns[ref.column] else f" NOT NULL DEFAULT {nil}"
                )
            clauses = [
                *([f"DROP FOREIGN KEY IF EXISTS {q(ref.constraint)}"] if ref.constraint else []),
                leaving,
                f"CHANGE COLUMN {q(new)} {q(ref.column)} {type_sql}{comment_of(definition)}"
                + _position(dialect, plan, catalog, ref.table, ref.column),
            ]
            if ref.constraint:
                fks.discard(ref.constraint)
            catalog.rename_column(ref.table, ref.column, parked)
            catalog.rename_column(ref.table, new, ref.column)
            clauses += _index_swap(dialect, plan, catalog, ref.table, sides, waiting)
            statements.append(
                Statement(f"ALTER TABLE {q(ref.table)} {', '.join(clauses)}, ALGORITHM=NOCOPY")
            )
        ours = object_name(plan, "fk", n)
        if ref.constraint and ours in fks:
            statements.append(
                Statement(
                    f"SET STATEMENT foreign_key_checks = 0 FOR ALTER TABLE {q(ref.table)}"
                    f" ADD CONSTRAINT {q(ref.constraint)} FOREIGN KEY IF NOT EXISTS"
                    f" ({q(ref.column)}) REFERENCES {q(plan.table)} ({q(plan.column)})"
                    f"{_actions(ref)}, DROP FOREIGN KEY {q(ours)}, ALGORITHM=NOCOPY"
                )
            )
            fks.discard(ours)
            fks.add(ref.constraint)
    return statements


def _completed_self_references(
    dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog
) -> list[Statement]:
    """A reference of the parent's own table to a parent written after it
    (foreign key checks off), with a UUID192 key pending there
    (:data:`keys.PENDING_LENGTH`), takes the parent's completed key from the
    mapping: the parent's trigger could not update its own table (1442).
    Before the swap renames the columns (not once it began: a swap resumed
    after it ran this already). The pending values sort after every key, so
    the new column's index (built by the backfill) finds them by a range."""
    options = plan.options
    if not plan.uuid192 or (options.segment_column is None and options.segment_sql is None):
        return []
    key_tmp = plan.temp_column(plan.table, plan.column)
    columns = catalog.columns.get(plan.table, {})
    if key_tmp not in columns or plan.old_column in columns:
        return []
    t, m = _q(dialect, plan.table), _q(dialect, plan.mapping_table)
    statements = []
    for _, ref in references(plan):
        tmp = plan.temp_column(ref.table, ref.column)
        if ref.table != plan.table or tmp not in columns:
            continue
        # The tables are locked under their names: no aliases (LOCK TABLES
        # would want them locked too).
        new = f"{t}.{_q(dialect, tmp)}"
        statements.append(
            Statement(
                f"UPDATE {t} JOIN {m} ON {m}.old_key = {t}.{_q(dialect, ref.column)}"
                f" SET {new} = {m}.new_key{_keeping(dialect, catalog, plan.table, f'{t}.')}"
                f" WHERE {keys.pending_range_sql(new)} AND {keys.is_pending_sql(new)}"
                f" AND NOT {keys.is_pending_sql(f'{m}.new_key')}"
            )
        )
    return statements


def swap_statements(dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog) -> list[Statement]:
    """The new columns take the old ones' names and roles (metadata only), the new
    key gets its ``BEFORE INSERT`` trigger and the sync triggers turn round."""
    statements = _completed_self_references(dialect, plan, catalog)
    statements += _exchange(dialect, plan, catalog, Sides(plan, up=True))
    statements += [Statement(sql) for sql in plan.new_default.trigger_sql]
    return statements + sync_trigger_statements(dialect, plan, catalog, forward=False)


def contract_statements(
    dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog
) -> list[Statement]:
    """Drop the sync triggers, the indexes the swap parked and the children's old
    columns (unless kept): metadata only, with the tables locked once (each
    statement needs its table's metadata lock, which an application that
    always has a transaction open leaves free only for an instant -- too rarely
    to find one per statement)."""

    def q(name: str) -> str:
        return _q(dialect, name)

    statements: list[Statement] = []
    if plan.uuid192 and plan.column in catalog.defaults.get(plan.table, set()):
        # The key's placeholder default goes before the trigger replacing it:
        # from now on the application makes the keys (as after the offline
        # migration), and a row inserted without one is refused rather than
        # given the placeholder (metadata only).
        statements.append(
            Statement(
                f"ALTER TABLE {q(plan.table)} ALTER COLUMN {q(plan.column)} DROP DEFAULT,"
                " ALGORITHM=INSTANT"
            )
        )
        catalog.set_default(plan.table, plan.column, False)
    if _old_values_stay_not_null(plan):
        # Until now the triggers filled the old values; a default (metadata
        # only) fills them for rows inserted after the triggers' removal,
        # should the migration be stopped before the columns' (the lock ends
        # with the connection).
        for n, ref in references(plan):
            old = child_old(plan, n, ref)
            nullable = catalog.columns.get(ref.table, {}).get(old)
            if nullable is False:
                statements.append(
                    Statement(
                        f"ALTER TABLE {q(ref.table)} ALTER COLUMN {q(old)} SET DEFAULT 0,"
                        " ALGORITHM=INSTANT"
                    )
                )
    if plan.options.versions:
        # The placeholder default the swap gave the children's UUID references
        # for *before*'s inserts: from now on the application gives them.
        for _, ref in references(plan):
            if not ref.nullable and ref.column in catalog.defaults.get(ref.table, set()):
                statements.append(
                    Statement(
                        f"ALTER TABLE {q(ref.table)} ALTER COLUMN {q(ref.column)} DROP DEFAULT,"
                        " ALGORITHM=INSTANT"
                    )
                )
                catalog.set_default(ref.table, ref.column, False)
    statements += drop_trigger_statements(dialect, plan, catalog)
    clauses: dict[str, list[str]] = {}
    for table in plan.affected_tables:
        existing = catalog.indexes.get(table, {})
        clauses[table] = [
            f"DROP INDEX {q(_parked_index(plan, number))}"
            for number, dep in rebuilt(plan)
            if dep.table == table and _parked_index(plan, number) in existing
        ]
    if not plan.keep_child_old_columns:
        for n, ref in references(plan):
            old = child_old(plan, n, ref)
            if old in catalog.columns.get(ref.table, {}):
                clauses[ref.table].append(f"DROP COLUMN {q(old)}")
    for table, todo in clauses.items():
        if todo:
            # NOCOPY: dropping an index or a column never rebuilds the table
            # (it would fail here rather than rebuild it locked).
            statements.append(
                Statement(f"ALTER TABLE {q(table)} {', '.join(todo)}, ALGORITHM=NOCOPY")
            )
    return statements


def abort_statements(dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog) -> list[Statement]:
    """Before the swap: everything expand and backfill added goes, the primary key
    moves back and the columns get their nullability back (online rebuilds where
    something was rebuilt).

    In an order that keeps every application statement working between any two
    of them (each commits on its own): the foreign keys on the new columns
    first, then the primary key back on the old key -- both while the triggers
    still fill the new columns -- then the triggers, and only then the columns
    they filled (dropped before them, a new row would get the placeholder
    default: a duplicate key, a foreign key to no row)."""

    def q(name: str) -> str:
        return _q(dialect, name)

    statements: list[Statement] = []
    for n, ref in references(plan):
        fks = catalog.foreign_keys.setdefault(ref.table, set())
        ours = object_name(plan, "fk", n)
        if ours in fks:
            statements.append(Statement(f"ALTER TABLE {q(ref.table)} DROP FOREIGN KEY {q(ours)}"))
            fks.discard(ours)
        if (
            plan.options.versions
            and ref.column in catalog.defaults.get(ref.table, set())
            and " DEFAULT " not in f" {_body(plan, ref.table, ref.column)} "
        ):
            # The expand's placeholder default for *after*'s inserts (the
            # column had none of its own): metadata only.
            statements.append(
                Statement(
                    f"ALTER TABLE {q(ref.table)} ALTER COLUMN {q(ref.column)} DROP DEFAULT,"
                    " ALGORITHM=INSTANT"
                )
            )
            catalog.set_default(ref.table, ref.column, False)
    key_tmp = plan.temp_column(plan.table, plan.column)
    indexes = catalog.indexes.get(plan.table, {})
    columns = catalog.columns.get(plan.table, {})
    clauses = []
    if indexes.get("PRIMARY") == [key_tmp]:
        clauses += ["DROP PRIMARY KEY", f"ADD PRIMARY KEY ({q(plan.column)})"]
        indexes["PRIMARY"] = [plan.column]
    if plan.old_column in indexes:
        clauses.append(f"DROP INDEX {q(plan.old_column)}")
        catalog.drop_index(plan.table, plan.old_column)
    if columns.get(plan.column):
        clauses.append(_restored(dialect, plan, plan.table, plan.column))
        columns[plan.column] = False
    if clauses:
        statements.append(
            Statement(
                f"ALTER TABLE {q(plan.table)} {', '.join(clauses)}, ALGORITHM=INPLACE, LOCK=NONE"
            )
        )
    # A link table's primary key back on its columns, while the triggers still
    # fill the new ones (its clustered index: one online rebuild).
    for _, ref in references(plan):
        indexes = catalog.indexes.get(ref.table, {})
        for number, key in link_keys(plan, ref.table):
            moved = [Sides(plan, up=True).new_column(ref.table, c) for c in key]
            if ref.column not in key or indexes.get("PRIMARY") != moved:
                continue
            clauses = ["DROP PRIMARY KEY", f"ADD PRIMARY KEY ({', '.join(map(q, key))})"]
            parked = _parked_index(plan, number)
            if parked in indexes:
                clauses.append(f"DROP INDEX {q(parked)}")
                catalog.drop_index(ref.table, parked)
            for column in key:  # made nullable by the prepare (a key's are not)
                if catalog.columns[ref.table].get(column):
                    clauses.append(_restored(dialect, plan, ref.table, column))
                    catalog.columns[ref.table][column] = False
            indexes["PRIMARY"] = list(key)
            statements.append(
                Statement(
                    f"ALTER TABLE {q(ref.table)} {', '.join(clauses)}, ALGORITHM=INPLACE, LOCK=NONE"
                )
            )
    statements += drop_trigger_statements(dialect, plan, catalog)
    for _, ref in references(plan):
        tmp = plan.temp_column(ref.table, ref.column)
        columns = catalog.columns.get(ref.table, {})
        clauses = []
        for number, dep in rebuilt(plan):
            name = object_name(plan, "ix", number)
            if dep.table == ref.table and name in catalog.indexes.get(ref.table, {}):
                clauses.append(f"DROP INDEX {q(name)}")
                catalog.drop_index(ref.table, name)
        if tmp in columns:
            clauses.append(f"DROP COLUMN {q(tmp)}")
            catalog.drop_column(ref.table, tmp)
        if not ref.nullable and columns.get(ref.column):
            clauses.append(_restored(dialect, plan, ref.table, ref.column))
            columns[ref.column] = False
        if clauses:
            statements.append(
                Statement(
                    f"ALTER TABLE {q(ref.table)} {', '.join(dict.fromkeys(clauses))},"
                    " ALGORITHM=INPLACE, LOCK=NONE"
                )
            )
    if key_tmp in catalog.columns.get(plan.table, {}):
        statements.append(
            Statement(
                f"ALTER TABLE {q(plan.table)} DROP COLUMN {q(key_tmp)},"
                " ALGORITHM=INPLACE, LOCK=NONE"
            )
        )
        catalog.drop_column(plan.table, key_tmp)
    return [*statements, Statement(f"DROP TABLE IF EXISTS {q(plan.mapping_table)}")]


def unswap_statements(dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog) -> list[Statement]:
    """The old columns take their names and roles back and the UUID columns go
    (metadata only, tables locked)."""

    def q(name: str) -> str:
        return _q(dialect, name)

    # The parent's columns exchange first, the triggers go after: killed in
    # between (each statement commits), the application's writes fail on
    # triggers naming a column renamed (as in the swap's window) rather than
    # insert rows no trigger keeps in step.
    statements = _exchange(dialect, plan, catalog, Sides(plan, up=False))
    statements += drop_trigger_statements(dialect, plan, catalog)
    statements += [Statement(f"DROP TRIGGER IF EXISTS {t}") for t in plan.new_default.triggers]
    # Still under the lock: each of these statements needs its table's metadata
    # lock, which an application writing all the time (a shop then its item,
    # in one transaction) leaves free only for an instant -- too rarely to find
    # one per statement, and a statement waiting for it would make MariaDB roll
    # that transaction back. An unindexed column's DROP is instant (no rebuild).
    for _, ref in references(plan):
        tmp = plan.temp_column(ref.table, ref.column)
        if tmp in catalog.columns.get(ref.table, {}):
            # A link table's parked key index over it goes first: dropped with
            # it, a column would leave the index over the others (still unique);
            # so does (a self-reference) an index over it and the key.
            indexes = catalog.indexes.get(ref.table, {})
            parked = [
                f"DROP INDEX {q(_parked_index(plan, number))}, "
                for number, _ in link_keys(plan, ref.table)
                if _parked_index(plan, number) in indexes
            ] + [f"DROP INDEX {q(name)}, " for name in _leaving_indexes(plan, catalog, ref.table)]
            statements.append(
                Statement(
                    f"ALTER TABLE {q(ref.table)} {''.join(parked)}DROP COLUMN {q(tmp)},"
                    f" ALGORITHM={'NOCOPY' if parked else 'INSTANT'}"
                )
            )
            for number, _ in link_keys(plan, ref.table):
                catalog.drop_index(ref.table, _parked_index(plan, number))
            for name in _leaving_indexes(plan, catalog, ref.table):
                catalog.drop_index(ref.table, name)
            catalog.drop_column(ref.table, tmp)
    key_tmp = plan.temp_column(plan.table, plan.column)
    if key_tmp in catalog.columns.get(plan.table, {}):
        # Its unique index goes with it (dropping an index: no rebuild), and
        # first the indexes over it the exchange renamed aside (_index_swap):
        # a dropped column leaves a composite index over the others.
        built = _leaving_indexes(plan, catalog, plan.table)
        for name in built:
            catalog.drop_index(plan.table, name)
        drops = "".join(f"DROP INDEX {q(name)}, " for name in built)
        statements.append(
            Statement(
                f"ALTER TABLE {q(plan.table)} {drops}DROP COLUMN {q(key_tmp)}, ALGORITHM=NOCOPY"
            )
        )
        catalog.drop_column(plan.table, key_tmp)
    return statements


def _has_spatial(connection: Connection, table: str) -> bool:
    return bool(
        connection.execute(
            sa.text(
                "SELECT COUNT(*) FROM information_schema.STATISTICS"
                " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t AND INDEX_TYPE = 'SPATIAL'"
            ),
            {"t": table},
        ).scalar_one()
    )


# How a clause adding a foreign key begins (_online_alter adds it unchecked).
_ADD_FK = "ADD CONSTRAINT "


def _index_clauses(
    connection: Connection,
    plan: PkMigrationPlan,
    table: str,
    sides: Sides,
    existing: dict[str, list[str]],
) -> list[str]:
    """``ADD INDEX`` of each index of ``table`` over affected columns not built
    again over the columns replacing them yet (``existing``: its indexes now):
    its own ``SHOW CREATE TABLE`` line over the new columns (its ``COMMENT``,
    prefix lengths and orders with it), else from its columns (a plan
    recorded without the line)."""
    result = []
    for number, dep in rebuilt(plan):
        if dep.table != table or dep.kind == "primary":
            continue
        name = object_name(plan, "ix", number)
        if name in existing or (not sides.up and _parked_index(plan, number) in existing):
            continue
        line = (dep.definition or "").removeprefix("ADD ")
        clause = index_clause(line, name, partial(sides.new_column, dep.table))
        if clause is None:
            cols = ", ".join(_q(connection, sides.new_column(dep.table, c)) for c in dep.columns)
            kind = "UNIQUE INDEX" if dep.kind == "unique" else "INDEX"
            clause = f"ADD {kind} {_q(connection, name)} ({cols})"
        result.append(clause)
    return result


def _null_clauses(
    connection: Connection,
    plan: PkMigrationPlan,
    n: int,
    ref: Reference,
    sides: Sides,
    columns: dict[str, dict[str, Any]],
) -> list[str]:
    """The ``NOT NULL`` reference's column arriving made ``NOT NULL``, and the
    one leaving nullable where new rows may have no old value (see
    :func:`_old_values_stay_not_null`), if not yet (``columns``: the child's now)."""
    new, old = sides.child_new(n, ref), ref.column
    body = _body(plan, ref.table, ref.column)
    definition = plan.column_definition(ref.table, ref.column)
    comment = (
        f" COMMENT {literal_for(connection.dialect, definition.comment)}"
        if definition is not None and definition.comment
        else ""
    )
    result: list[str] = []
    if columns[new]["nullable"]:
        # Both ways a placeholder default, which the triggers replace:
        # a multi-row INSERT or INSERT ... SELECT leaving a NOT NULL
        # column without one out is refused before any trigger runs
        # (1364). The undo of the swap gives the column its own
        # definition back.
        placeholder = "0" if plan.key_kind == "integer" else "''"
        type_sql = (
            f"{_new_type(connection.dialect, plan)} NOT NULL DEFAULT {keys.placeholder_sql(plan)}"
            if sides.up
            else _with_default(body, placeholder)
        )
        result.append(f"MODIFY COLUMN {_q(connection, new)} {type_sql}{comment}")
    # Coming down, the UUID column leaving needs no change: the swap
    # back gives it a default, the undo then drops it.
    leaving_nullable = columns[old]["nullable"]
    if sides.up and not _old_values_stay_not_null(plan) and not leaving_nullable:
        result.append(f"MODIFY COLUMN {_q(connection, old)} {_nullable(body)}")
    return result


def _fk_clause(
    connection: Connection, plan: PkMigrationPlan, n: int, ref: Reference, sides: Sides
) -> str:
    """``ADD CONSTRAINT`` of the reference's foreign key on the column arriving."""
    return (
        f"{_ADD_FK}{_q(connection, object_name(plan, 'fk', n))}"
        f" FOREIGN KEY ({_q(connection, sides.child_new(n, ref))})"
        f" REFERENCES {_q(connection, plan.table)} ({_q(connection, sides.key_new)})"
        f"{_actions(ref)}"
    )


class MariaDBOnline(OnlineStrategy):
    """Online key migration on MariaDB (see the module docstring)."""

    serves_versions = True
    makes_uuid192 = True

    @staticmethod
    def _rebuilt_online(plan: PkMigrationPlan, table: str) -> bool:
        """Whether the migration rebuilds ``table`` online: the parent (its primary key
        moves to the new column) and a child with a ``NOT NULL`` reference (the new
        column made ``NOT NULL``); other children change in metadata only."""
        return table == plan.table or any(
            r.table == table and not r.nullable for _, r in references(plan)
        )

    # --- what it cannot do --------------------------------------------------------

    def attached(
        self, connection: Connection, plan: PkMigrationPlan, columns: dict[str, set[str]]
    ) -> set[str]:
        """What ``information_schema`` shows on those columns: indexes, foreign
        keys from and to them, and the views, triggers, generated columns and
        CHECK constraints whose text names them (MariaDB records no
        dependencies: a view or trigger naming a dropped column breaks when it
        is used, an index loses the column)."""
        found: set[str] = set()
        for table, names in sorted(columns.items()):
            found |= _attached(connection, table, names)
        # The migration's own: sqla_ids_<kind>_<hash>_<n> names, the old key's
        # unique index (named after its column, as MariaDB names one) and the
        # trigger giving new rows their key.
        own = {f"index {plan.old_column} on {plan.table}"}
        own |= {f"trigger {_unquoted(name)} on {plan.table}" for name in plan.new_default.triggers}
        return {d for d in found - own if not mentions_object_name(d)}

    def refusals(self, connection: Connection, plan: PkMigrationPlan) -> list[str]:
        """What this module cannot carry over online; the offline mode handles it.
        (Views over the columns need nothing here: see the module docstring; the
        planner asks for ``recreate_views=True``, as offline.)"""
        problems = []
        q = quoter(connection.dialect)

        def here(table: str) -> str:
            return reflect.qualified(connection, table)

        version: tuple[Any, ...] = tuple(connection.dialect.server_version_info or ())
        if version[:3] < _MIN_VERSION:
            problems.append(
                "online mode needs MariaDB 10.5.2 or later (RENAME COLUMN/INDEX without a"
                f" rebuild); this server is {'.'.join(map(str, version))}"
            )
        problems += timestamp_refusals(plan)
        problems += versions.refusals(connection, plan)
        if (
            plan.uuid192
            and plan.options.segment_column == plan.column
            and plan.default.kind == "auto_increment"
        ):
            # The triggers make a new row's UUID192 key, segment included, in
            # BEFORE INSERT; MariaDB numbers an AUTO_INCREMENT column only when
            # it writes the row, after those triggers (they read 0 there).
            problems.append(
                f"segment_column {q(plan.column)} is the AUTO_INCREMENT key of"
                f" {here(plan.table)}: MariaDB numbers a new row after its BEFORE INSERT"
                " triggers run, where the online mode makes the row's UUID192 key, so"
                " the key's segment would be 0; give the segment by another column (or"
                " segment_sql=), or migrate offline (online=False)"
            )
        for table in plan.affected_tables:
            engine, row_format = connection.execute(
                sa.text(
                    "SELECT ENGINE, ROW_FORMAT FROM information_schema.TABLES"
                    " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t"
                ),
                {"t": table},
            ).one()
            if str(engine or "").lower() != "innodb":
                problems.append(
                    f"{here(table)} is not an InnoDB table ({engine}): no online rebuild"
                )
            else:
                # The swap and the contract change columns with the tables
                # locked, which is brief only where the change is metadata
                # only: InnoDB has no instant column change for this format,
                # nor for a table with a FULLTEXT index (its hidden document
                # id column).
                fulltext = connection.execute(
                    sa.text(
                        "SELECT COUNT(*) FROM information_schema.STATISTICS"
                        " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t"
                        " AND INDEX_TYPE = 'FULLTEXT'"
                    ),
                    {"t": table},
                ).scalar_one()
                why = (
                    "ROW_FORMAT=COMPRESSED"
                    if str(row_format or "").lower() == "compressed"
                    else "a FULLTEXT index"
                    if fulltext
                    else ""
                )
                if why:
                    # Measured on MariaDB 10.11: with a FULLTEXT index even ADD
                    # COLUMN refuses LOCK=NONE ("Fulltext index creation
                    # requires a lock").
                    problems.append(
                        f"{here(table)} has {why}: InnoDB cannot add, rename, move or drop its"
                        " columns without a rebuild that blocks writes (LOCK=NONE is"
                        " refused), which the online mode would do; migrate offline"
                        " (online=False), with the application's writes paused"
                    )
                elif self._rebuilt_online(plan, table) and _has_spatial(connection, table):
                    problems.append(
                        f"{here(table)} has a SPATIAL index: InnoDB rebuilds no table with one"
                        ' online ("Do not support online operation on table with GIS'
                        ' index"), and the online mode rebuilds this one (its primary'
                        " key moves, or a NOT NULL reference's column); migrate offline"
                        " (online=False), with the application's writes paused"
                    )
        cascading = [
            ref
            for ref in plan.references
            if str(ref.options.get("onupdate") or "") in ("CASCADE", "SET NULL")
        ]
        if plan.default.kind != "auto_increment" and cascading:
            # From the swap on, new rows have no old key: it must become
            # nullable (at the backfill), which MariaDB refuses (1833) while a
            # foreign key with ON UPDATE CASCADE refers to it.
            problems.append(
                f"{here(plan.table)}.{q(plan.column)} is not AUTO_INCREMENT and"
                f" {', '.join(f'{here(r.table)}.{q(r.column)}' for r in cascading)} refers to it"
                " ON UPDATE CASCADE: MariaDB cannot make it nullable for the rows inserted"
                " after the swap; migrate offline (online=False), or drop ON UPDATE from those"
                " foreign keys for the migration"
            )
        for ref in plan.references:
            if len(ref.columns) > 1:
                problems.append(
                    f"foreign key {q(ref.constraint or '')} on {here(ref.table)} has several"
                    " columns; online mode handles single-column references; migrate offline"
                    " (online=False)"
                )
            elif not _pk_column(connection, ref.table):
                problems.append(
                    f"{here(ref.table)} has no primary key, which the online backfill walks its"
                    " rows by; add one (op.add_uuid7_key), or migrate offline (online=False)"
                )
        for dep in plan.dependents:
            if dep.kind == "primary" and dep.table == plan.table:
                continue
            if dep.kind == "primary":
                problems += self._link_key_refusals(connection, plan, dep.table, dep.columns)
                continue
            # From the catalog, not the definition's text: a name may hold "`(" or
            # " DESC" (names are data).
            kind, prefix, descending = connection.execute(
                sa.text(
                    "SELECT MAX(INDEX_TYPE), MAX(SUB_PART IS NOT NULL), MAX(COLLATION = 'D')"
                    " FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()"
                    " AND TABLE_NAME = :t AND INDEX_NAME = :i"
                ),
                {"t": dep.table, "i": dep.name},
            ).one()
            if str(kind or "") in ("FULLTEXT", "SPATIAL") or prefix:
                problems.append(
                    f"index {q(dep.name)} on {here(dep.table)} is a fulltext/spatial or prefix"
                    " index, which the online mode does not rebuild; migrate offline"
                    " (online=False)"
                )
            elif descending:
                problems.append(
                    f"index {q(dep.name)} on {here(dep.table)} has a descending column, which"
                    " the online mode does not rebuild; migrate offline (online=False)"
                )
        return problems

    @staticmethod
    def _link_key_refusals(
        connection: Connection, plan: PkMigrationPlan, table: str, columns: list[str]
    ) -> list[str]:
        """A child's primary key over a reference moves to the new column in the
        child's rebuild (:func:`_key_move`): not while foreign keys point at it
        (InnoDB refuses to drop it), nor over two references of this migration
        (each is made ``NOT NULL`` in a rebuild of its own)."""
        problems = []
        own = [r.column for r in plan.references if r.table == table and r.column in columns]
        if len(own) > 1:
            problems.append(
                f"the primary key of {reflect.qualified(connection, table)} spans two"
                f" references to {reflect.qualified(connection, plan.table)}"
                f" ({', '.join(own)}), which the online mode does not move; migrate offline"
                " (online=False)"
            )
        pointing = catalog_rows(
            connection,
            "SELECT CONCAT(TABLE_NAME, '.', CONSTRAINT_NAME) FROM"
            " information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = DATABASE()"
            " AND REFERENCED_TABLE_NAME = :t AND UNIQUE_CONSTRAINT_NAME = 'PRIMARY'"
            " ORDER BY 1",
            {"t": table},
        )
        if pointing:
            problems.append(
                f"the primary key of {reflect.qualified(connection, table)} includes a"
                f" reference to {reflect.qualified(connection, plan.table)} and"
                f" foreign keys point at it ({', '.join(str(r[0]) for r in pointing)}): the"
                " online mode moves it to the new column and cannot move them; migrate"
                " offline (online=False)"
            )
        return problems

    # --- sessions ------------------------------------------------------------------

    def set_lock_timeout(self, connection: Connection, seconds: float, local: bool) -> None:
        """``lock_wait_timeout`` and ``innodb_lock_wait_timeout`` of this session
        (whole seconds on MariaDB: rounded up, at least 1; ``0`` leaves the
        server's defaults). Reset by :meth:`release`."""
        if not seconds:
            self.release(connection)
            return
        value = max(1, math.ceil(seconds))
        # READ COMMITTED: the backfill's reads of other rows take no gap locks
        # (under REPEATABLE READ they blocked the application's inserts into
        # the gaps and made InnoDB pick the application's small transaction as
        # a deadlock victim). Rows it misses because a key moved meanwhile are
        # caught by a further sweep; the checks compare the final state.
        # Metadata locks: never wait (lock_wait_timeout = 0, retried instead).
        # MariaDB's DDL also locks the tables a foreign key links to the altered
        # one, and its deadlock detector always sacrifices the plain statement,
        # never the DDL: an application transaction writing a parent and then a
        # child would be the victim of a DDL waiting for it. A DDL that does not
        # wait is in no cycle; the application waits only while the DDL holds
        # its locks (the short start and end of an online ALTER, the swap).
        # The session's own isolation level is kept in the same statement (one
        # round trip per transaction, not two: a SET evaluates every value
        # before it assigns any, so the variable gets the level before this
        # one), unless kept already.
        query_sql(
            connection,
            f"SET {_SAVED_ISOLATION} = COALESCE({_SAVED_ISOLATION}, @@SESSION.tx_isolation),"
            f" SESSION lock_wait_timeout = 0, innodb_lock_wait_timeout = {value},"
            " tx_isolation = 'READ-COMMITTED'",
        )
        connection.info[_ISOLATION] = True

    def retry_delays(self, attempts: int) -> list[float]:
        """Many short, jittered waits: a step that does not wait for metadata locks
        needs an instant when no application transaction holds the tables."""
        return [random.uniform(0.02, 0.2) for _ in range(max(attempts, 1) * 25)]

    def release(self, connection: Connection) -> None:
        """The server's defaults and the session's isolation level and ``sql_mode`` back."""
        # One statement: the isolation level kept back, and its variable
        # emptied (both values read before either is assigned).
        restore = (
            f", tx_isolation = {_SAVED_ISOLATION}, {_SAVED_ISOLATION} = NULL"
            if connection.info.pop(_ISOLATION, None)
            else ""
        )
        query_sql(
            connection,
            "SET SESSION lock_wait_timeout = DEFAULT, innodb_lock_wait_timeout = DEFAULT,"
            f" innodb_table_locks = DEFAULT{restore}",
        )
        sql_mode = connection.info.pop(guards.SQL_MODE, None)
        if sql_mode is not None:
            connection.execute(sa.text("SET SESSION sql_mode = :m"), {"m": sql_mode})

    def is_lock_timeout(self, error: BaseException) -> bool:
        """Error 1205 (lock wait timeout) or 1213 (deadlock: also retried)."""
        original = error.orig if isinstance(error, sa.exc.DBAPIError) else error
        args: tuple[Any, ...] = tuple(getattr(original, "args", ()))
        return bool(args) and args[0] in _LOCK_ERRORS

    # --- phases ----------------------------------------------------------------------

    locked_attempts = _LOCKED_ATTEMPTS

    def swap_began(self, connection: Connection, plan: PkMigrationPlan) -> bool:
        """The swap's first statement renames the parent's old key to ``<key>_old``."""
        return plan.old_column in _columns(connection, plan.table)

    def scope(self, connection: Connection) -> str:
        """The caller's current database."""
        return str(query_sql(connection, "SELECT DATABASE()").scalar())

    def enter_scope(self, connection: Connection, scope: str) -> None:
        """``USE`` the caller's database (the pool's default remembered); the session
        marked as the migration's, which the application's guarded ``UPDATE``
        triggers do not fire for (:mod:`~sqla_ids.migration.backends.mysql.guards`)."""
        current, _ = query_sql(connection, f"SELECT DATABASE(), {guards.VARIABLE} := 1").one()
        if current != scope:
            connection.info[_DATABASE] = current
            query_sql(connection, f"USE {_q(connection, scope)}")

    def leave_scope(self, connection: Connection) -> None:
        """The pool's database back, the session the application's again."""
        query_sql(connection, f"SET {guards.VARIABLE} = NULL")
        database = connection.info.pop(_DATABASE, None)
        if database is not None:
            query_sql(connection, f"USE {_q(connection, database)}")

    def try_lock(self, connection: Connection, name: str) -> bool:
        """``GET_LOCK`` without waiting; names are at most 64 characters, so a
        digest of the name is locked."""
        return bool(
            connection.execute(sa.text("SELECT GET_LOCK(:n, 0)"), {"n": _lock_name(name)}).scalar()
        )

    def unlock_name(self, connection: Connection, name: str) -> None:
        """``RELEASE_LOCK``."""
        connection.execute(sa.text("SELECT RELEASE_LOCK(:n)"), {"n": _lock_name(name)})

    def lock(self, connection: Connection, plan: PkMigrationPlan) -> list[Statement]:
        """``LOCK TABLES`` (taken without waiting: failing here changes nothing,
        and the step is retried), then a short metadata-lock wait for the
        statements under it.

        Holding the tables, each ALTER still upgrades its lock, and waits for
        whoever else holds one: InnoDB's purge and statistics threads (MariaDB
        10.6+), a transaction on a table a foreign key links to. Failing then
        would hand the application half a swap when the tables are unlocked,
        so the statements wait (a little) and the work, whose statements are
        built from the catalog anew, is retried under the lock.
        """
        catalog = Catalog(mapping=read_catalog(connection, plan).mapping)
        views = versions.lock_names(connection, plan)
        statements = [
            # Metadata locks only. With InnoDB's own table locks as well (the
            # default inside a transaction), LOCK TABLES also X-locks at the
            # InnoDB level every table a cascading foreign key reaches from the
            # ones named, one by one -- Sakila's city reaches payment through
            # address and customer -- and an application transaction holding
            # IX on one of them while it reads another deadlocked with it
            # (measured: InnoDB rolled the application back). The metadata
            # locks alone keep the application off the named tables, which is
            # what the swap needs; DDL takes its own locks on linked tables.
            Statement("SET SESSION innodb_table_locks = 0"),
            *lock_statements(connection.dialect, plan, catalog, views),
            Statement(f"SET SESSION lock_wait_timeout = {_LOCKED_WAIT_SECONDS}"),
        ]
        # From here the step's builders may queue the versions' view
        # replacements (a dry run builds them without this lock: nothing queued),
        # in sessions opened now, before the lock (last: nothing after it fails
        # before the runner's unlock, which closes them, is sure to run).
        versions.Replacements.locked(connection, len(views))
        return statements

    def unlock(self, connection: Connection) -> list[Statement]:
        """``UNLOCK TABLES``; metadata locks are not waited for again. Serving
        versions, the views the step queued are replaced as the tables are
        unlocked (:class:`versions.Replacements`)."""
        unlock = Statement("UNLOCK TABLES")
        versions.Replacements.release(connection, [unlock])
        return [
            unlock,
            Statement("SET SESSION lock_wait_timeout = 0, innodb_table_locks = DEFAULT"),
        ]

    def expand(self, plan: PkMigrationPlan) -> list[Task]:
        """The application's ``UPDATE`` triggers guarded, then the mapping table, new
        columns and sync triggers (each statement commits on its own; a retried
        attempt continues where the last one stopped)."""
        return [
            *self._guards(plan, guards.guard_statements),
            Ddl("expand", lambda c: expand_statements(c, plan, read_catalog(c, plan))),
            *self._versions("version databases", versions.create_statements, plan),
        ]

    @staticmethod
    def _versions(
        what: str,
        statements: Callable[[Connection, PkMigrationPlan], list[Statement]],
        plan: PkMigrationPlan,
    ) -> list[Task]:
        """A step on the version databases, when the plan serves versions."""
        if not plan.options.versions:
            return []
        return [Ddl(what, lambda c: statements(c, plan))]

    @staticmethod
    def _guards(
        plan: PkMigrationPlan,
        statements: Callable[[Connection, PkMigrationPlan, dict[str, str]], list[Statement]],
    ) -> list[Task]:
        """The application's ``UPDATE`` triggers guarded or put back, with the tables
        locked: each replacement moves its trigger to the end of the firing
        order until all are replaced (:mod:`~sqla_ids.migration.backends.mysql.guards`),
        which no application statement may see. Before the sync triggers are
        created, which then fire last."""
        if not plan.parked_triggers:
            return []
        return [
            Ddl(
                "application UPDATE triggers",
                lambda c: statements(c, plan, guards.trigger_bodies(c)),
                Mode.LOCKED,
            )
        ]

    def backfill(self, plan: PkMigrationPlan) -> list[Task]:
        """Parent keys in old-key order, the parent's primary key moved online,
        the children backfilled, then their indexes and foreign keys on the new
        columns (and ``SET NULL`` references swept again)."""

        def pool(connection: Connection) -> None:
            row = connection.execute(
                sa.text(
                    "SELECT @@innodb_buffer_pool_size, COALESCE(SUM(DATA_LENGTH"
                    " + INDEX_LENGTH), 0) FROM information_schema.TABLES"
                    " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN :tables"
                ).bindparams(sa.bindparam("tables", expanding=True)),
                {"tables": list(plan.affected_tables)},
            ).one()
            advice = pool_advice(int(row[0]), int(row[1]))
            if advice:
                logger.warning("%s: %s", plan.table, advice)

        up = Sides(plan, up=True)
        tasks: list[Task] = [
            Probe("buffer pool check", pool),
            Backfill(ParentKeys(plan)),
            self._move_primary_key(plan, up),
        ]
        # The indexes on the new columns come after the backfill: kept up to
        # date during it, every row written would insert into them at a
        # random place (a child's rows are walked in its own key's order, not
        # its parent's), and with a table larger than the buffer pool those
        # random page reads and writes used up InnoDB's free pages faster
        # than its page cleaner made them: measured with a 128 MB pool, 1M
        # parents and 2 x 2M children, the application's statements froze
        # for up to 3.9 s whenever the pool ran out. One sorted build per
        # index afterwards reads each child once.
        tasks += [Backfill(ChildReferences(plan, n, ref, up)) for n, ref in references(plan)]
        tasks += [
            self._rebuild(plan, table, up)
            if self._built_once(plan, table)
            else self._rebuilt_indexes(plan, table, up)
            for table in plan.affected_tables
        ]
        tasks += [
            self._foreign_key(plan, n, ref, up)
            for n, ref in references(plan)
            if ref.constraint and not self._built_once(plan, ref.table)
        ]
        # Until its foreign key was there, a cascade setting a reference NULL
        # (MariaDB fires no trigger for it) left the new column pointing at
        # the parent; sweep those references again now that it is there --
        # only those (NulledReferences), not the whole child once more.
        tasks += [
            Backfill(NulledReferences(plan, ref)) for _, ref in references(plan) if _sets_null(ref)
        ]
        return tasks

    def _online_alter(
        self,
        plan: PkMigrationPlan,
        table: str,
        what: str,
        clauses: Callable[[Connection], list[str]],
    ) -> Ddl:
        """One ``ALTER TABLE`` that rebuilds or adds an index while the application
        reads and writes (``LOCK=NONE``); it is retried when its short exclusive
        metadata locks at the start and the end are not granted at once (or
        within ``metadata_lock_wait``). ``clauses`` reads what is still to do."""
        # The end of a long rebuild needs an instant when no transaction has the
        # table open: on a table the application always has open (measured: a
        # 1M-row rebuild under the benchmark's writer failed at its end 12
        # times in 12) it may wait for one -- when the user accepts that MariaDB
        # then rolls back an application transaction that reads the table and
        # then writes it (an MDL upgrade behind the waiting DDL is a deadlock
        # whose victim is always the DML).
        wait = math.ceil(plan.options.metadata_lock_wait)

        def build(connection: Connection) -> list[Statement]:
            todo = clauses(connection)
            if not todo:
                return []
            # A foreign key added with the rest (see _built_once): without a
            # scan, as _foreign_key adds one (the checks prove it holds).
            settings = [
                *(["foreign_key_checks = 0"] if any(c.startswith(_ADD_FK) for c in todo) else []),
                *([f"lock_wait_timeout = {wait}"] if wait else []),
            ]
            return [
                Statement(
                    (f"SET STATEMENT {', '.join(settings)} FOR " if settings else "")
                    + f"ALTER TABLE {_q(connection, table)} "
                    + ", ".join(todo)
                    + ", ALGORITHM=INPLACE, LOCK=NONE"
                )
            ]

        hint = (
            ""
            if wait
            else f"an online ALTER needs an instant when no transaction has {table} open, and"
            " this application always has one: with metadata_lock_wait=1 it waits for one"
            " (see its caveat in docs/migration.md)"
        )
        return Ddl(what, build, hint=hint)

    def _move_primary_key(self, plan: PkMigrationPlan, sides: Sides) -> Ddl:
        """The primary key onto ``sides.key_new`` (one online rebuild), the column
        leaving it kept unique; a non-auto-increment old key becomes nullable
        (rows inserted after the swap have none)."""
        unique = sides.key_parked if sides.up else object_name(plan, "key", 0)

        def clauses(connection: Connection) -> list[str]:
            if _pk_column(connection, plan.table) == [sides.key_new]:
                return []
            q = partial(_q, connection)
            # Before the swap the old key keeps its name; undoing, the UUID key does.
            leaving = plan.column
            result = [
                "DROP PRIMARY KEY",
                f"ADD PRIMARY KEY ({q(sides.key_new)})",
                f"ADD UNIQUE INDEX {q(unique)} ({q(leaving)})",
            ]
            body = _body(plan, plan.table, plan.column)
            definition = plan.column_definition(plan.table, plan.column)
            comment = definition.comment if definition is not None else ""
            comment_sql = f" COMMENT {literal_for(connection.dialect, comment)}" if comment else ""
            if sides.up:
                # The new key, NOT NULL as a key is, gets a placeholder default
                # the parent's trigger replaces (see keys.placeholder_sql).
                result.append(
                    f"MODIFY COLUMN {q(sides.key_new)} {_new_type(connection.dialect, plan)}"
                    f" NOT NULL DEFAULT {keys.placeholder_sql(plan)}{comment_sql}"
                )
            if sides.up and plan.default.kind != "auto_increment":
                result.append(f"MODIFY COLUMN {q(plan.column)} {_nullable(body)}")
            if not sides.up:
                # The UUID column leaving the key stays NOT NULL until the undo
                # drops it (the key's trigger fills it): MariaDB refuses to change
                # the nullability of a column a foreign key with ON UPDATE CASCADE
                # refers to (1833), and the children's keys on it still do.
                result.append(f"MODIFY COLUMN {q(plan.old_column)} {body}")
            if not sides.up and plan.old_column in _indexes(connection, plan.table):
                result.append(f"DROP INDEX {q(plan.old_column)}")
            return result

        return self._online_alter(plan, plan.table, f"primary key of {plan.table}", clauses)

    def _rebuilt_indexes(self, plan: PkMigrationPlan, table: str, sides: Sides) -> Ddl:
        """The indexes of ``table`` over affected columns built again over the
        columns replacing them (no rebuild of the table: ``LOCK=NONE``). Undoing
        the swap, an original index parked by it needs no build."""

        def clauses(connection: Connection) -> list[str]:
            return _index_clauses(connection, plan, table, sides, _indexes(connection, table))

        return self._online_alter(plan, table, f"indexes of {table}", clauses)

    @staticmethod
    def _built_once(plan: PkMigrationPlan, table: str) -> bool:
        """Whether ``table`` gets its indexes, foreign keys and ``NOT NULL`` on the
        new columns in one rebuild at the end of the backfill (:meth:`_rebuild`):
        a child (not the parent, whose rebuild moved its key) whose every
        reference of this migration is ``NOT NULL``."""
        refs = [r for _, r in references(plan) if r.table == table]
        return table != plan.table and bool(refs) and not any(r.nullable for r in refs)

    def _rebuild(self, plan: PkMigrationPlan, table: str, sides: Sides) -> Ddl:
        """A child of :meth:`_built_once`: its indexes over the new columns, their
        ``NOT NULL`` (and the old ones' nullability, a link table's key moved:
        the prepare's work, :meth:`_child_nulls`) and their foreign keys, in one
        online rebuild.

        Built apart, the indexes were built twice: sorted once, then again by
        the prepare's rebuild of the table for the ``NOT NULL`` -- and a child
        with two ``NOT NULL`` references was rebuilt once for each. The foreign
        key comes with them rather than before the prepare: on a ``NOT NULL``
        reference no cascade can empty the old column (which the ``SET NULL``
        sweep needs the foreign key for), a cascaded delete takes the row with
        it, and a parent's new key never changes -- until the swap the
        original foreign key is the one that acts. The prepare then finds
        nothing left to do here (its builders read the catalog)."""

        def clauses(connection: Connection) -> list[str]:
            indexes = _indexes(connection, table)
            columns = _columns(connection, table)
            fks = _foreign_keys(connection, table)
            result = _index_clauses(connection, plan, table, sides, indexes)
            for n, ref in references(plan):
                if ref.table == table:
                    result += _null_clauses(connection, plan, n, ref, sides, columns)
            result += _key_move(connection.dialect, plan, table, sides, indexes)
            for n, ref in references(plan):
                if ref.table == table and ref.constraint and object_name(plan, "fk", n) not in fks:
                    result.append(_fk_clause(connection, plan, n, ref, sides))
            return result

        return self._online_alter(plan, table, f"indexes of {table}", clauses)

    def _foreign_key(self, plan: PkMigrationPlan, n: int, ref: Reference, sides: Sides) -> Ddl:
        """The reference's foreign key on the new column, added without a scan
        (``foreign_key_checks=0``: metadata only); the checks prove it holds."""
        name = object_name(plan, "fk", n)

        def add(connection: Connection) -> list[Statement]:
            if name in _foreign_keys(connection, ref.table):
                return []
            return [
                Statement(
                    f"SET STATEMENT foreign_key_checks = 0 FOR ALTER TABLE"
                    f" {_q(connection, ref.table)} {_fk_clause(connection, plan, n, ref, sides)},"
                    " ALGORITHM=INPLACE, LOCK=NONE"
                )
            ]

        return Ddl(f"foreign key {name}", add)

    def prepare(self, plan: PkMigrationPlan) -> list[Task]:
        """The children's new columns ``NOT NULL`` where the old ones are, and the
        old ones nullable where new rows may have no old value (see
        :func:`_old_values_stay_not_null`), in one online rebuild per child."""
        return self._child_nulls(plan, Sides(plan, up=True))

    def _child_nulls(self, plan: PkMigrationPlan, sides: Sides) -> list[Task]:
        tasks: list[Task] = []
        for n, ref in references(plan):
            if ref.nullable:
                continue

            def clauses(connection: Connection, n: int = n, ref: Reference = ref) -> list[str]:
                columns = _columns(connection, ref.table)
                indexes = _indexes(connection, ref.table)
                return _null_clauses(connection, plan, n, ref, sides, columns) + _key_move(
                    connection.dialect, plan, ref.table, sides, indexes
                )

            tasks.append(self._online_alter(plan, ref.table, f"NOT NULL on {ref.table}", clauses))
        return tasks

    def swap(self, plan: PkMigrationPlan) -> list[Task]:
        """The new columns take the old ones' names and roles (tables locked)."""

        def build(connection: Connection) -> list[Statement]:
            # Serving versions: the views' replacements queue first, on the
            # views this session locked (see versions.Replacements).
            versions.Replacements.queue(
                connection,
                plan,
                versions.swap_replacements(connection, plan),
                partial(versions.swap_repair, plan=plan),
            )
            return swap_statements(connection.dialect, plan, read_catalog(connection, plan))

        return [Ddl("swap", build, Mode.LOCKED)]

    def contract(self, plan: PkMigrationPlan) -> list[Task]:
        """Drop the triggers, parked indexes and old child columns (tables locked);
        the application's ``UPDATE`` triggers unguarded."""
        return [
            # First, unlocked (MariaDB drops no database under LOCK TABLES): no
            # application instance may use them any more (docs/migration.md).
            *self._versions("drop version databases", versions.drop_statements, plan),
            Ddl(
                "contract",
                lambda c: (
                    contract_statements(c.dialect, plan, read_catalog(c, plan))
                    + guards.unguard_statements(c, plan, guards.trigger_bodies(c))
                ),
                Mode.LOCKED,
            ),
        ]

    def abort(self, plan: PkMigrationPlan) -> list[Task]:
        """Before the swap: everything the expand, backfill and prepare added goes,
        and the application's ``UPDATE`` triggers are as they were."""
        return [
            *self._versions("drop version databases", versions.drop_statements, plan),
            Ddl("undo", lambda c: abort_statements(c.dialect, plan, read_catalog(c, plan))),
            *self._versions("version views passed through", versions.passthrough_statements, plan),
            *self._guards(plan, guards.unguard_statements),
        ]

    def unprepare(self, plan: PkMigrationPlan) -> list[Task]:
        """After the swap, before the contract: the old columns refilled where a
        cascade left them behind, their foreign keys back (metadata only), and
        the primary key back on the old key -- online. Their indexes are parked
        by the swap and their ``NOT NULL`` kept where the parent's key is
        ``AUTO_INCREMENT``: then no child is rebuilt, and the one statement
        that may wait for a metadata lock (``metadata_lock_wait``) is the
        parent's rebuild. Otherwise (indexes dropped by an older swap, old
        values nullable) they are built again, online."""

        def unnumbered(connection: Connection) -> None:
            missing = int(
                query_sql(
                    connection,
                    f"SELECT COUNT(*) FROM {_q(connection, plan.table)}"
                    f" WHERE {_q(connection, plan.old_column)} IS NULL",
                ).scalar_one()
            )
            if missing:
                raise MigrationRefusedError(
                    f"cannot undo the swap of {plan.table} online: {missing} rows inserted"
                    f" since have no old key in {plan.old_column} (the old key had no default"
                    " to number them); contract, then restore offline; nothing was changed"
                )

        down = Sides(plan, up=False)
        tasks: list[Task] = [Probe("downgrade check", unnumbered)]
        tasks += [self._rebuilt_indexes(plan, table, down) for table in plan.affected_tables]
        for n, ref in references(plan):
            if ref.constraint:
                tasks.append(self._foreign_key(plan, n, ref, down))
            tasks.append(Backfill(ChildReferences(plan, n, ref, down)))
        return [*tasks, *self._child_nulls(plan, down), self._move_primary_key(plan, down)]

    def unswap(self, plan: PkMigrationPlan) -> list[Task]:
        """The old columns take their names and roles back and the UUID columns go
        (metadata only, tables locked); then the mapping table goes."""

        def build(connection: Connection) -> list[Statement]:
            # Serving versions: *before* passes the tables through again and
            # *after* goes, as the tables are unlocked (versions.Replacements).
            versions.Replacements.queue(
                connection,
                plan,
                versions.unswap_replacements(connection, plan),
                partial(versions.unswap_repair, plan=plan),
            )
            return unswap_statements(
                connection.dialect, plan, read_catalog(connection, plan)
            ) + guards.unguard_statements(connection, plan, guards.trigger_bodies(connection))

        return [
            Ddl("undo swap", build, Mode.LOCKED),
            *self._versions("drop version databases", versions.drop_statements, plan),
            Ddl(
                "drop mapping",
                lambda c: [Statement(f"DROP TABLE IF EXISTS {_q(c, plan.mapping_table)}")],
            ),
            *self._versions("version views passed through", versions.passthrough_statements, plan),
        ]


def _keeping(dialect: Dialect, catalog: Catalog, table: str, prefix: str = "") -> str:
    """``c = c`` for each ``ON UPDATE CURRENT_TIMESTAMP`` column of ``table`` the
    catalog read (``prefix``: ``table.`` in a multi-table ``UPDATE``)."""
    return "".join(
        f", {prefix}{_q(dialect, c)} = {prefix}{_q(dialect, c)}"
        for c in catalog.preserved.get(table, ())
    )


def _keep(connection: Connection, table: str, alias: str) -> str:
    """``alias.c = alias.c`` for each ``ON UPDATE CURRENT_TIMESTAMP`` column: an
    explicitly assigned column keeps its value."""
    return "".join(
        f", {alias}.{_q(connection, c)} = {alias}.{_q(connection, c)}"
        for c in preserved_columns(connection, table)
    )


class ParentKeys(ParentKeysWalk):
    """The parent's new keys, in old-key order, computed in SQL from the ordinal
    (:mod:`sqla_ids.migration.core.backfill`)."""

    def __init__(self, plan: PkMigrationPlan) -> None:
        self.plan = plan
        self.label = f"{plan.table}.{plan.column} new keys"
        self.ordinal: int | None = None
        """Rows given a key so far: read back from the keys when (re)starting."""
        self.keep = ""
        """The parent's ``ON UPDATE CURRENT_TIMESTAMP`` columns kept (:func:`_keep`),
        read once per sweep (not once per batch)."""

    def start(self, connection: Connection) -> int:
        """The ordinal an earlier (killed) run reached, read back from its keys:
        backfilled keys are the ones below the plan's time (with a timestamp
        column: the last key made, from the mapping)."""
        self.keep = _keep(connection, self.plan.table, "p")
        if self.plan.timestamp_column is not None:
            self.resume(connection)
        elif self.ordinal is None:
            plan = self.plan
            tmp = _q(connection, plan.temp_column(plan.table, plan.column))
            k, key = keys.key_hex_sql(plan, "k"), keys.key_hex_sql(plan, tmp)
            value = connection.execute(
                text_sql(
                    connection.dialect,
                    f"SELECT (CAST(CONV(SUBSTRING({k}, 1, 12), 16, 10) AS SIGNED)"
                    f" - :start) * 4096 + CAST(CONV(SUBSTRING({k}, 14, 3), 16, 10)"
                    f" AS SIGNED) FROM (SELECT {tmp} AS k FROM {_q(connection, plan.table)}"
                    f" WHERE {key} < :below ORDER BY {key} DESC LIMIT 1) last",
                ),
                {"start": first_ms(self.plan), "below": backfilled_below(self.plan)},
            ).scalar()
            self.ordinal = int(value or 0)
        return self.plan.row_count

    def batch(self, connection: Connection, after: Any, size: int) -> tuple[Any, int] | None:
        """Keys for the next ``size`` rows without one."""
        plan = self.plan
        t, k = _q(connection, plan.table), _q(connection, plan.column)
        tmp = _q(connection, plan.temp_column(plan.table, plan.column))
        low = f"{k} > :after AND " if after is not None else ""
        upto, count = connection.execute(
            text_sql(
                connection.dialect,
                f"SELECT MAX(k), COUNT(*) FROM (SELECT {k} AS k FROM {t} WHERE {low}{tmp}"
                " IS NULL ORDER BY k LIMIT :n) b",
            ),
            {"after": after, "n": size},
        ).one()
        if not count:
            return None
        if plan.timestamp_column is not None:
            self._timed(connection, low, after, upto)
            return upto, int(count)
        # 48-bit milliseconds, version 7, the 12-bit ordinal's low part,
        # variant 10 and 62 random bits: 32 hex digits, which native UUID
        # and CHAR(32) columns both take (UUID192 keys: their bytes, then
        # the row's segment, read with the batch).
        segment = mapping.segment_sql(connection, plan.options) if plan.uuid192 else None
        key = keys.stored_key_sql(
            plan,
            "LOWER(CONCAT(LPAD(HEX(:start + (b.o >> 12)), 12, '0'), '7',"
            " LPAD(HEX(b.o & 4095), 3, '0'), HEX(8 | (ASCII(RANDOM_BYTES(1)) & 3)),"
            " SUBSTRING(HEX(RANDOM_BYTES(8)), 2)))",
            None if segment is None else "b.s",
        )
        s_sql = "" if segment is None else f", {segment} AS s"
        # One statement reads the batch's rows, X-locks them, numbers them
        # and makes their keys, into a temporary table of this session:
        # * X-locked as they are read (FOR UPDATE, in the derived table: the
        #   rows of the parent): the UPDATE below would otherwise read them
        #   with S locks and upgrade them to X, and an application's DELETE
        #   queued between the two deadlocks with it (InnoDB then rolls back
        #   the application). Every row numbered is therefore a row this
        #   batch holds, still without a key: the UPDATE sets each of them,
        #   and the mapping rows written from this table are exactly the
        #   UPDATE's (see _mapped).
        # * The ordinals numbered once, here: the next batch goes on after
        #   the last one given. (Counted by an earlier statement instead, a
        #   row whose key moved into the range since -- an old key changed to
        #   a negative one, before the first batch's -- took one more than
        #   counted, and the next batch's first row the same ordinal: one key
        #   number for two rows, their keys out of old-key order.)
        done = self.ordinal or 0
        connection.execute(
            text_sql(
                connection.dialect,
                f"CREATE TEMPORARY TABLE {_KEYS} AS SELECT b.k, b.o, {key} AS n FROM"
                f" (SELECT {k} AS k, :done + ROW_NUMBER() OVER (ORDER BY {k}) AS o{s_sql}"
                f" FROM {t} WHERE {low}{k} <= :upto AND {tmp} IS NULL FOR UPDATE) b",
            ),
            {"after": after, "upto": upto, "done": done, "start": first_ms(plan)},
        )
        try:
            numbered = query_sql(connection, f"SELECT MAX(o) FROM {_KEYS}").scalar()
            self._mapped(
                connection,
                f"UPDATE {t} p JOIN {_KEYS} b ON p.{k} = b.k"
                f" SET p.{tmp} = b.n{self.keep} WHERE p.{tmp} IS NULL",
                "b.n",
            )
        finally:
            query_sql(connection, f"DROP TEMPORARY TABLE IF EXISTS {_KEYS}")
        self.ordinal = done if numbered is None else int(numbered)
        return upto, int(count)

    def _mapped(self, connection: Connection, update: str, value: str) -> None:
        """Run ``update`` (the parent's rows of :data:`_KEYS` given their key,
        ``value``) with the parent's sync trigger quiet, then map those rows in
        one statement.

        The trigger maps a row whose new key changes, one ``DELETE`` and one
        upsert into the mapping per row -- about half of the backfill
        ``UPDATE``'s time. This session's writes set only rows it locked
        (every row of :data:`_KEYS`, none of which had a key), so the mapping
        rows are those of :data:`_KEYS`, written set-wise with the trigger's
        own upsert (a key chosen earlier for the old key, by a child written
        before its parent, gives way to the row's, as the trigger has it), in
        the same transaction: no other session sees a row keyed but not
        mapped. The variable quiets only that part of the parent's trigger,
        only for this statement (the application's sessions never set it),
        and is unset even when the ``UPDATE`` fails."""
        m = _q(connection, self.plan.mapping_table)
        query_sql(connection, f"SET {_QUIET} = 1")
        try:
            query_sql(connection, update)
        finally:
            query_sql(connection, f"SET {_QUIET} = NULL")
        query_sql(
            connection,
            f"INSERT INTO {m} (old_key, new_key) SELECT b.k, {value} FROM {_KEYS} b"
            " ON DUPLICATE KEY UPDATE new_key = VALUES(new_key)",
        )

    def _timed(self, connection: Connection, low: str, after: Any, upto: Any) -> None:
        """The batch's keys with a timestamp column: the rule itself
        (:func:`sqla_ids.migration.core.mapping.key_numbers`: each row's time,
        kept from going back, after :attr:`prev`) and the old key's mark
        (:mod:`sqla_ids.migration.core.backfill`), made here from the rows read
        and locked, set through a temporary table and mapped with it
        (:meth:`_mapped`).

        Not in SQL as offline: MariaDB's running ``MAX() OVER (... ROWS UNBOUNDED
        PRECEDING)`` reads the whole frame again for every row -- measured 0.1 s
        for 2,000 rows, 1.5 s for 8,000 -- which made the backfill 13 times slower
        (1,338 rows/s against 17,996 without a timestamp column, batches of 5,000).
        """
        plan = self.plan
        t, k = _q(connection, plan.table), _q(connection, plan.column)
        tmp = _q(connection, plan.temp_column(plan.table, plan.column))
        assert plan.timestamp_column is not None
        # Read and X-locked at once (the UPDATE below would otherwise take S
        # locks first: see batch()), in key order; DATETIME as it is, TIMESTAMP
        # in the session's time zone, both taken as UTC -- as the offline SQL
        # does. A UUID192 key's segment is read as its 16 hex digits (SQL's
        # reading of the value, as the triggers' keys have it).
        segment = mapping.segment_sql(connection, plan.options) if plan.uuid192 else None
        segment_hex = "''" if segment is None else f"COALESCE({keys.segment_hex_sql(segment)}, '')"
        rows = connection.execute(
            text_sql(
                connection.dialect,
                f"SELECT {k}, {_q(connection, plan.timestamp_column)}, {segment_hex} FROM {t}"
                f" WHERE {low}{k} <= :upto AND {tmp} IS NULL ORDER BY {k} FOR UPDATE",
            ),
            {"after": after, "upto": upto},
        ).all()
        if not rows:
            return
        prev = -1 if self.prev is None else self.prev
        numbers = list(mapping.key_numbers((mapping.time_point(w) for _, w, _ in rows), prev))
        # The temporary table's key column copies the parent's (type, collation);
        # the new key as hex digits: 32, and a UUID192 key's segment's 16.
        query_sql(
            connection,
            f"CREATE TEMPORARY TABLE {_KEYS} AS SELECT {k} AS k,"
            f" CAST('' AS CHAR({48 if plan.uuid192 else 32})) AS n FROM {t} LIMIT 0",
        )
        try:
            connection.execute(
                text_sql(connection.dialect, f"INSERT INTO {_KEYS} (k, n) VALUES (:k, :n)"),
                [
                    {"k": old, "n": mapping.new_key(v, plan.seed, old).hex + str(hex_)}
                    for (old, _, hex_), v in zip(rows, numbers, strict=True)
                ],
            )
            n = "UNHEX(b.n)" if plan.uuid192 else "b.n"
            self._mapped(
                connection,
                f"UPDATE {t} p JOIN {_KEYS} b ON p.{k} = b.k SET p.{tmp} = {n}{self.keep}"
                f" WHERE p.{tmp} IS NULL",
                n,
            )
        finally:
            query_sql(connection, f"DROP TEMPORARY TABLE IF EXISTS {_KEYS}")
        self.prev = numbers[-1]

    def last_made(self, connection: Connection) -> UUID | None:
        """The largest mapping key carrying its old key's mark (by its hex digits:
        MariaDB's ``UUID`` type does not sort version 7 keys by time)."""
        hex_ = keys.key_hex_sql(self.plan, "new_key")
        value = connection.execute(
            text_sql(
                connection.dialect,
                f"SELECT MAX({hex_}) FROM {_q(connection, self.plan.mapping_table)}"
                f" WHERE RIGHT({hex_}, 14) = {keys.hash_hex_sql('old_key')}",
            ),
            {"seed": self.plan.seed},
        ).scalar()
        return None if value is None else UUID(str(value))


def _keyset(columns: list[str], name: str, inclusive: bool) -> str:
    """``(columns) > (:name_0, ...)`` (``<=`` when ``inclusive``) spelled column by
    column -- ``a > :x_0 OR (a = :x_0 AND b > :x_1)`` -- which the range
    optimizer reads as ranges of the key's index (a row-value comparison it
    may not)."""
    strict = "<" if inclusive else ">"
    terms = []
    for i, column in enumerate(columns):
        equal = [f"{c} = :{name}_{j}" for j, c in enumerate(columns[:i])]
        terms.append(" AND ".join([*equal, f"{column} {strict} :{name}_{i}"]))
    if inclusive:
        terms.append(" AND ".join(f"{c} = :{name}_{j}" for j, c in enumerate(columns)))
    return "(" + " OR ".join(f"({t})" for t in terms) + ")"


def _bound(name: str, key: tuple[Any, ...]) -> dict[str, Any]:
    return {f"{name}_{i}": value for i, value in enumerate(key)}


class ChildReferences(Walk):
    """A child's column following its parent (the new one going up, the old one
    undoing the swap), set in keyset batches of the child's primary key (of
    several columns in a link table); rows whose reference a cascade set NULL
    before the new foreign key existed get NULL too."""

    def __init__(self, plan: PkMigrationPlan, n: int, ref: Reference, sides: Sides) -> None:
        self.plan, self.ref = plan, ref
        self.label = f"{ref.table}.{ref.column} new references"
        self.up = sides.up
        if sides.up:
            self.source, self.target = ref.column, plan.temp_column(ref.table, ref.column)
            self.look, self.give = plan.column, plan.temp_column(plan.table, plan.column)
        else:
            self.source, self.target = ref.column, child_old(plan, n, ref)
            self.look, self.give = plan.column, plan.old_column
        self.pk: list[str] = []
        self.high: tuple[Any, ...] | None = None
        self.parent_pk = ""
        """The parent's primary key column (read at each sweep's start)."""
        self.keep = ""
        """The child's ``ON UPDATE CURRENT_TIMESTAMP`` columns kept (:func:`_keep`)."""

    def start(self, connection: Connection) -> int:
        """Each sweep ends at the rows there are when it starts: rows inserted
        later take their new reference from the trigger. Walking on to the end
        would chase the application's inserts for as long as they arrive faster
        than a batch takes.

        The catalog the batches need is read here, once per sweep rather than
        once per batch (each read is a round trip or two into
        ``information_schema``): the parent's primary key -- the old or the
        new key column, by phase; it moves in the backfill going up, after it
        coming down, never during a walk -- and the child's columns kept."""
        self.pk = _pk_column(connection, self.ref.table)
        self.parent_pk = _pk_column(connection, self.plan.table)[0]
        self.keep = _keep(connection, self.ref.table, "r")
        c = _q(connection, self.ref.table)
        desc = ", ".join(f"{_q(connection, k)} DESC" for k in self.pk)
        cols = ", ".join(_q(connection, k) for k in self.pk)
        total = query_sql(connection, f"SELECT COUNT(*) FROM {c}").scalar_one()
        last = query_sql(connection, f"SELECT {cols} FROM {c} ORDER BY {desc} LIMIT 1").first()
        self.high = None if last is None else tuple(last)
        return int(total)

    def batch(self, connection: Connection, after: Any, size: int) -> tuple[Any, int] | None:
        """The next ``size`` children up to the sweep's end."""
        if self.high is None:
            return None
        c, p = _q(connection, self.ref.table), _q(connection, self.plan.table)
        pk = [f"r.{_q(connection, k)}" for k in self.pk]
        ks = [f"k{i}" for i in range(len(self.pk))]
        pp = _q(connection, self.parent_pk)
        low = f"{_keyset(pk, 'after', inclusive=False)} AND " if after is not None else ""
        since = _bound("after", after) if after is not None else {}
        bounds = {**_bound("high", self.high), **since}
        upto = connection.execute(
            text_sql(
                connection.dialect,
                f"SELECT {', '.join(ks)} FROM (SELECT"
                f" {', '.join(f'{col} AS {k}' for col, k in zip(pk, ks, strict=True))}"
                f" FROM {c} r WHERE {low}{_keyset(pk, 'high', inclusive=True)}"
                f" ORDER BY {', '.join(ks)} LIMIT :n) b"
                f" ORDER BY {', '.join(f'{k} DESC' for k in ks)} LIMIT 1",
            ),
            {**bounds, "n": size},
        ).first()
        if upto is None:
            return None
        last = tuple(upto)
        s, t = _q(connection, self.source), _q(connection, self.target)
        lo, gv = _q(connection, self.look), _q(connection, self.give)
        # Locks in the application's order: every parent of the batch
        # first, then the children. The application deleting a parent or
        # changing its key takes X on it, then its children through the
        # cascade (through both foreign keys, old and new); a batch that
        # held some children while waiting for a parent (an UPDATE joined
        # to the parent locks them row by row, interleaved) deadlocks with
        # it, and InnoDB rolls back the lighter transaction: the
        # application's.
        # 1. The values, read without locks (a consistent read: CREATE ...
        #    SELECT under READ COMMITTED) into a temporary table of this
        #    session. A parent not found takes its value from the mapping (a
        #    child written before its parent chose it there); with neither,
        #    it is not a NULL reference but a key that moved since: left for
        #    the next sweep. The mapping is looked up only for a child whose
        #    parent is not found (COALESCE and OR evaluate left to right, and
        #    stop at the first value): a join to it cost a lookup per row,
        #    for the few rows that need one (its columns are unique, so the
        #    subqueries find what the join found).
        m = _q(connection, self.plan.mapping_table)
        mine, theirs = ("old_key", "new_key") if self.up else ("new_key", "old_key")
        mapped = f"FROM {m} y WHERE y.{mine} = r.{s}"
        value = f"COALESCE(x.{gv}, (SELECT y.{theirs} {mapped}))"
        keys = ", ".join(f"{col} AS {k}" for col, k in zip(pk, ks, strict=True))
        connection.execute(
            text_sql(
                connection.dialect,
                f"CREATE TEMPORARY TABLE {_BATCH} AS SELECT {keys}, r.{s} AS s,"
                f" {value} AS v, x.{pp} AS p FROM {c} r LEFT JOIN {p} x ON x.{lo} = r.{s}"
                f" WHERE {low}{_keyset(pk, 'upto', inclusive=True)}"
                f" AND NOT (r.{t} <=> {value})"
                f" AND (x.{lo} IS NOT NULL OR r.{s} IS NULL OR EXISTS (SELECT 1 {mapped}))",
            ),
            {**since, **_bound("upto", last)},
        )
        try:
            # 2. Those parents, S-locked through their primary key (a
            #    secondary index would lock its own entry first, which the
            #    application's DELETE, holding the row, must X-lock after:
            #    another deadlock): a parent being deleted or re-keyed now is
            #    waited for before this batch holds any child row. Counted,
            #    not fetched: each row read is locked all the same, and the
            #    batch's parents no longer travel to the client to be dropped.
            query_sql(
                connection,
                f"SELECT STRAIGHT_JOIN COUNT(*) FROM {_BATCH} b JOIN {p} x"
                f" ON x.{pp} = b.p LOCK IN SHARE MODE",
            ).all()
            # 3. Set where the reference is still the one read (else the
            # application's trigger has set it already); no foreign key
            # check, which would lock the parents row by row (the checks
            # verify).
            on = " AND ".join(f"b.{k} = {col}" for col, k in zip(pk, ks, strict=True))
            query_sql(
                connection,
                f"SET STATEMENT foreign_key_checks = 0 FOR UPDATE {c} r JOIN {_BATCH} b"
                f" ON {on} SET r.{t} = b.v{self.keep} WHERE r.{s} <=> b.s",
            )
        finally:
            query_sql(connection, f"DROP TEMPORARY TABLE IF EXISTS {_BATCH}")
        return last, size

    def left(self, connection: Connection) -> int:
        """References with no value on the following side yet."""
        s, t = _q(connection, self.source), _q(connection, self.target)
        return int(
            query_sql(
                connection,
                f"SELECT COUNT(*) FROM {_q(connection, self.ref.table)}"
                f" WHERE {s} IS NOT NULL AND {t} IS NULL",
            ).scalar_one()
        )

    def stuck(self) -> str:
        """References kept moving."""
        return (
            f"{self.ref.table}.{self.ref.column}: references keep moving faster than the"
            " backfill; stopped before the swap (run the migration again to continue)"
        )


class NulledReferences(Walk):
    """After the new column's foreign key exists: the references a cascade set
    ``NULL`` before it did, whose new column still names the parent, emptied.

    MariaDB fires no trigger for a cascade, so between a child's backfill and
    the foreign key on its new column an ``ON DELETE``/``ON UPDATE SET NULL``
    emptied the old column alone. Those rows are the only ones a cascade can
    have left wrong (``CASCADE`` deletes the child, or changes the old value
    to a key whose parent's new key is unchanged; every other write fires the
    sync triggers), and they are found through the index InnoDB keeps on the
    old column for its foreign key (``old IS NULL``): no walk over the whole
    child, whose every row was backfilled a moment ago. From the foreign key
    on, a cascade empties both columns. The prepare's check proves every row
    (and sweeps every table again should it find one wrong)."""

    def __init__(self, plan: PkMigrationPlan, ref: Reference) -> None:
        self.plan, self.ref = plan, ref
        self.label = f"{ref.table}.{ref.column} references set NULL"
        self.source, self.target = ref.column, plan.temp_column(ref.table, ref.column)
        self.pk: list[str] = []
        self.keep = ""

    def _stale(self, connection: Connection) -> str:
        s, t = _q(connection, self.source), _q(connection, self.target)
        return f"r.{s} IS NULL AND r.{t} IS NOT NULL"

    def start(self, connection: Connection) -> int:
        """The child's primary key and kept columns; the rows to empty."""
        self.pk = _pk_column(connection, self.ref.table)
        self.keep = _keep(connection, self.ref.table, "r")
        return self.left(connection)

    def batch(self, connection: Connection, after: Any, size: int) -> tuple[Any, int] | None:
        """The next ``size`` such rows, in the child's key order, emptied. Only
        the child's rows are locked (no parent is read: ``NULL`` needs none)."""
        c = _q(connection, self.ref.table)
        pk = [f"r.{_q(connection, k)}" for k in self.pk]
        ks = [f"k{i}" for i in range(len(self.pk))]
        low = f"{_keyset(pk, 'after', inclusive=False)} AND " if after is not None else ""
        since = _bound("after", after) if after is not None else {}
        stale = self._stale(connection)
        upto = connection.execute(
            text_sql(
                connection.dialect,
                f"SELECT {', '.join(ks)} FROM (SELECT"
                f" {', '.join(f'{col} AS {k}' for col, k in zip(pk, ks, strict=True))}"
                f" FROM {c} r WHERE {low}{stale} ORDER BY {', '.join(ks)} LIMIT :n) b"
                f" ORDER BY {', '.join(f'{k} DESC' for k in ks)} LIMIT 1",
            ),
            {**since, "n": size},
        ).first()
        if upto is None:
            return None
        last = tuple(upto)
        # Rechecked as the rows are locked: a row given a parent again since
        # was set by the application's trigger.
        emptied = connection.execute(
            text_sql(
                connection.dialect,
                f"UPDATE {c} r SET r.{_q(connection, self.target)} = NULL{self.keep}"
                f" WHERE {low}{_keyset(pk, 'upto', inclusive=True)} AND {stale}",
            ),
            {**since, **_bound("upto", last)},
        ).rowcount
        return last, int(emptied)

    def left(self, connection: Connection) -> int:
        """Rows still naming a parent their old column no longer does."""
        return int(
            query_sql(
                connection,
                f"SELECT COUNT(*) FROM {_q(connection, self.ref.table)} r"
                f" WHERE {self._stale(connection)}",
            ).scalar_one()
        )

    def stuck(self) -> str:
        """Cannot happen (the foreign key keeps such rows from appearing)."""
        return (
            f"{self.ref.table}.{self.ref.column}: references set NULL keep appearing;"
            " stopped before the swap (run the migration again to continue)"
        )
