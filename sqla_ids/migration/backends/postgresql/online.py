"""PostgreSQL: the key migration while the application keeps writing.

Expand -> backfill -> prepare -> swap -> contract. Each phase is a list of
tasks (:mod:`sqla_ids.migration.backends.base`) that the online runner
carries out: statements built from the catalog just before they run, each
group in a short transaction under ``lock_timeout`` (retried with backoff),
or a statement that takes no blocking lock at all:

* **expand**: the mapping table, one ``uuid`` column per affected column
  (``ADD COLUMN`` without a default is instant), a ``DEFAULT
  sqla_ids_uuid7()`` on the new key so that every row inserted from now on
  has its UUID, and triggers keeping the new columns and the mapping in step
  with every ``INSERT``, ``UPDATE`` (of the key itself, or a child moved to
  another parent) and ``DELETE``.
* **backfill**: existing rows in keyset batches (:class:`ParentKeys`, then a
  :class:`ChildReferences` per reference). The parent's new keys are
  computed in SQL, ordered like the old keys: ``row_number()`` over the old
  key gives a 12-bit sub-millisecond counter after a timestamp that lies
  before the migration started, so the backfilled keys sort below every key
  made since -- or, with a ``timestamp_column``, each row's own time, by the
  offline rule (:mod:`sqla_ids.migration.core.backfill`). Children are then set
  through the mapping.
* **prepare**: ``CREATE UNIQUE INDEX CONCURRENTLY`` on the new key, the
  children's indexes rebuilt ``CONCURRENTLY`` on the new columns, ``NOT
  NULL`` proven by ``CHECK … NOT VALID`` + ``VALIDATE`` (which only takes a
  ``SHARE UPDATE EXCLUSIVE`` lock), foreign keys added ``NOT VALID`` and
  ``VALIDATE``d.
* **swap**: one transaction with the tables locked: drop the old key and its
  foreign keys, rename, ``PRIMARY KEY USING INDEX``, ``SET NOT NULL`` (no
  scan: the validated CHECK proves it), and triggers that now keep the *old*
  columns in step, so the migration can still be undone online until the
  contract. The views over the columns are dropped first and created again
  last, over the columns that now have the names (:func:`create_view_statements`).
* **contract**: drop those triggers and the children's old columns. The
  parent keeps ``<key>_old`` and the mapping table, as the offline migration
  does.

The swap, the contract and the undos are built by pure functions from the
plan, a :class:`Catalog` read under the lock and the dialect
(:func:`swap_statements`...): a dry run prints them, and tests check them
without a server.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect

from sqla_ids.dialects import for_dialect
from sqla_ids.dialects.sql import ddl_sql, literal_for, query_sql, quote_name, quoter, text_sql
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration.backends.base import (
    Backfill,
    Ddl,
    Mode,
    OnlineStrategy,
    Probe,
    Task,
)
from sqla_ids.migration.backends.postgresql import keys, partitions, versions
from sqla_ids.migration.backends.postgresql.locks import (
    AUTOVACUUM,
    HELD,
    OUTLAST,
    dollar_tag,
    lock_all,
    lock_tree,
    wait_out_vacuum,
)
from sqla_ids.migration.backends.postgresql.reflect import (
    GENERATED_READERS,
    find_views,
    index_valid,
    qualified,
)
from sqla_ids.migration.core import mapping
from sqla_ids.migration.core.backfill import (
    ParentKeysWalk,
    Walk,
    backfilled_below,
    first_ms,
    timestamp_refusals,
)
from sqla_ids.migration.core.model import (
    OLD_COLUMN_COMMENT,
    Dependent,
    PkMigrationPlan,
    Reference,
    View,
)
from sqla_ids.migration.core.names import (
    Sides,
    child_old,
    is_object_name,
    mentions_object_name,
    object_name,
    rebuilt,
    references,
)
from sqla_ids.migration.core.reflected import inspect
from sqla_ids.migration.core.sql import Statement, execute
from sqla_ids.types.server_functions import uuid7_function_create_sql

# Where a connection's own search_path is kept while it works in the caller's.
_SEARCH_PATH = "sqla_ids_online_search_path"

# The backfill's own UPDATEs do not fire the BEFORE sync triggers: its batch
# transactions set this (SET LOCAL) and write the mapping rows themselves, set-wise
# (ParentKeys.batch). The trigger function per row (a DELETE and an INSERT into the
# mapping, in PL/pgSQL) cost more than the UPDATE itself. The WHEN condition is
# evaluated by the executor before any PL/pgSQL call; every other session (the
# application's, replicas') leaves the setting unset (NULL) or empty.
BACKFILL_SETTING = "sqla_ids.backfill"
_NOT_BACKFILL = f"current_setting('{BACKFILL_SETTING}', true) IS DISTINCT FROM 'on'"

# pg_constraint's action codes -> SQL.
_ACTIONS = {"a": "NO ACTION", "r": "RESTRICT", "c": "CASCADE", "n": "SET NULL", "d": "SET DEFAULT"}


def _q(bind: Connection | Dialect, name: str) -> str:
    dialect = bind if isinstance(bind, Dialect) else bind.dialect
    return quote_name(dialect, name)


def _pk_columns(connection: Connection, table: str) -> list[str]:
    pk = inspect(connection).get_pk_constraint(table)
    return list(pk.get("constrained_columns") or [])


def _fk_actions(connection: Connection, table: str, name: str) -> str:
    row = connection.execute(
        sa.text(
            "SELECT confupdtype, confdeltype, condeferrable, condeferred FROM pg_constraint"
            " WHERE conrelid = to_regclass(:t) AND conname = :n"
        ),
        {"t": _q(connection, table), "n": name},
    ).one()
    sql = f" ON UPDATE {_ACTIONS[row[0]]} ON DELETE {_ACTIONS[row[1]]}"
    if row[2]:
        sql += " DEFERRABLE INITIALLY " + ("DEFERRED" if row[3] else "IMMEDIATE")
    return sql


def _constraint_exists(connection: Connection, table: str, name: str) -> bool:
    return bool(
        connection.execute(
            sa.text(
                "SELECT 1 FROM pg_constraint WHERE conrelid = to_regclass(:t) AND conname = :n"
            ),
            {"t": _q(connection, table), "n": name},
        ).scalar()
    )


# --- what the swap and its undo read: the catalog -----------------------------------


@dataclass
class Catalog:
    """What the swap carries over from the columns leaving to those arriving,
    read with the tables locked (:func:`read_catalog`)."""

    tables: set[str] = field(default_factory=set)
    """The affected tables that exist (their triggers are dropped)."""
    comments: dict[tuple[str, str], str | None] = field(default_factory=dict)
    """``(table, column)`` -> its comment."""
    grants: dict[tuple[str, str], list[tuple[str, str, bool]]] = field(default_factory=dict)
    """``(table, column)`` -> its column privileges ``(grantee, privilege, grantable)``."""
    owners: dict[tuple[str, str], str] = field(default_factory=dict)
    """``(table, index)`` -> the ``UNIQUE`` or ``PRIMARY KEY`` constraint owning
    the index."""
    views: list[View] = field(default_factory=list)
    """The views over the converted columns under their own names (and views over
    those), in the order to create them: the swap and its undo drop them first
    and create them again last, in their transaction (read for those only)."""
    partitioned: set[str] = field(default_factory=set)
    """The affected tables (and partitions carrying foreign keys) that are
    partitioned: their foreign keys are added at the swap, adopting the pieces
    the prepare validated on each partition (:mod:`.partitions`)."""
    actions: dict[tuple[str, str], str] = field(default_factory=dict)
    """``(table, constraint)`` -> a partitioned table's foreign key's actions."""
    index_pieces: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)
    """``(table, index)`` of a partitioned table -> ``(piece, name)``: the piece
    the prepare built on a partition over the arriving column, and the name the
    leaving column's piece there has (which it takes at the swap)."""
    inheriting: dict[str, list[str]] = field(default_factory=dict)
    """An affected table -> the tables that inherit from it (quoted): the sync
    triggers go on each of them too (a row inserted into one, as Sakila's rules
    insert payments, fires its own triggers, not its parent's)."""
    key_pieces: dict[tuple[str, str], list[tuple[str, str, str]]] = field(default_factory=dict)
    """``(table, constraint)`` of a partitioned table's foreign key -> ``(partition,
    piece, name)``, as :attr:`index_pieces`."""
    update_rules: dict[tuple[str, str], str] = field(default_factory=dict)
    """``(table, constraint)`` of a reference -> its foreign key's ``ON UPDATE`` rule
    (``"CASCADE"``, ``"NO ACTION"``...): what the children's old values do when
    the old code changes an old key after the swap (:func:`_old_references_follow`)."""


def _tables(plan: PkMigrationPlan) -> list[str]:
    """The migrated table and the children, sorted (numbering the triggers)."""
    return sorted({plan.table, *(r.table for _, r in references(plan))})


@dataclass(frozen=True)
class _Moved:
    """A foreign key the online mode builds again on the arriving column: a
    child's, or one a partition declares itself over its partitioned table's
    column (pagila's ``payment_p2022_01``: ``ref`` is then the partitioned
    table's reference, through which the column is converted)."""

    table: str
    constraint: str
    name: str
    """The migration's own name for it until the swap gives it ``constraint``."""
    n: int
    ref: Reference


def _moved(plan: PkMigrationPlan) -> list[_Moved]:
    moved = [
        _Moved(ref.table, ref.constraint, object_name(plan, "fk", n), n, ref)
        for n, ref in references(plan)
        if ref.constraint
    ]
    through = {(r.table, r.column): (n, r) for n, r in references(plan)}
    for i, ref in enumerate(plan.references):
        if ref.via is not None and ref.constraint and (ref.via, ref.column) in through:
            n, root = through[(ref.via, ref.column)]
            moved.append(_Moved(ref.table, ref.constraint, object_name(plan, "pfk", i), n, root))
    return moved


def _owner(connection: Connection, dep: Dependent) -> str | None:
    """The ``UNIQUE`` or ``PRIMARY KEY`` constraint owning the index ``dep``."""
    owner = connection.execute(
        sa.text(
            "SELECT conname FROM pg_constraint WHERE conindid = to_regclass(:i)"
            " AND conrelid = to_regclass(:t) AND contype IN ('p', 'u')"
        ),
        {"i": _q(connection, dep.name), "t": _q(connection, dep.table)},
    ).scalar()
    return None if owner is None else str(owner)


def read_views(connection: Connection, plan: PkMigrationPlan) -> list[View]:
    """The views over the converted columns under their own names (the old ones
    before the swap, the UUID ones after it), views over those included.

    Read under the swap's lock, not taken from the plan: a view created since
    over one of these views is found too (a ``DROP VIEW`` without ``CASCADE``
    would refuse to go under it), and each definition is the one in force. A
    view is bound to its columns by number, not by name: one left in place
    would follow the old column to its parked name (and keep the old key
    alive); created again from its text, it reads the column that takes the
    name."""
    inspector = inspect(connection)
    named: dict[str, set[str]] = {}
    for table, column in plan.targets():
        if inspector.has_table(table):
            named.setdefault(table, set()).add(column)
    return find_views(connection, inspector, named, refresh_populated=True)


def read_catalog(connection: Connection, plan: PkMigrationPlan, views: bool = False) -> Catalog:
    """The :class:`Catalog` of the affected tables as they are now (``views``: with
    the views over the converted columns, for the swap and its undo)."""
    catalog = Catalog()
    inspector = inspect(connection)
    catalog.tables = {t for t in _tables(plan) if inspector.has_table(t)}
    for table in sorted(catalog.tables):
        if below := partitions.inheriting(connection, table):
            catalog.inheriting[table] = below
    if views:
        catalog.views = read_views(connection, plan)
    columns = [(plan.table, plan.column), *((r.table, r.column) for _, r in references(plan))]
    for table, column in columns:
        if table not in catalog.tables:
            continue
        params = {"t": _q(connection, table), "c": column}
        catalog.comments[(table, column)] = connection.execute(
            sa.text(
                "SELECT col_description(to_regclass(:t), attnum) FROM pg_attribute"
                " WHERE attrelid = to_regclass(:t) AND attname = :c"
            ),
            params,
        ).scalar()
        catalog.grants[(table, column)] = [
            (str(grantee), str(privilege), bool(grantable))
            for grantee, privilege, grantable in connection.execute(
                sa.text(
                    "SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC'"
                    " ELSE pg_get_userbyid(a.grantee) END, a.privilege_type, a.is_grantable"
                    " FROM pg_attribute att, aclexplode(att.attacl) a"
                    " WHERE att.attrelid = to_regclass(:t) AND att.attname = :c"
                ),
                params,
            ).all()
        ]
    for _, ref in references(plan):
        if ref.table in catalog.tables and ref.constraint:
            rule = connection.execute(
                sa.text(
                    "SELECT confupdtype FROM pg_constraint"
                    " WHERE conrelid = to_regclass(:t) AND conname = :n AND contype = 'f'"
                ),
                {"t": _q(connection, ref.table), "n": ref.constraint},
            ).scalar()
            if rule is not None:
                catalog.update_rules[(ref.table, ref.constraint)] = _ACTIONS[str(rule)]
    for number, dep in rebuilt(plan):
        owner = _owner(connection, dep)
        if owner:
            catalog.owners[(dep.table, dep.name)] = str(owner)
        if partitions.is_partitioned(connection, dep.table):
            ours = object_name(plan, "ix", number)
            pieces = [
                (partitions.piece(ours, oid), name)
                for oid, name in partitions.index_pieces(connection, dep.name)
            ]
            built = partitions.existing_indexes(connection, [piece for piece, _ in pieces])
            catalog.index_pieces[(dep.table, dep.name)] = [p for p in pieces if p[0] in built]
    for key in _moved(plan):
        if partitions.is_partitioned(connection, key.table):
            catalog.partitioned.add(key.table)
            catalog.actions[(key.table, key.constraint)] = _fk_actions(
                connection, key.table, key.constraint
            )
            leaves = [
                (partition, partitions.piece(key.name, oid), name)
                for oid, partition, name in partitions.foreign_key_pieces(
                    connection, key.table, key.constraint
                )
            ]
            made = partitions.existing_constraints(connection, [leaf[1] for leaf in leaves])
            catalog.key_pieces[(key.table, key.constraint)] = [x for x in leaves if x[1] in made]
    return catalog


# --- statements ------------------------------------------------------------------------


def _comment(dialect: Dialect, table: str, column: str, comment: str | None) -> Statement:
    value = "NULL" if comment is None else literal_for(dialect, comment)
    return Statement(f"COMMENT ON COLUMN {_q(dialect, table)}.{_q(dialect, column)} IS {value}")


def _grants(
    dialect: Dialect, catalog: Catalog, table: str, source: str, target: str
) -> list[Statement]:
    """Column-level privileges of ``source`` granted on ``target`` too (a new column
    has none, and ``GRANT … (column)`` is how applications restrict key access)."""
    statements = []
    for grantee, privilege, grantable in catalog.grants.get((table, source), []):
        role = "PUBLIC" if grantee == "PUBLIC" else _q(dialect, grantee)
        statements.append(
            Statement(
                f"GRANT {privilege} ({_q(dialect, target)}) ON {_q(dialect, table)} TO {role}"
                + (" WITH GRANT OPTION" if grantable else "")
            )
        )
    return statements


def _not_null_follows(
    dialect: Dialect, table: str, leaving: str, taking: str, between: str
) -> list[Statement]:
    """The ``NOT NULL`` constraint's name goes with the role, as the column's name does.

    PostgreSQL 18 names ``NOT NULL`` constraints (``<table>_<column>_not_null``)
    and a renamed column keeps its constraint's name: the column taking the
    role would get ``..._not_null1`` (the name still being the leaving
    column's), and keep it through a later restore. The taking column's
    constraint gets the name; the leaving column's gets the one PostgreSQL
    would give it under its new name (through ``between``: undoing the swap,
    that is the name the taking column's constraint has). The names are
    PostgreSQL's own choice at ``SET NOT NULL``, so the server looks them up
    (one ``DO`` block, names passed as literals, each used through ``%I``).
    """
    if (dialect.server_version_info or (0,)) < (18,):
        return []
    # PostgreSQL's own choice, cut at 63 bytes as it cuts identifiers.
    spare = f"{table}_{leaving}_not_null".encode()[:63].decode(errors="ignore")

    def lit(value: str) -> str:
        return literal_for(dialect, value)

    def name_of(column: str, into: str) -> str:
        return (
            f"SELECT c.conname INTO {into} FROM pg_constraint c JOIN pg_attribute a"
            " ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]"
            f" WHERE c.conrelid = t AND c.contype = 'n' AND a.attname = {lit(column)};"
        )

    rename = "EXECUTE format('ALTER TABLE %s RENAME CONSTRAINT %I TO %I', t, {}, {});"
    body = "\n".join(
        [
            f"DECLARE t regclass := to_regclass({lit(_q(dialect, table))}); name text; given text;",
            "BEGIN",
            name_of(leaving, "name"),
            name_of(taking, "given"),
            "IF name IS NOT NULL AND given IS NOT NULL THEN",
            rename.format("name", lit(between)),
            rename.format("given", "name"),
            rename.format(lit(between), lit(spare)),
            "END IF;",
            "END",
        ]
    )
    tag = dollar_tag(body)
    return [Statement(f"DO {tag}\n{body}\n{tag}")]


def drop_trigger_statements(
    dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog
) -> list[Statement]:
    """Drop the sync triggers and their functions (those of existing tables)."""
    statements = []
    for n, table in enumerate(_tables(plan)):
        if table not in catalog.tables:
            continue
        for on in [_q(dialect, table), *catalog.inheriting.get(table, [])]:
            for kind in ("before", "after"):
                statements.append(
                    Statement(
                        f"DROP TRIGGER IF EXISTS {_q(dialect, object_name(plan, kind, n))} ON {on}"
                    )
                )
        statements.append(
            Statement(f"DROP FUNCTION IF EXISTS {_q(dialect, object_name(plan, 'sync', n))}()")
        )
    return statements


def sync_trigger_statements(
    dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog, forward: bool
) -> list[Statement]:
    """One trigger function per affected table keeping the other side in step.

    ``forward`` (before the swap): the new columns follow the old ones.
    Otherwise (between swap and contract): the old columns follow the new.
    """

    def q(name: str) -> str:
        return _q(dialect, name)

    by_table: dict[str, list[str]] = {}
    m = q(plan.mapping_table)
    key_tmp = plan.temp_column(plan.table, plan.column)
    if forward:
        old_key, new_key = plan.column, key_tmp
    else:
        old_key, new_key = plan.old_column, plan.column
    ok, nk = q(old_key), q(new_key)
    segment = keys.row_segment_sql(dialect, plan, "NEW", swapped=not forward)
    made = keys.stored_key_sql(plan, "sqla_ids_uuid7()", segment)
    # The parent: the mapping follows inserts, key changes and deletes. Key
    # changes are mapped BEFORE the row changes, so that an ON UPDATE
    # CASCADE (an AFTER trigger) finds the new old key in the mapping when
    # it rewrites the children.
    if forward:
        # The mapping is where a key's new value is chosen, first come first
        # served: a child written before its parent -- in the same statement
        # (a data-modifying CTE, a row referencing itself), under a deferred
        # foreign key, by a replica session -- has chosen it already, and the
        # parent takes it (INSERT ... ON CONFLICT ... RETURNING, one atomic step).
        inserted = [
            f"  IF NEW.{ok} IS NOT NULL THEN",
            f"    INSERT INTO {m} AS x (old_key, new_key)"
            f" VALUES (NEW.{ok}, COALESCE(NEW.{nk}, {made}))",
            "      ON CONFLICT (old_key) DO UPDATE SET new_key = x.new_key",
            f"      RETURNING x.new_key INTO NEW.{nk};",
            *_completed(dialect, plan, ok, nk, segment),
            f"  ELSIF NEW.{nk} IS NULL THEN",
            f"    NEW.{nk} := {made};",
            "  END IF;",
        ]
        mapped_after: list[str] = []
    elif plan.options.versions:
        # Serving versions, the old code writes old keys after the swap too:
        # its child written before its parent (a data-modifying CTE, a row
        # referencing itself, a deferred foreign key) needs the parent's pair
        # in the mapping when the child is written -- so it is mapped here,
        # before the row is, first come first served as before the swap.
        inserted = [
            f"  IF NEW.{ok} IS NOT NULL THEN",
            f"    INSERT INTO {m} AS x (old_key, new_key)"
            f" VALUES (NEW.{ok}, COALESCE(NEW.{nk}, {made}))",
            "      ON CONFLICT (old_key) DO UPDATE SET new_key = x.new_key",
            f"      RETURNING x.new_key INTO NEW.{nk};",
            "  END IF;",
        ]
        mapped_after = []
    else:
        # UUID192 keys have no column default (their segment is the row's):
        # a row inserted without one until the contract -- by the old code --
        # gets it here.
        inserted = (
            [f"  IF NEW.{nk} IS NULL THEN NEW.{nk} := {made}; END IF;"]
            if plan.uuid192
            else ["  NULL;"]
        )
        mapped_after = [
            "ELSIF TG_WHEN = 'AFTER' AND TG_OP = 'INSERT' THEN",
            f"  IF NEW.{ok} IS NOT NULL AND NEW.{nk} IS NOT NULL THEN",
            f"    INSERT INTO {m} (old_key, new_key) VALUES (NEW.{ok}, NEW.{nk})",
            "      ON CONFLICT (old_key) DO UPDATE SET new_key = EXCLUDED.new_key;",
            "  END IF;",
        ]
    if plan.options.versions:
        # A child written first through the other version -- knowing only
        # this row's key of that version -- chose the pair in the mapping by
        # that key (see _chosen_in_mapping): the row takes the old key chosen
        # for its new one. The other side's key came from its default then,
        # never in the mapping.
        inserted = [
            f"  IF NEW.{nk} IS NOT NULL THEN",
            f"    NEW.{ok} := COALESCE((SELECT old_key FROM {m} WHERE new_key = NEW.{nk}),"
            f" NEW.{ok});",
            "  END IF;",
            *inserted,
        ]
    parent = [
        "IF TG_WHEN = 'BEFORE' AND TG_OP = 'INSERT' THEN",
        *inserted,
        "ELSIF TG_WHEN = 'BEFORE' AND TG_OP = 'UPDATE' THEN",
        f"  IF NEW.{ok} IS DISTINCT FROM OLD.{ok} AND OLD.{nk} IS NOT NULL THEN",
        f"    UPDATE {m} SET old_key = NEW.{ok} WHERE new_key = OLD.{nk};",
        *([] if forward else _old_references_follow(dialect, plan, catalog, ok)),
        "  END IF;",
        f"  IF NEW.{nk} IS DISTINCT FROM OLD.{nk} AND NEW.{nk} IS NOT NULL"
        f" AND NEW.{ok} IS NOT NULL THEN",
        f"    DELETE FROM {m} WHERE new_key = OLD.{nk};",
        f"    INSERT INTO {m} (old_key, new_key) VALUES (NEW.{ok}, NEW.{nk})",
        "      ON CONFLICT (old_key) DO UPDATE SET new_key = EXCLUDED.new_key;",
        "  END IF;",
        *mapped_after,
        "ELSIF TG_WHEN = 'AFTER' AND TG_OP = 'DELETE' THEN",
        f"  DELETE FROM {m} WHERE old_key = OLD.{ok};",
        "END IF;",
    ]
    by_table.setdefault(plan.table, []).extend(parent)
    p = q(plan.table)
    # The parent's key a child chooses: a UUID192 key with a segment is left
    # pending (keys.PENDING_LENGTH) until the parent's row brings its segment.
    chosen_key = (
        keys.pending_key_sql("sqla_ids_uuid7()")
        if segment is not None
        else keys.stored_key_sql(plan, "sqla_ids_uuid7()", None)
    )
    for n, ref in references(plan):
        if forward:
            target, look, give = plan.temp_column(ref.table, ref.column), "old_key", "new_key"
        else:
            target, look, give = child_old(plan, n, ref), "new_key", "old_key"
        s, t = q(ref.column), q(target)
        # A child row pointing at another parent (or a new child) takes that
        # parent's value from the mapping. A parent that exists without one is
        # not backfilled yet: left NULL here, the backfill sets it. A parent
        # nowhere to be seen (not written yet, or in this very statement) gets
        # its new key chosen here, in the mapping, which it will take.
        chosen = (
            [
                f"    IF NEW.{t} IS NULL AND NEW.{s} IS NOT NULL"
                f" AND NOT EXISTS (SELECT 1 FROM {p} WHERE {ok} = NEW.{s}) THEN",
                f"      INSERT INTO {m} AS x (old_key, new_key) VALUES (NEW.{s}, {chosen_key})",
                "        ON CONFLICT (old_key) DO UPDATE SET new_key = x.new_key",
                f"        RETURNING x.new_key INTO NEW.{t};",
                "    END IF;",
            ]
            if forward
            else []
        )
        leads = f"TG_OP = 'INSERT' OR NEW.{s} IS DISTINCT FROM OLD.{s}"
        follows: list[str] = []
        if plan.options.versions:
            # Two versions write: a row written through the other one carries
            # only the following column (a child inserted through *after*
            # before the swap has just its UUID reference), which then leads.
            leads = (
                f"(TG_OP = 'INSERT' AND (NEW.{s} IS NOT NULL OR NEW.{t} IS NULL))"
                f" OR (TG_OP = 'UPDATE' AND NEW.{s} IS DISTINCT FROM OLD.{s})"
            )
            follows = [
                f"  ELSIF TG_OP = 'INSERT' OR NEW.{t} IS DISTINCT FROM OLD.{t} THEN",
                f"    NEW.{s} := (SELECT {look} FROM {m} WHERE {give} = NEW.{t});",
                *_chosen_in_mapping(dialect, plan, old_key, new_key, f"NEW.{t}", f"NEW.{s}", give),
            ]
            if not forward:
                # After the swap the new code's UUID leads: its child written
                # before its parent chooses the parent's old key (which
                # *before* then reads), as the old code's chooses the UUID
                # before the swap (above).
                chosen = _chosen_in_mapping(
                    dialect, plan, old_key, new_key, f"NEW.{s}", f"NEW.{t}", look
                )
        by_table.setdefault(ref.table, []).extend(
            [
                "IF TG_WHEN = 'BEFORE' AND TG_OP IN ('INSERT', 'UPDATE') THEN",
                f"  IF {leads} THEN",
                f"    NEW.{t} := (SELECT {give} FROM {m} WHERE {look} = NEW.{s});",
                *chosen,
                *follows,
                "  END IF;",
                "END IF;",
            ]
        )
    statements = drop_trigger_statements(dialect, plan, catalog)
    numbers = {table: n for n, table in enumerate(_tables(plan))}
    for table, lines in sorted(by_table.items()):
        n = numbers[table]
        function = q(object_name(plan, "sync", n))
        body = "\n".join(
            [
                "BEGIN",
                *lines,
                "IF TG_WHEN = 'BEFORE' THEN RETURN NEW; END IF;",
                "RETURN NULL;",
                "END;",
            ]
        )
        tag = dollar_tag(body)
        # Serving versions, the application's sessions put a schema of views
        # named like the tables first in their search_path: the function's
        # names must still find the tables (and the mapping) where the
        # migration made them, whichever version fired it.
        pinned = " SET search_path FROM CURRENT" if plan.options.versions else ""
        statements.append(
            Statement(
                f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql{pinned}"
                f" AS {tag}\n{body}\n{tag}"
            )
        )
        # The table's, and each inheriting table's own (a partition gets its
        # partitioned table's by itself).
        for on in [q(table), *catalog.inheriting.get(table, [])]:
            statements += [
                Statement(
                    f"CREATE TRIGGER {q(object_name(plan, 'before', n))} BEFORE INSERT OR UPDATE"
                    f" ON {on} FOR EACH ROW WHEN ({_NOT_BACKFILL}) EXECUTE FUNCTION {function}()"
                ),
                Statement(
                    f"CREATE TRIGGER {q(object_name(plan, 'after', n))} AFTER INSERT OR DELETE"
                    f" ON {on} FOR EACH ROW EXECUTE FUNCTION {function}()"
                ),
                # They fire in every session, replicas' included: a session with
                # session_replication_role = replica (a replication apply,
                # pg_restore, a bulk load) writes rows too, and they must be followed.
                *(
                    Statement(
                        f"ALTER TABLE {on} ENABLE ALWAYS TRIGGER {q(object_name(plan, kind, n))}"
                    )
                    for kind in ("before", "after")
                ),
            ]
    return statements


def _chosen_in_mapping(
    dialect: Dialect,
    plan: PkMigrationPlan,
    old_key: str,
    new_key: str,
    known: str,
    unknown: str,
    side: str,
) -> list[str]:
    """PL/pgSQL, serving versions: a child's reference ``known`` (PL/pgSQL) names,
    by the ``side`` (``"old_key"``/``"new_key"``) of the mapping its version
    knows, a parent nowhere to be seen -- written later in the transaction
    under a deferred foreign key, later in the same statement, or by a replica
    session -- so the other side's key is chosen here, in the mapping, into
    ``unknown``; the parent takes the pair when it comes (first come first
    served). A new UUID is made; a new old key comes from the old key's
    sequence or identity, as the parent's own default would have made it
    (without one, a parent inserted through *after* has no old key either:
    docs/migration.md, "Rolling deploys"). ``old_key``/``new_key``: the
    parent's columns now."""
    m, p = _q(dialect, plan.mapping_table), _q(dialect, plan.table)
    parent_column = old_key if side == "old_key" else new_key
    missing = (
        f"{unknown} IS NULL AND {known} IS NOT NULL"
        f" AND NOT EXISTS (SELECT 1 FROM {p} WHERE {_q(dialect, parent_column)} = {known})"
    )
    if side == "old_key":
        made = keys.stored_key_sql(plan, "sqla_ids_uuid7()", None)
        return [
            f"    IF {missing} THEN",
            f"      INSERT INTO {m} AS x (old_key, new_key) VALUES ({known}, {made})",
            "        ON CONFLICT (old_key) DO UPDATE SET new_key = x.new_key",
            f"        RETURNING x.new_key INTO {unknown};",
            "    END IF;",
        ]
    # The sequence by the table's and the column's names, read when needed:
    # the function outlives renames of neither, and the column's default
    # expression may name the sequence unqualified.
    sequence = f"pg_get_serial_sequence({literal_for(dialect, p)}, {literal_for(dialect, old_key)})"
    return [
        f"    IF {missing} AND {sequence} IS NOT NULL THEN",
        f"      INSERT INTO {m} AS x (old_key, new_key) VALUES (nextval({sequence}), {known})",
        "        ON CONFLICT (new_key) DO UPDATE SET old_key = x.old_key",
        f"        RETURNING x.old_key INTO {unknown};",
        "    END IF;",
    ]


def _old_references_follow(
    dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog, ok: str
) -> list[str]:
    """PL/pgSQL, between the swap and the contract: a parent's old key changed (by
    the old code, through *before*) does to the children's old values what
    their foreign key's ``ON UPDATE`` did before the swap -- the foreign keys
    are on the UUID columns now, so nothing else would: ``CASCADE`` follows,
    ``SET NULL`` (and ``SET DEFAULT``) empties the old value and the UUID
    reference both (else the versions, and the undo, would disagree),
    ``NO ACTION``/``RESTRICT`` refuses the change while a child still has the
    old value (as the foreign key did)."""
    lines: list[str] = []
    for n, ref in references(plan):
        c, old = _q(dialect, ref.table), _q(dialect, child_old(plan, n, ref))
        rule = catalog.update_rules.get((ref.table, ref.constraint or ""), "NO ACTION")
        # Not once the undo has put a foreign key back on the old values (on the
        # table, or on each partition): it does the rule itself -- after the
        # parent's row changed, where this BEFORE trigger's rewrite of the
        # children would point them at a key no row has yet.
        lines.append(
            "    IF NOT EXISTS (SELECT 1 FROM pg_constraint k JOIN pg_attribute a"
            " ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1] WHERE k.contype = 'f'"
            f" AND k.confrelid = {literal_for(dialect, _q(dialect, plan.table))}::regclass"
            f" AND a.attname = {literal_for(dialect, child_old(plan, n, ref))}) THEN"
        )
        if rule == "CASCADE":
            lines.append(f"    UPDATE {c} SET {old} = NEW.{ok} WHERE {old} = OLD.{ok};")
        elif rule in ("SET NULL", "SET DEFAULT"):
            # Both sides: the relationship is gone in *after* too.
            ref_new = _q(dialect, ref.column)
            lines.append(
                f"    UPDATE {c} SET {old} = NULL, {ref_new} = NULL WHERE {old} = OLD.{ok};"
            )
        else:
            message = literal_for(
                dialect,
                f"the key is still referenced from {ref.table} (its foreign key"
                f" {ref.constraint or ''} does not follow key changes)",
            )
            lines += [
                f"    IF EXISTS (SELECT 1 FROM {c} WHERE {old} = OLD.{ok}) THEN",
                "      RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',",
                f"        MESSAGE = {message};",
                "    END IF;",
            ]
        lines.append("    END IF;")
    return lines


def _completed(
    dialect: Dialect, plan: PkMigrationPlan, ok: str, nk: str, segment: str | None
) -> list[str]:
    """PL/pgSQL completing a parent's pending UUID192 key (:data:`keys.PENDING_LENGTH`:
    a child written first chose it, without the parent's segment) with the
    row's segment, in the row, the mapping and every child that took it. The
    children's rows are updated (their own UPDATE triggers see it): they were
    written earlier in this transaction (a deferred foreign key) or by a
    session without foreign key checks."""
    if segment is None:
        return []
    lines = [
        f"    IF length(NEW.{nk}) = {keys.PENDING_LENGTH} THEN",
        f"      NEW.{nk} := {keys.append_segment_sql(f'substr(NEW.{nk}, 1, 16)', segment)};",
        f"      UPDATE {_q(dialect, plan.mapping_table)} SET new_key = NEW.{nk}"
        f" WHERE old_key = NEW.{ok};",
    ]
    for _, ref in references(plan):
        t = _q(dialect, plan.temp_column(ref.table, ref.column))
        lines.append(
            f"      UPDATE {_q(dialect, ref.table)} SET {t} = NEW.{nk}"
            f" WHERE {_q(dialect, ref.column)} = NEW.{ok} AND length({t}) = {keys.PENDING_LENGTH};"
        )
    return [*lines, "    END IF;"]


def lock_statement(
    dialect: Dialect,
    plan: PkMigrationPlan,
    views: list[View] | None = None,
    first: Sequence[str] = (),
) -> Statement:
    """Every affected table locked for the step's transaction (the application's
    statements wait for it, for the time of a few metadata-only statements);
    before them ``first`` (the versions' views: see ``versions.lock_views``),
    then the (plain) views over them, those built on others before those.

    A query of a view locks the view, then the views and tables it reads, in
    that order; the swap drops the views after it has the tables: locking the
    tables first, it would wait for a reader that holds a view and waits for
    the tables (a deadlock). Locking a view locks what it reads too, in the
    order its readers do. (A materialized view cannot be locked, nor needs to
    be: its readers read no table; nor a rule, which is its table's.)

    Several objects are taken without ever waiting while holding one
    (:func:`~.locks.lock_all`): an application locks a parent and its children in
    either order (an ``INSERT INTO child ... SELECT ... FROM parent`` takes
    the child first, an ORM's flush the parent first), and a step waiting for
    a child while holding the parent would deadlock with the first kind --
    attempt after attempt while the application keeps writing (measured: a
    writer with no pause between its transactions made the expand give up
    after 20 attempts, 84 s)."""
    plain = [
        v.label
        for v in reversed(views or [])
        if v.kind == "view" and not v.drop_sql.startswith("DROP MATERIALIZED")
    ]
    return lock_all(dialect, [*first, *plain, *(_q(dialect, t) for t in _tables(plan))])


def table_locks(connection: Connection, plan: PkMigrationPlan, catalog: Catalog) -> list[Statement]:
    """The affected tables that exist (and the versions' views, which go first),
    locked first by a step that changes several of them in one transaction (the
    expand, the contract, the undo before the swap): taken one by one by its
    statements, each would wait while holding the ones before (see
    :func:`lock_statement`)."""
    names = versions.lock_views(connection, plan)
    names += [_q(connection, t) for t in sorted(catalog.tables)]
    return [lock_all(connection.dialect, names)] if names else []


def _exchange(
    dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog, sides: Sides
) -> list[Statement]:
    """The columns of ``sides`` exchange names and roles (both ways)."""

    def q(name: str) -> str:
        return _q(dialect, name)

    statements: list[Statement] = []

    def run(sql: str) -> None:
        statements.append(Statement(sql))

    t = q(plan.table)
    statements += _grants(dialect, catalog, plan.table, plan.column, sides.key_new)
    for n, ref in references(plan):
        statements += _grants(dialect, catalog, ref.table, ref.column, sides.child_new(n, ref))
    for key in _moved(plan):
        run(f"ALTER TABLE {q(key.table)} DROP CONSTRAINT {q(key.constraint)}")
    for _, dep in rebuilt(plan):
        owner = catalog.owners.get((dep.table, dep.name))
        if owner:
            run(f"ALTER TABLE {q(dep.table)} DROP CONSTRAINT {q(owner)}")
        else:
            run(f"DROP INDEX IF EXISTS {q(dep.name)}")
    pk_name = plan.pk_name or f"{plan.table}_pkey"
    run(f"ALTER TABLE {t} DROP CONSTRAINT {q(pk_name)}")
    run(f"ALTER TABLE {t} RENAME COLUMN {q(plan.column)} TO {q(sides.key_parked)}")
    run(f"ALTER TABLE {t} RENAME COLUMN {q(sides.key_new)} TO {q(plan.column)}")
    # The validated CHECK proves there is no NULL: SET NOT NULL does not scan.
    run(f"ALTER TABLE {t} ALTER COLUMN {q(plan.column)} SET NOT NULL")
    statements += _not_null_follows(
        dialect, plan.table, sides.key_parked, plan.column, object_name(plan, "nno", 0)
    )
    run(f"ALTER TABLE {t} DROP CONSTRAINT {q(object_name(plan, 'nn', 0))}")
    run(f"ALTER INDEX {q(object_name(plan, 'key', 0))} RENAME TO {q(pk_name)}")
    run(f"ALTER TABLE {t} ADD CONSTRAINT {q(pk_name)} PRIMARY KEY USING INDEX {q(pk_name)}")
    statements.append(
        _comment(dialect, plan.table, plan.column, catalog.comments.get((plan.table, plan.column)))
    )
    for n, ref in references(plan):
        c, new, parked = q(ref.table), sides.child_new(n, ref), sides.child_parked(n, ref)
        run(f"ALTER TABLE {c} RENAME COLUMN {q(ref.column)} TO {q(parked)}")
        run(f"ALTER TABLE {c} RENAME COLUMN {q(new)} TO {q(ref.column)}")
        statements.append(
            _comment(dialect, ref.table, ref.column, catalog.comments.get((ref.table, ref.column)))
        )
        if not ref.nullable:
            run(f"ALTER TABLE {c} ALTER COLUMN {q(ref.column)} SET NOT NULL")
            statements += _not_null_follows(
                dialect, ref.table, parked, ref.column, object_name(plan, "nno", n)
            )
            run(f"ALTER TABLE {c} DROP CONSTRAINT {q(object_name(plan, 'nn', n))}")
    for key in _moved(plan):
        if key.table in catalog.partitioned:
            # Adopts the piece validated on each partition: no row is read.
            run(
                f"ALTER TABLE {q(key.table)} ADD CONSTRAINT {q(key.constraint)} FOREIGN KEY"
                f" ({q(key.ref.column)}) REFERENCES {t} ({q(plan.column)})"
                + catalog.actions[(key.table, key.constraint)]
            )
            for partition, piece, name in catalog.key_pieces.get((key.table, key.constraint), []):
                run(f"ALTER TABLE {partition} RENAME CONSTRAINT {q(piece)} TO {q(name)}")
        else:
            run(
                f"ALTER TABLE {q(key.table)} RENAME CONSTRAINT {q(key.name)} TO {q(key.constraint)}"
            )
    for number, dep in rebuilt(plan):
        run(f"ALTER INDEX {q(object_name(plan, 'ix', number))} RENAME TO {q(dep.name)}")
        for piece, name in catalog.index_pieces.get((dep.table, dep.name), []):
            run(f"ALTER INDEX {q(piece)} RENAME TO {q(name)}")
        owner = catalog.owners.get((dep.table, dep.name))
        if owner:  # it was a constraint (a link table's key, a UNIQUE), not only an index
            # The new column is NOT NULL by now (above): PRIMARY KEY USING INDEX
            # then scans nothing.
            kind = "PRIMARY KEY" if dep.kind == "primary" else "UNIQUE"
            run(
                f"ALTER TABLE {q(dep.table)} ADD CONSTRAINT {q(owner)}"
                f" {kind} USING INDEX {q(dep.name)}"
            )
    return statements


def drop_view_statements(catalog: Catalog) -> list[Statement]:
    """The views over the exchanged columns dropped, those built on others first."""
    return [Statement(view.drop_sql) for view in reversed(catalog.views)]


def create_view_statements(catalog: Catalog) -> list[Statement]:
    """The views created again from their definitions, over the columns that now
    have the names (bases first), with their owner, comment, grants, options,
    a materialized view's indexes and its rows (refreshed if it had any, left
    unpopulated if it was ``WITH NO DATA``)."""
    return [Statement(sql) for view in catalog.views for sql in [view.create_sql, *view.after_sql]]


def swap_statements(dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog) -> list[Statement]:
    """The new columns take the old ones' names and roles; the triggers turn round;
    the views over them are created again over the new columns."""

    def q(name: str) -> str:
        return _q(dialect, name)

    t = q(plan.table)
    statements = drop_view_statements(catalog)
    statements += _exchange(dialect, plan, catalog, Sides(plan, up=True))
    default = plan.new_default_sql
    statements.append(
        Statement(
            f"ALTER TABLE {t} ALTER COLUMN {q(plan.column)} "
            + (f"SET DEFAULT {default}" if default else "DROP DEFAULT")
        )
    )
    statements.append(
        _comment(
            dialect,
            plan.table,
            plan.old_column,
            OLD_COLUMN_COMMENT.format(table=plan.table, column=plan.column),
        )
    )
    if plan.default.kind != "identity":
        # The application stops sending old keys; an identity keeps numbering them.
        statements.append(
            Statement(f"ALTER TABLE {t} ALTER COLUMN {q(plan.old_column)} DROP NOT NULL")
        )
    for n, ref in references(plan):
        statements.append(
            Statement(
                f"ALTER TABLE {q(ref.table)} ALTER COLUMN {q(child_old(plan, n, ref))}"
                " DROP NOT NULL"
            )
        )
    return (
        statements
        + sync_trigger_statements(dialect, plan, catalog, forward=False)
        + create_view_statements(catalog)
        + comment_statements(plan)
    )


def comment_statements(plan: PkMigrationPlan) -> list[Statement]:
    """The comments on the constraints and indexes over the columns, given to
    those that now have their names (:attr:`PkMigrationPlan.comment_sql`): the
    swap's are new, and an undo's old ones are back."""
    return [Statement(sql) for sql in plan.comment_sql]


def contract_statements(
    dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog
) -> list[Statement]:
    """Drop the sync triggers and the children's old columns (unless kept)."""
    statements = drop_trigger_statements(dialect, plan, catalog)
    if not plan.keep_child_old_columns:
        for n, ref in references(plan):
            statements.append(
                Statement(
                    f"ALTER TABLE {_q(dialect, ref.table)} DROP COLUMN IF EXISTS"
                    f" {_q(dialect, child_old(plan, n, ref))}"
                )
            )
    return statements


def _drop_added(dialect: Dialect, plan: PkMigrationPlan, exists: str) -> list[Statement]:
    """Drop the columns the expand added, children (and their FKs) first, then the
    mapping table."""
    statements = [
        Statement(
            f"ALTER TABLE {_q(dialect, table)} DROP COLUMN{exists}"
            f" {_q(dialect, plan.temp_column(table, column))}"
        )
        for table, column in reversed(plan.targets())
    ]
    return [*statements, Statement(f"DROP TABLE IF EXISTS {_q(dialect, plan.mapping_table)}")]


def abort_statements(dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog) -> list[Statement]:
    """Before the swap: drop everything expand and prepare added (dropping a
    column drops its indexes, checks and foreign keys)."""
    return drop_trigger_statements(dialect, plan, catalog) + _drop_added(
        dialect, plan, " IF EXISTS"
    )


def unswap_statements(dialect: Dialect, plan: PkMigrationPlan, catalog: Catalog) -> list[Statement]:
    """The old columns take their names and roles back; the UUID columns, the
    triggers and the mapping table go; the views over the columns are created
    again over the old ones."""
    return (
        drop_view_statements(catalog)
        + _exchange(dialect, plan, catalog, Sides(plan, up=False))
        + drop_trigger_statements(dialect, plan, catalog)
        + _drop_added(dialect, plan, "")
        + create_view_statements(catalog)
        + comment_statements(plan)
    )


def expand_statements(
    connection: Connection, plan: PkMigrationPlan, catalog: Catalog
) -> list[Statement]:
    """The server function, the mapping table, new columns and sync triggers."""
    dialect = connection.dialect
    schema = for_dialect(dialect).uuid7_function_schema(connection)
    statements = [Statement(sql) for sql in uuid7_function_create_sql(dialect, schema=schema)]
    if not inspect(connection).has_table(plan.mapping_table):
        create = sa.schema.CreateTable(mapping.mapping_table(plan))
        statements.append(Statement(ddl_sql(create, dialect)))
    kind = mapping.new_type_sql(connection, plan)
    for table, column in plan.targets():
        tmp = _q(dialect, plan.temp_column(table, column))
        statements.append(
            Statement(f"ALTER TABLE {_q(dialect, table)} ADD COLUMN IF NOT EXISTS {tmp} {kind}")
        )
    key = _q(dialect, plan.temp_column(plan.table, plan.column))
    if not plan.uuid192:
        # New rows get their UUID at insert, from now on (no table rewrite: a
        # default added after the column applies to new rows only). A UUID192
        # key is the row's (its segment): the trigger makes it.
        statements.append(
            Statement(
                f"ALTER TABLE {_q(dialect, plan.table)} ALTER COLUMN {key}"
                " SET DEFAULT sqla_ids_uuid7()"
            )
        )
    return statements + sync_trigger_statements(dialect, plan, catalog, forward=True)


class PostgreSQLOnline(OnlineStrategy):
    """Online key migration on PostgreSQL (see the module docstring)."""

    serves_versions = True
    makes_uuid192 = True

    # --- what it cannot do --------------------------------------------------------

    def attached(
        self, connection: Connection, plan: PkMigrationPlan, columns: dict[str, set[str]]
    ) -> set[str]:
        """What ``pg_depend`` records on those columns, in ``pg_describe_object``'s
        words ("index item_shop", "constraint item_shop_id_fkey on table item",
        "rule _RETURN on view v", "column twice of table item", "trigger t on
        table item"): whatever PostgreSQL would drop with the column, or refuse
        to drop it over."""
        found: set[str] = set()
        for table, names in sorted(columns.items()):
            found.update(
                # A view is its _RETURN rule: named as the view.
                re.sub(r"^rule _RETURN on ((materialized )?view )", r"\1", described)
                for described in connection.execute(
                    text_sql(
                        connection.dialect,
                        # Everything that depends on the columns, but
                        # generated columns in their own words (what records
                        # their reads differs between versions: see
                        # GENERATED_READERS); a column's own default goes
                        # and comes with it.
                        "SELECT pg_describe_object(d.classid, d.objid, d.objsubid)"
                        " FROM pg_depend d JOIN pg_attribute a ON a.attrelid = d.refobjid"
                        " AND a.attnum = d.refobjsubid"
                        " WHERE d.refclassid = 'pg_class'::regclass"
                        " AND d.refobjid = to_regclass(:t) AND a.attname = ANY(:cols)"
                        " AND d.classid <> 'pg_attrdef'::regclass"
                        " AND NOT (d.classid = 'pg_class'::regclass AND d.objid = d.refobjid)"
                        " UNION SELECT 'generated column ' || r.g || ' of table ' || :name"
                        f" FROM ({GENERATED_READERS}) AS r(g, a)",
                    ),
                    {"t": _q(connection, table), "name": table, "cols": sorted(names)},
                ).scalars()
            )
        # The migration's own (sqla_ids_<kind>_<hash>_<n>: its triggers, checks,
        # foreign keys and indexes on the new columns).
        # And the views of the versions it serves (versions=...).
        ours = versions.version_views(connection, plan)
        return {d for d in found if not mentions_object_name(d) and d not in ours}

    def refusals(self, connection: Connection, plan: PkMigrationPlan) -> list[str]:
        """Composite references, expression/partial indexes, partitioned tables and
        partitions (the offline mode handles them), a ``timestamp_column``
        the migration converts. Views over the columns are recreated by the swap
        (with ``recreate_views=True``, which the planner asks for, as offline)."""
        problems = timestamp_refusals(plan)
        q = quoter(connection.dialect)

        def here(table: str) -> str:
            return qualified(connection, table)

        for ref in plan.references:
            if ref.via is not None:
                continue  # a partition's own foreign key: moved with its partitioned table's column
            if len(ref.columns) > 1:
                problems.append(
                    f"foreign key {q(ref.constraint or '')} on {here(ref.table)} has several"
                    " columns; online mode handles single-column references; migrate offline"
                    " (online=False)"
                )
            elif not _pk_columns(connection, ref.table):
                problems.append(
                    f"{here(ref.table)} has no primary key, which the online backfill walks its"
                    " rows by; add one (op.add_uuid7_key), or migrate offline (online=False)"
                )
        for _, dep in rebuilt(plan):
            if dep.kind == "primary":
                # A link table's key is built again over the new column and takes
                # over at the swap: the old one is dropped there, which a foreign
                # key pointing at it would forbid.
                referencing = (
                    connection.execute(
                        sa.text(
                            "SELECT conrelid::regclass::text || '.' || conname FROM pg_constraint"
                            " WHERE contype = 'f' AND conindid = to_regclass(:i) ORDER BY 1"
                        ),
                        {"i": _q(connection, dep.name)},
                    )
                    .scalars()
                    .all()
                )
                if referencing:
                    problems.append(
                        f"the primary key {q(dep.name)} of {here(dep.table)} includes a reference"
                        f" to {here(plan.table)} and foreign keys point at it"
                        f" ({', '.join(referencing)}):"
                        " the online mode builds it again over the new column and cannot move"
                        " them; migrate offline (online=False)"
                    )
            elif dep.definition and (" WHERE " in dep.definition or "(" in "".join(dep.columns)):
                problems.append(
                    f"index {q(dep.name)} on {here(dep.table)} is partial or on an expression,"
                    " which the online mode"
                    " does not rebuild; migrate offline (online=False)"
                )
            elif dep.definition and " USING btree " not in dep.definition:
                problems.append(
                    f"index {q(dep.name)} on {here(dep.table)} is not a btree index, which the"
                    " online mode does not"
                    " rebuild; migrate offline (online=False)"
                )
        kind = connection.execute(
            sa.text("SELECT relkind FROM pg_class WHERE oid = to_regclass(:t)"),
            {"t": _q(connection, plan.table)},
        ).scalar()
        if kind == "p":
            problems.append(
                f"{here(plan.table)} is partitioned, which the online mode does not handle; migrate"
                " offline (online=False)"
            )
        partitioned = sorted(
            t
            for t in {r.table for r in plan.references}
            if partitions.is_partitioned(connection, t)
        )
        if partitioned and (connection.dialect.server_version_info or (0,)) < (13,):
            # The sync triggers are row triggers BEFORE INSERT OR UPDATE, which a
            # partitioned table has from PostgreSQL 13 on.
            problems.append(
                f"{', '.join(map(here, partitioned))}"
                f" {'is' if len(partitioned) == 1 else 'are'} partitioned,"
                " which the online mode handles from PostgreSQL 13 on (row triggers BEFORE"
                " INSERT on a partitioned table); migrate offline (online=False)"
            )
        for _, dep in rebuilt(plan):
            if dep.kind != "index" and partitions.is_partitioned(connection, dep.table):
                kind = "primary key" if dep.kind == "primary" else "unique constraint"
                if _owner(connection, dep):
                    problems.append(
                        f"the {kind} {q(dep.name)} of the partitioned table {here(dep.table)}"
                        f" includes a reference to {here(plan.table)}: the online mode builds it"
                        " again over the"
                        " new column and PostgreSQL cannot make an index a constraint on a"
                        " partitioned table (USING INDEX); migrate offline (online=False)"
                    )
        problems += quiet_trigger_refusals(connection, plan.affected_tables)
        problems += versions.version_refusals(connection, plan)
        return problems

    # --- sessions ------------------------------------------------------------------

    def set_lock_timeout(self, connection: Connection, seconds: float, local: bool) -> None:
        """``lock_timeout`` for this transaction (``local``) or the session.

        Never more than half the server's ``deadlock_timeout``: a step that
        locks several tables may wait for one while holding another that the
        application's transaction waits for; giving up before PostgreSQL looks
        for deadlocks makes the migration (which retries) the one that yields,
        never the application.
        """
        # One statement, run before every short transaction of the backfill:
        # deadlock_timeout is read by the server in the same round trip
        # (current_setting() gives it with its unit; a cast to interval reads
        # "1s" and "1000ms" alike) rather than by a query of its own.
        connection.execute(
            sa.text(
                "SELECT set_config('lock_timeout', CASE WHEN :ms = 0 THEN '0' ELSE"
                " greatest(1, least(:ms, CAST(extract(epoch FROM"
                " CAST(current_setting('deadlock_timeout') AS interval)) * 1000 AS bigint) / 2))"
                " || 'ms' END, :local)"
            ),
            {"ms": max(1, int(seconds * 1000)) if seconds else 0, "local": local},
        )

    def vacuum_holding(self, connection: Connection, tables: Sequence[str]) -> list[str]:
        """The tables of ``tables`` (their partitions and inheriting tables
        included: a ``LOCK TABLE`` takes them too) an autovacuum worker holds a
        lock on now.

        Autovacuum runs on a table soon after the backfill rewrote every row of
        it, and its ``SHARE UPDATE EXCLUSIVE`` lock conflicts with every DDL
        and ``VALIDATE`` of the migration. PostgreSQL cancels it for a session
        that has waited ``deadlock_timeout`` (unless it runs to prevent
        wraparound) -- never for the migration's waits, which give up at half
        that: attempt after attempt failed for as long as the vacuum ran (the
        contract of a 1M-row parent's migration retried 7 times, 13 s; a
        100M-row table's vacuum runs for minutes). ``pg_locks`` and
        ``backend_type`` are readable by every role."""
        if not tables:
            return []
        q = quoter(connection.dialect)
        held = HELD.format(name="to_regclass(n)")
        return [
            str(name)
            for name in connection.execute(
                text_sql(
                    connection.dialect,
                    f"SELECT n FROM unnest(CAST(:names AS text[])) n"
                    f" WHERE EXISTS ({held} AND {AUTOVACUUM}) ORDER BY n",
                ),
                {"names": [q(table) for table in tables]},
            ).scalars()
        ]

    def outlast_vacuum(self, connection: Connection, local: bool) -> None:
        """``lock_timeout`` raised to ``deadlock_timeout`` plus the step's own, for
        this transaction (``local``) or the session: the wait outlasts the
        deadlock check, which cancels the autovacuum holding the table
        (:meth:`vacuum_holding`). For a step of one statement on one table (a
        key addition's): it waits for that table holding nothing, so no
        application transaction can be the one that waits for it; it queues
        behind the step for that one wait, about ``deadlock_timeout`` (1 s by
        default). A transaction of several: :meth:`wait_out_vacuum`."""
        outlast = OUTLAST.format(step="current_setting('lock_timeout')")
        connection.execute(
            text_sql(connection.dialect, f"SELECT set_config('lock_timeout', {outlast}, :local)"),
            {"local": local},
        )

    def wait_out_vacuum(self, connection: Connection, quoted: Sequence[str]) -> None:
        """``SHARE UPDATE EXCLUSIVE`` on the tables ``quoted`` names (as
        :meth:`vacuum_holding` gives them; their partitions too), waited
        for past the deadlock check -- which cancels the autovacuum holding
        them -- at the start of the step's transaction, then the step's own
        ``lock_timeout`` again.

        Why first, and in that mode: a step whose every wait outlasted the
        check waited so while holding what its statements had locked before
        (attaching partitions' indexes: the ones attached before), and an
        application transaction that had written to the vacuumed partition and
        queued for one of those was in a cycle with it -- and, having waited
        longer, PostgreSQL's deadlock victim (CI, PostgreSQL 16). Taken first,
        the long wait holds nothing; ``SHARE UPDATE EXCLUSIVE`` is the weakest
        lock autovacuum conflicts with, which no read or write of the
        application waits for, and keeps autovacuum off the tables until the
        step commits. Its statements then wait as any step's: under half the
        deadlock check, the migration the one that yields."""
        if quoted:
            execute(connection, [wait_out_vacuum(connection.dialect, list(quoted))])

    def is_lock_timeout(self, error: BaseException) -> bool:
        """SQLSTATE 55P03 (lock_not_available) or 40P01 (deadlock: also retried)."""
        original = error.orig if isinstance(error, sa.exc.DBAPIError) else error
        return getattr(original, "sqlstate", None) in ("55P03", "40P01")

    def scope(self, connection: Connection) -> str:
        """The ``search_path`` of the caller's connection."""
        return str(connection.execute(sa.text("SELECT current_setting('search_path')")).scalar())

    def enter_scope(self, connection: Connection, scope: str) -> None:
        """The caller's ``search_path``, for the session (bound, never formatted in);
        the connection's own is kept to be put back (it may come from a connect
        event, which ``RESET`` would not restore)."""
        own = connection.execute(
            sa.text("SELECT current_setting('search_path'), set_config('search_path', :s, false)"),
            {"s": scope},
        ).scalar()
        connection.info[_SEARCH_PATH] = own

    def leave_scope(self, connection: Connection) -> None:
        """The connection's own ``search_path`` back."""
        own = connection.info.pop(_SEARCH_PATH, None)
        if own is not None:
            connection.execute(sa.text("SELECT set_config('search_path', :s, false)"), {"s": own})

    def try_lock(self, connection: Connection, name: str) -> bool:
        """A session-level advisory lock (two 32-bit keys: ours, and the name's hash)."""
        return bool(
            connection.execute(
                sa.text("SELECT pg_try_advisory_lock(hashtext('sqla_ids'), hashtext(:n))"),
                {"n": name},
            ).scalar()
        )

    def unlock_name(self, connection: Connection, name: str) -> None:
        """Release the advisory lock."""
        connection.execute(
            sa.text("SELECT pg_advisory_unlock(hashtext('sqla_ids'), hashtext(:n))"), {"n": name}
        )

    def lock(self, connection: Connection, plan: PkMigrationPlan) -> list[Statement]:
        """``LOCK TABLE … IN ACCESS EXCLUSIVE MODE``: held to the transaction's end.
        Views first -- the versions' (see ``versions.lock_views``), then those the swap
        drops (see :func:`lock_statement`) -- then the tables."""
        first = versions.lock_views(connection, plan)
        return [lock_statement(connection.dialect, plan, read_views(connection, plan), first)]

    # --- phases ----------------------------------------------------------------------

    def expand(self, plan: PkMigrationPlan) -> list[Task]:
        """Mapping table, new columns and sync triggers, in one transaction."""
        return [
            Ddl(
                "expand",
                lambda c: (
                    table_locks(c, plan, catalog := read_catalog(c, plan))
                    + expand_statements(c, plan, catalog)
                    + versions.expand_views(c, plan)
                ),
            )
        ]

    def backfill(self, plan: PkMigrationPlan) -> list[Task]:
        """Parent keys in old-key order (computed in SQL), then the children."""
        tasks: list[Task] = [Backfill(ParentKeys(plan))]
        tasks += [Backfill(ChildReferences(plan, n, ref)) for n, ref in references(plan)]
        return tasks

    def prepare(self, plan: PkMigrationPlan) -> list[Task]:
        """Indexes, NOT NULL proofs and foreign keys on the new columns, without
        blocking writes (and, serving versions, indexes on the old columns that
        stay theirs after the swap: see versions.old_indexes)."""
        tasks = self._prepare(plan, Sides(plan, up=True))
        for table, column, name, unique in versions.old_indexes(plan):
            tasks += self._index(table, [column], name, unique)
        return tasks

    def _prepare(
        self, plan: PkMigrationPlan, sides: Sides, before_foreign_keys: Sequence[Task] = ()
    ) -> list[Task]:
        tasks = self._index(plan.table, [sides.key_new], object_name(plan, "key", 0), unique=True)
        tasks += self._not_null(plan.table, sides.key_new, object_name(plan, "nn", 0))
        for number, dep in rebuilt(plan):
            cols = [sides.new_column(dep.via or dep.table, c) for c in dep.columns]
            tasks += self._index(
                dep.table, cols, object_name(plan, "ix", number), dep.kind != "index"
            )
        for n, ref in references(plan):
            if not ref.nullable:
                tasks += self._not_null(
                    ref.table, sides.child_new(n, ref), object_name(plan, "nn", n)
                )
        tasks += before_foreign_keys
        for key in _moved(plan):
            tasks += self._foreign_key(plan, key, sides)
        return tasks

    def _index(self, table: str, columns: list[str], name: str, unique: bool) -> list[Task]:
        """A unique index over the new key, or an index rebuilt over a child's
        new column: built ``CONCURRENTLY`` -- on a partitioned child, on each
        partition, then attached (:mod:`.partitions`)."""

        # The shells and the attaching: several statements, each locking
        # another table (or its index), in one transaction -- a wait for each,
        # holding the ones before, would add up past the deadlock check (an
        # application transaction queued for one of those, and holding what
        # the step waits for, its victim). The tree is locked first (see
        # lock_all): its statements then wait for nothing.

        def shells(connection: Connection) -> list[Statement]:
            if not partitions.is_partitioned(connection, table):
                return []
            statements = partitions.index_shells(connection, table, columns, name, unique)
            # CREATE INDEX ... ON ONLY takes SHARE on each partitioned table.
            return [*lock_tree(connection, table, "SHARE"), *statements]

        def attach(connection: Connection) -> list[Statement]:
            if not partitions.is_partitioned(connection, table):
                return []
            statements = partitions.index_attach(connection, table, name)
            if not statements:
                return []
            # ATTACH PARTITION takes ACCESS EXCLUSIVE on each piece (an index,
            # which LOCK TABLE cannot name): its table's, which every session
            # takes before its indexes', leaves it nobody to wait for.
            return [*lock_tree(connection, table, "ACCESS EXCLUSIVE"), *statements]

        def build(connection: Connection) -> list[Statement]:
            if partitions.is_partitioned(connection, table):
                return partitions.index_leaves(connection, table, columns, name, unique)
            valid = index_valid(connection, _q(connection, name))
            if valid:
                return []
            cols = ", ".join(_q(connection, c) for c in columns)
            create = Statement(
                f"CREATE {'UNIQUE ' if unique else ''}INDEX CONCURRENTLY {_q(connection, name)}"
                f" ON {_q(connection, table)} ({cols})"
            )
            if valid is False:  # a CONCURRENTLY build interrupted earlier leaves it invalid
                return [
                    Statement(f"DROP INDEX CONCURRENTLY IF EXISTS {_q(connection, name)}"),
                    create,
                ]
            return [create]

        # Outside any transaction, with no lock timeout: CREATE INDEX
        # CONCURRENTLY only takes locks that the application's reads and
        # writes do not conflict with, and waits for the transactions already
        # running to end -- a wait that blocks nobody. (The shells and the
        # attaching take brief locks that do conflict: under the lock timeout.)
        return [
            Ddl(f"index {name} (partitioned)", shells),
            Ddl(f"index {name}", build, Mode.AUTOCOMMIT),
            Ddl(f"index {name} attached", attach),
        ]

    def _not_null(self, table: str, column: str, name: str) -> list[Task]:
        def add(connection: Connection) -> list[Statement]:
            if _constraint_exists(connection, table, name):
                return []
            # It recurses to the partitions (inheriting tables), locking each
            # in turn: the tree first (see lock_tree).
            return [
                *lock_tree(connection, table, "ACCESS EXCLUSIVE"),
                Statement(
                    f"ALTER TABLE {_q(connection, table)} ADD CONSTRAINT {_q(connection, name)}"
                    f" CHECK ({_q(connection, column)} IS NOT NULL) NOT VALID"
                ),
            ]

        return [Ddl(f"check {name}", add), self._validate(table, name)]

    def _validate(self, table: str, name: str) -> Task:
        return Ddl(
            f"validate {name}",
            lambda c: [Statement(f"ALTER TABLE {_q(c, table)} VALIDATE CONSTRAINT {_q(c, name)}")],
        )

    def _foreign_key(self, plan: PkMigrationPlan, key: _Moved, sides: Sides) -> list[Task]:
        """``NOT VALID``, then ``VALIDATE``: on a partitioned table, on each of
        its partitions (the swap adds it to the partitioned table itself)."""

        def add(connection: Connection) -> list[Statement]:
            q = quoter(connection.dialect)
            definition = (
                f"FOREIGN KEY ({q(sides.child_new(key.n, key.ref))})"
                f" REFERENCES {q(plan.table)} ({q(sides.key_new)})"
                + _fk_actions(connection, key.table, key.constraint)
            )
            # The child and the parent, both in the mode ADD FOREIGN KEY takes,
            # neither waited for while holding the other (see lock_all).
            if partitions.is_partitioned(connection, key.table):
                leaves = partitions.foreign_key_leaves(connection, key.table, key.name, definition)
                tables = [partition for partition, _ in leaves]
                statements = [statement for _, statement in leaves]
            elif _constraint_exists(connection, key.table, key.name):
                return []
            else:
                tables = [q(key.table)]
                statements = [
                    Statement(
                        f"ALTER TABLE {q(key.table)} ADD CONSTRAINT {q(key.name)} {definition}"
                        " NOT VALID"
                    )
                ]
            if not statements:
                return []
            locked = list(dict.fromkeys([*tables, q(plan.table)]))
            return [lock_all(connection.dialect, locked, "SHARE ROW EXCLUSIVE"), *statements]

        def validate(connection: Connection) -> list[Statement]:
            if partitions.is_partitioned(connection, key.table):
                return partitions.foreign_key_validations(connection, key.table, key.name)
            q = quoter(connection.dialect)
            return [Statement(f"ALTER TABLE {q(key.table)} VALIDATE CONSTRAINT {q(key.name)}")]

        return [Ddl(f"foreign key {key.name}", add), Ddl(f"validate {key.name}", validate)]

    def swap(self, plan: PkMigrationPlan) -> list[Task]:
        """The new columns take the old ones' names and roles (tables locked)."""
        return [
            Ddl(
                "swap",
                lambda c: (
                    versions.swap_views_first(c, plan)
                    + swap_statements(c.dialect, plan, read_catalog(c, plan, views=True))
                    + versions.swap_views_last(c, plan)
                ),
                Mode.LOCKED,
            )
        ]

    def contract(self, plan: PkMigrationPlan) -> list[Task]:
        """Drop the sync triggers and the children's old columns (unless kept)."""
        return [
            Ddl(
                "contract",
                lambda c: (
                    table_locks(c, plan, catalog := read_catalog(c, plan))
                    + versions.drop_all_views(c.dialect, plan)
                    + contract_statements(c.dialect, plan, catalog)
                ),
            )
        ]

    def abort(self, plan: PkMigrationPlan) -> list[Task]:
        """Before the swap: drop everything expand and prepare added."""
        return [
            Ddl(
                "undo",
                lambda c: (
                    table_locks(c, plan, catalog := read_catalog(c, plan))
                    + versions.drop_all_views(c.dialect, plan)
                    + abort_statements(c.dialect, plan, catalog)
                ),
            )
        ]

    def unprepare(self, plan: PkMigrationPlan) -> list[Task]:
        """After the swap, before the contract: the old columns (kept in step by the
        triggers) get their unique index, NOT NULL proofs, indexes and foreign keys
        back, without blocking writes."""

        def unnumbered(connection: Connection) -> None:
            missing = int(
                query_sql(
                    connection,
                    f"SELECT count(*) FROM {_q(connection, plan.table)}"
                    f" WHERE {_q(connection, plan.old_column)} IS NULL",
                ).scalar_one()
            )
            if missing:
                raise MigrationRefusedError(
                    f"cannot undo the swap of {plan.table} online: {missing} rows inserted"
                    f" since have no old key in {plan.old_column} (the old key had no default"
                    " to number them); contract, then restore offline; nothing was changed"
                )

        # Children written before their parent since the swap (a deferred
        # foreign key) got no old value then: their parent is there now.
        walks = [Backfill(ChildReferences(plan, n, ref, up=False)) for n, ref in references(plan)]
        # With versions, the old code (*before*) keeps looking rows up by the
        # old key and children by their old values meanwhile: the versions'
        # indexes on those go only once the undo's own are built, just before
        # its foreign keys (see versions.unprepare_indexes). Dropped first, the
        # old code's lookups scanned whole tables for the undo's duration (the
        # full-size benchmark's rollback: p99 274 ms instead of 6 ms).
        return [
            Probe("downgrade check", unnumbered),
            *walks,
            *self._prepare(plan, Sides(plan, up=False), versions.unprepare_indexes(plan)),
        ]

    def unswap(self, plan: PkMigrationPlan) -> list[Task]:
        """The old columns take their names and roles back (tables locked)."""
        return [
            Ddl(
                "undo swap",
                lambda c: (
                    versions.drop_all_views(c.dialect, plan)
                    + unswap_statements(c.dialect, plan, read_catalog(c, plan, views=True))
                ),
                Mode.LOCKED,
            )
        ]


# Application triggers firing on UPDATE of a table (not ours, not PostgreSQL's
# own): the backfill's UPDATEs must not fire them -- a trigger stamping
# updated_at would restamp every row, an audit trigger log one row per row.
# And of the tables below it (partitions, tables that inherit from it): the
# backfill's UPDATE of a table updates their rows, and fires their triggers --
# an audit trigger of Sakila's payment_p2031_01, not of payment. (A partition's
# clone of its partitioned table's trigger is that trigger.)
_UPDATE_TRIGGERS = (
    "WITH RECURSIVE tree(oid) AS (SELECT to_regclass(:t)::oid"
    " UNION SELECT i.inhrelid FROM pg_inherits i JOIN tree ON i.inhparent = tree.oid)"
    " SELECT DISTINCT g.tgname, g.tgenabled, c.relname FROM pg_trigger g"
    " JOIN tree ON g.tgrelid = tree.oid JOIN pg_class c ON c.oid = g.tgrelid"
    " WHERE NOT g.tgisinternal AND g.tgenabled <> 'D' AND (g.tgtype & 16) <> 0"
)
_NOT_A_CLONE = " AND g.tgparentid = 0"  # (PostgreSQL 13+; before, a clone is internal)


def quiet_trigger_refusals(connection: Connection, tables: list[str]) -> list[str]:
    """A backfill of ``tables`` keeps the application's UPDATE triggers quiet as a
    replica session: this role must be allowed that, and no such trigger may
    fire in replica sessions (it would then fire on the backfill)."""
    problems = []
    quiet_needed = []
    q = quoter(connection.dialect)
    for table in tables:
        for name, enabled, on in application_update_triggers(connection, table):
            here = qualified(connection, on)
            if enabled in ("A", "R"):
                how = "ALWAYS" if enabled == "A" else "REPLICA"
                problems.append(
                    f"trigger {q(name)} on {here} is ENABLE {how} and would fire on every"
                    " row the backfill writes; enable it for origin sessions only for the"
                    f" migration (ALTER TABLE {here} ENABLE TRIGGER {q(name)}), or migrate"
                    " offline (online=False)"
                )
            else:
                quiet_needed.append(f"{q(name)} on {here}")
    if quiet_needed:
        allowed = connection.execute(
            text_sql(
                connection.dialect,
                "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
                + (
                    " UNION ALL SELECT has_parameter_privilege('session_replication_role', 'SET')"
                    if (connection.dialect.server_version_info or (0,)) >= (15,)
                    else ""
                ),
            )
        ).scalars()
        if not any(allowed):
            role = connection.execute(sa.text("SELECT current_user")).scalar_one()
            problems.append(
                f"the triggers {', '.join(quiet_needed)} fire on UPDATE, and the backfill"
                " writes every row: it keeps them quiet as a replica session"
                " (session_replication_role = replica), which this role may not set;"
                f" run it as a superuser, or GRANT SET ON PARAMETER session_replication_role"
                f" TO {_q(connection, str(role))} (PostgreSQL 15+)"
            )
    return problems


def application_update_triggers(connection: Connection, table: str) -> list[tuple[str, str, str]]:
    """``(name, tgenabled, table)`` of the application's triggers firing on UPDATE of
    ``table`` or of a table below it."""
    sql = _UPDATE_TRIGGERS
    if (connection.dialect.server_version_info or (0,)) >= (13,):
        sql += _NOT_A_CLONE
    # (Bound as the name reads: the preparer's quoting doubles a % for the driver.)
    bound = {"t": quote_name(connection.dialect, table)}
    rows = connection.execute(text_sql(connection.dialect, sql + " ORDER BY 3, 1"), bound).all()
    return [(str(n), str(e), str(on)) for n, e, on in rows if not is_object_name(n)]


def _quietly(connection: Connection, table: str) -> bool:
    """Whether the backfill's UPDATEs of ``table`` run as a replica session: its
    application triggers (enabled the default way) then do not fire, and the
    migration's own (``ENABLE ALWAYS``) do. Checked once per sweep."""
    return bool(application_update_triggers(connection, table))


def _segment_as_s(segment: str | None) -> str:
    """The batch's UUID192 segment column ``s`` (SQL of the select list), if any."""
    return "" if segment is None else f", {segment} AS s"


def _backfill_session(connection: Connection, quiet: bool) -> None:
    """This batch transaction's settings, in one round trip: the sync triggers
    skip its rows (:data:`BACKFILL_SETTING`), the application's UPDATE triggers
    too when ``quiet`` (a replica session), and the join to the mapping probes
    its index row by row -- misled by a range's estimate, the planner would
    rather hash the batch and scan the whole mapping, once per batch (160 ms per
    10,000 children with a 1M-row mapping, the backfill growing with rows x
    parents)."""
    query_sql(
        connection,
        f"SELECT set_config('{BACKFILL_SETTING}', 'on', true),"
        " set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)"
        + (", set_config('session_replication_role', 'replica', true)" if quiet else ""),
    )


class ParentKeys(ParentKeysWalk):
    """The parent's new keys, in old-key order, computed in SQL from the ordinal
    (:mod:`sqla_ids.migration.core.backfill`)."""

    def __init__(self, plan: PkMigrationPlan) -> None:
        self.plan = plan
        self.label = f"{plan.table}.{plan.column} new keys"
        self.ordinal: int | None = None
        """Rows given a key so far: read back from the keys when (re)starting."""
        self.quiet = False

    def start(self, connection: Connection) -> int:
        """The ordinal a (killed) earlier run reached, read back from its keys:
        backfilled keys are the ones below the plan's time."""
        self.quiet = _quietly(connection, self.plan.table)
        if self.plan.timestamp_column is not None:
            self.resume(connection)
        elif self.ordinal is None:
            plan = self.plan
            tmp = _q(connection, plan.temp_column(plan.table, plan.column))
            hex_ = f"replace(CAST({keys.key_uuid_sql(plan, 'k')} AS text), '-', '')"
            below = keys.stored_key_sql(plan, "CAST(:below AS uuid)", None)
            value = connection.execute(
                text_sql(
                    connection.dialect,
                    f"SELECT (('x' || substr({hex_}, 1, 12))::bit(48)::bigint - :start) * 4096"
                    f" + ('x' || substr({hex_}, 14, 3))::bit(12)::int"
                    f" FROM (SELECT {tmp} AS k FROM {_q(connection, plan.table)}"
                    f" WHERE {tmp} < {below} ORDER BY {tmp} DESC LIMIT 1) last",
                ),
                {"start": first_ms(self.plan), "below": backfilled_below(self.plan)},
            ).scalar()
            self.ordinal = int(value or 0)
        return self.plan.row_count

    def batch(self, connection: Connection, after: Any, size: int) -> tuple[Any, int] | None:
        """Keys for the next ``size`` rows without one, locked first (``FOR NO KEY
        UPDATE``: the application's inserts of children are not blocked).

        Two statements, set-wise, with the sync triggers quiet
        (:data:`BACKFILL_SETTING`): the batch's mapping rows, then the rows'
        keys taken from the mapping. A mapping row already there was written
        first by the application -- a child inserted before its parent had a
        key (the triggers' "mapping-first" rule) -- and children may point at
        its key already: it is kept (``DO NOTHING``) and the parent takes it.
        The second statement sees what the first wrote, and also a mapping row
        another transaction committed meanwhile (``ON CONFLICT`` waited for it);
        in one statement its snapshot would not.
        """
        plan = self.plan
        _backfill_session(connection, self.quiet)
        t, k = _q(connection, plan.table), _q(connection, plan.column)
        tmp = _q(connection, plan.temp_column(plan.table, plan.column))
        m = _q(connection, plan.mapping_table)
        where = f"{k} > :after AND " if after is not None else ""
        if plan.timestamp_column is not None:
            covered, upto = self._timed(connection, where, after, size)
        else:
            covered, upto = self._ordered(connection, where, after, size)
        if not covered:
            return None
        low = f"{t}.{k} > :after AND " if after is not None else ""
        # Rows of the range still without a key are the batch's: locked, and
        # their mapping rows written just now (one index probe each).
        connection.execute(
            text_sql(
                connection.dialect,
                f"UPDATE {t} SET {tmp} = m.new_key FROM {m} m"
                f" WHERE {low}{t}.{k} <= :upto AND {t}.{tmp} IS NULL AND m.old_key = {t}.{k}",
            ),
            {"after": after, "upto": upto},
        )
        if plan.timestamp_column is None:
            self.ordinal = (self.ordinal or 0) + int(covered)
        return upto, int(covered)

    def _timed(self, connection: Connection, where: str, after: Any, size: int) -> tuple[int, Any]:
        """The batch's mapping rows with a timestamp column: the offline rule's key
        numbers (``KEY_NUMBER_SQL``: each row's time, kept from going back, after
        :attr:`prev`) and the old key's mark (:mod:`sqla_ids.migration.core.backfill`)."""
        plan = self.plan
        t, k = _q(connection, plan.table), _q(connection, plan.column)
        tmp = _q(connection, plan.temp_column(plan.table, plan.column))
        key = keys.key_sql(*keys.NUMBER_PARTS, "CAST(k AS text)")
        segment = mapping.segment_sql(connection, plan.options) if plan.uuid192 else None
        key = keys.stored_key_sql(plan, key, None if segment is None else "s")
        covered, upto, last = connection.execute(
            text_sql(
                connection.dialect,
                f"WITH b AS (SELECT {k} AS k, {keys.time_number_sql(connection, plan)} AS t"
                f"{_segment_as_s(segment)}"
                f" FROM {t} WHERE {where}{tmp} IS NULL ORDER BY {k} LIMIT :n FOR NO KEY UPDATE),"
                f" o AS (SELECT k, {keys.KEY_NUMBER_SQL} AS v{', s' if segment else ''}"
                " FROM (SELECT b.*, row_number() OVER (ORDER BY k) AS r FROM b) x),"
                f" i AS (INSERT INTO {_q(connection, plan.mapping_table)} (old_key, new_key)"
                f" SELECT k, {key} FROM o ON CONFLICT (old_key) DO NOTHING)"
                " SELECT (SELECT count(*) FROM b), (SELECT k FROM b ORDER BY k DESC LIMIT 1),"
                " (SELECT max(v) FROM o)",
            ),
            {"after": after, "n": size, "prev": self.prev, "seed": plan.seed},
        ).one()
        if covered:
            self.prev = int(last)
        return int(covered), upto

    def _ordered(
        self, connection: Connection, where: str, after: Any, size: int
    ) -> tuple[int, Any]:
        """The batch's mapping rows without a timestamp column: from the ordinal."""
        plan = self.plan
        t, k = _q(connection, plan.table), _q(connection, plan.column)
        tmp = _q(connection, plan.temp_column(plan.table, plan.column))
        m = _q(connection, plan.mapping_table)
        segment = mapping.segment_sql(connection, plan.options) if plan.uuid192 else None
        key = keys.stored_key_sql(
            plan,
            "CAST(lpad(to_hex(:start + (o.ord >> 12)), 12, '0')"
            " || '7' || lpad(to_hex(o.ord & 4095), 3, '0')"
            " || substr(CAST(gen_random_uuid() AS text), 20) AS uuid)",
            None if segment is None else "o.s",
        )
        covered, upto = connection.execute(
            text_sql(
                connection.dialect,
                f"WITH b AS (SELECT {k} AS k{_segment_as_s(segment)} FROM {t}"
                f" WHERE {where}{tmp} IS NULL ORDER BY {k} LIMIT :n FOR NO KEY UPDATE),"
                " o AS (SELECT b.*, :done + row_number() OVER (ORDER BY k) AS ord FROM b),"
                f" i AS (INSERT INTO {m} (old_key, new_key) SELECT k, {key} FROM o"
                " ON CONFLICT (old_key) DO NOTHING)"
                # ORDER BY ... LIMIT 1, not max(): uuid has no max() before 18.
                " SELECT (SELECT count(*) FROM b), (SELECT k FROM b ORDER BY k DESC LIMIT 1)",
            ),
            {"after": after, "n": size, "done": self.ordinal, "start": first_ms(plan)},
        ).one()
        return int(covered), upto

    def last_made(self, connection: Connection) -> UUID | None:
        """The largest mapping key carrying its old key's mark, read downward from
        the top through the mapping's unique index (the application's keys above
        it are passed over, one hash each)."""
        uuid = keys.key_uuid_sql(self.plan, "new_key")
        hex_ = f"right(replace(CAST({uuid} AS text), '-', ''), 14)"
        value = connection.execute(
            text_sql(
                connection.dialect,
                f"SELECT {uuid} FROM {_q(connection, self.plan.mapping_table)}"
                f" WHERE {hex_} = {keys.hash_hex_sql('CAST(old_key AS text)')}"
                " ORDER BY new_key DESC LIMIT 1",
            ),
            {"seed": self.plan.seed},
        ).scalar()
        return None if value is None else UUID(str(value))


class ChildReferences(Walk):
    """A child's column following its parent through the mapping -- the new one
    going up, the old one (``up=False``) before the swap is undone -- in keyset
    batches of the child's primary key (a row value: a link table's key has
    several columns)."""

    def __init__(self, plan: PkMigrationPlan, n: int, ref: Reference, up: bool = True) -> None:
        self.plan, self.ref = plan, ref
        self.label = f"{ref.table}.{ref.column} {'new' if up else 'old'} references"
        self.target = plan.temp_column(ref.table, ref.column) if up else child_old(plan, n, ref)
        self.look, self.give = ("old_key", "new_key") if up else ("new_key", "old_key")
        self.pk: list[str] = []
        self.high: tuple[Any, ...] | None = None
        self.quiet = False

    def _key(self, connection: Connection, alias: str = "") -> str:
        """The primary key as a row value (``ROW(a, b)``: compared column by
        column, in the order of the key's index)."""
        prefix = f"{alias}." if alias else ""
        return "ROW(" + ", ".join(prefix + _q(connection, c) for c in self.pk) + ")"

    @staticmethod
    def _bound(name: str, key: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
        """A key as a row of bound values (``ROW(:after_0, :after_1)``)."""
        names = [f"{name}_{i}" for i in range(len(key))]
        return "ROW(" + ", ".join(f":{n}" for n in names) + ")", dict(zip(names, key, strict=True))

    def start(self, connection: Connection) -> int:
        """The walk ends at the rows there are now: rows inserted from here on
        take their new reference from the trigger (every parent is mapped by
        now). Walking on to the end would chase the application's inserts for
        as long as they arrive faster than a batch takes -- for ever, at 1M
        parents and 100 inserts/s."""
        self.pk = _pk_columns(connection, self.ref.table)
        self.quiet = _quietly(connection, self.ref.table)
        c = _q(connection, self.ref.table)
        cols = ", ".join(_q(connection, k) for k in self.pk)
        desc = ", ".join(f"{_q(connection, k)} DESC" for k in self.pk)
        # ORDER BY ... DESC LIMIT 1 rather than max(): a child's own key may be a
        # UUID already (migrated before), and uuid has no max() before PostgreSQL 18.
        total = query_sql(connection, f"SELECT count(*) FROM {c}").scalar_one()
        last = query_sql(connection, f"SELECT {cols} FROM {c} ORDER BY {desc} LIMIT 1").first()
        self.high = None if last is None else tuple(last)
        return int(total)

    def _update(
        self, connection: Connection, after: tuple[Any, ...] | None, upto: tuple[Any, ...] | None
    ) -> None:
        c = _q(connection, self.ref.table)
        key, params = self._key(connection, c), dict[str, Any]()
        low = "true"
        if after is not None:
            row, bound = self._bound("after", after)
            low, params = f"{key} > {row}", {**params, **bound}
        high = ""
        if upto is not None:
            row, bound = self._bound("upto", upto)
            high, params = f" AND {key} <= {row}", {**params, **bound}
        # One index probe of the mapping per child row (see _backfill_session).
        _backfill_session(connection, self.quiet)
        t, m = _q(connection, self.target), _q(connection, self.plan.mapping_table)
        connection.execute(
            text_sql(
                connection.dialect,
                f"UPDATE {c} SET {t} = m.{self.give} FROM {m} m"
                f" WHERE {low}{high} AND m.{self.look} = {c}.{_q(connection, self.ref.column)}"
                f" AND {c}.{t} IS DISTINCT FROM m.{self.give}",
            ),
            params,
        )

    def batch(self, connection: Connection, after: Any, size: int) -> tuple[Any, int] | None:
        """The next ``size`` children up to the walk's end."""
        if self.high is None:
            return None
        c, key = _q(connection, self.ref.table), self._key(connection)
        cols = ", ".join(_q(connection, k) for k in self.pk)
        last = ", ".join(f"k.{_q(connection, k)} DESC" for k in self.pk)
        high, params = self._bound("high", self.high)
        where = ""
        if after is not None:
            row, bound = self._bound("after", after)
            where, params = f"{key} > {row} AND ", {**params, **bound}
        upto = connection.execute(
            text_sql(
                connection.dialect,
                f"SELECT {', '.join(f'k.{_q(connection, k)}' for k in self.pk)} FROM"
                f" (SELECT {cols} FROM {c} WHERE {where}{key} <= {high}"
                f" ORDER BY {cols} LIMIT :n) k ORDER BY {last} LIMIT 1",
            ),
            {**params, "n": size},
        ).first()
        if upto is None:
            return None
        self._update(connection, after, tuple(upto))
        return tuple(upto), size

    def finish(self, connection: Connection) -> None:
        """The rows past the end, once: only a transaction that inserted a child
        before its parent was mapped and committed after the walk began has one
        to fix there."""
        if self.high is not None:
            self._update(connection, self.high, None)

    def left(self, connection: Connection) -> int:
        """References with no value on the following side yet."""
        s = _q(connection, self.ref.column)
        t = _q(connection, self.target)
        return int(
            query_sql(
                connection,
                f"SELECT count(*) FROM {_q(connection, self.ref.table)}"
                f" WHERE {s} IS NOT NULL AND {t} IS NULL",
            ).scalar_one()
        )

    def stuck(self) -> str:
        """References kept pointing at parents the mapping does not know."""
        return (
            f"{self.ref.table}.{self.ref.column}: references keep moving faster than the"
            " backfill; stopped before the swap (run the migration again to continue)"
        )
