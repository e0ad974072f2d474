"""PostgreSQL: the key migration while the application keeps writing.

Expand -> backfill -> prepare -> swap -> contract, each step a short
transaction under ``lock_timeout`` (retried with backoff by the runner), or a
statement that takes no blocking lock at all:

* **expand**: the mapping table, one ``uuid`` column per affected column
  (``ADD COLUMN`` without a default is instant), a ``DEFAULT
  sqla_ids_uuid7()`` on the new key so that every row inserted from now on
  has its UUID, and triggers keeping the new columns and the mapping in step
  with every ``INSERT``, ``UPDATE`` (of the key itself, or a child moved to
  another parent) and ``DELETE``.
* **backfill**: existing rows in keyset batches. The parent's new keys are
  computed in SQL, ordered like the old keys: ``row_number()`` over the old
  key gives a 12-bit sub-millisecond counter after a timestamp that lies
  before the migration started, so the backfilled keys sort below every key
  made since. Children are then set through the mapping.
* **prepare**: ``CREATE UNIQUE INDEX CONCURRENTLY`` on the new key, the
  children's indexes rebuilt ``CONCURRENTLY`` on the new columns, ``NOT
  NULL`` proven by ``CHECK … NOT VALID`` + ``VALIDATE`` (which only takes a
  ``SHARE UPDATE EXCLUSIVE`` lock), foreign keys added ``NOT VALID`` and
  ``VALIDATE``d.
* **swap**: one transaction: drop the old key and its foreign keys, rename,
  ``PRIMARY KEY USING INDEX``, ``SET NOT NULL`` (no scan: the validated
  CHECK proves it), and triggers that now keep the *old* columns in step, so
  the migration can still be undone online until the contract.
* **contract**: drop those triggers and the children's old columns. The
  parent keeps ``<key>_old`` and the mapping table, as the offline migration
  does.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import mapping
from sqla_ids.migration.model import OLD_COLUMN_COMMENT, PkMigrationPlan, Reference
from sqla_ids.migration.online_names import Sides as _Sides
from sqla_ids.migration.online_names import child_old as _child_old
from sqla_ids.migration.online_names import object_name as _name
from sqla_ids.migration.online_names import rebuilt as _rebuilt
from sqla_ids.migration.online_names import references as _refs
from sqla_ids.migration.strategies import OnlineContext, OnlineStrategy

# The trigger functions' bodies are dollar-quoted with this tag; names inside
# are quoted identifiers, so a name containing "$" cannot end the body early
# unless it contains the whole tag, which _tag() avoids.
_TAG = "sqla_ids_fn"

# pg_constraint's action codes -> SQL.
_ACTIONS = {"a": "NO ACTION", "r": "RESTRICT", "c": "CASCADE", "n": "SET NULL", "d": "SET DEFAULT"}


def _q(connection: Connection, name: str) -> str:
    return str(connection.dialect.identifier_preparer.quote(name))


def _tag(*names: str) -> str:
    tag = _TAG
    while any(tag in name for name in names):
        tag += "_"
    return f"${tag}$"


def _pk_columns(connection: Connection, table: str) -> list[str]:
    pk = sa.inspect(connection).get_pk_constraint(table)
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


def _column_comment(connection: Connection, table: str, column: str) -> str | None:
    comment = connection.execute(
        sa.text(
            "SELECT col_description(to_regclass(:t), attnum) FROM pg_attribute"
            " WHERE attrelid = to_regclass(:t) AND attname = :c"
        ),
        {"t": _q(connection, table), "c": column},
    ).scalar()
    return None if comment is None else str(comment)


def _not_null_follows(
    connection: Connection, table: str, leaving: str, taking: str, between: str
) -> None:
    """The ``NOT NULL`` constraint's name goes with the role, as the column's name does.

    PostgreSQL 18 names ``NOT NULL`` constraints (``<table>_<column>_not_null``)
    and a renamed column keeps its constraint's name: the column taking the
    role would get ``..._not_null1`` (the name still being the leaving
    column's), and keep it through a later restore. The taking column's
    constraint gets the name; the leaving column's gets the one PostgreSQL
    would give it under its new name (through ``between``: undoing the swap,
    that is the name the taking column's constraint has).
    """
    if (connection.dialect.server_version_info or (0,)) < (18,):
        return
    names: dict[str, str] = dict(
        connection.execute(
            sa.text(
                "SELECT a.attname, c.conname FROM pg_constraint c JOIN pg_attribute a"
                " ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]"
                " WHERE c.conrelid = to_regclass(:t) AND c.contype = 'n'"
                " AND a.attname IN (:leaving, :taking)"
            ),
            {"t": _q(connection, table), "leaving": leaving, "taking": taking},
        ).all()
    )
    name, given = names.get(leaving), names.get(taking)
    if name is None or given is None:
        return
    # PostgreSQL's own choice, cut at 63 bytes as it cuts identifiers.
    spare = f"{table}_{leaving}_not_null".encode()[:63].decode(errors="ignore")
    t = _q(connection, table)
    for old, new in ((name, between), (given, name), (between, spare)):
        connection.exec_driver_sql(
            f"ALTER TABLE {t} RENAME CONSTRAINT {_q(connection, old)} TO {_q(connection, new)}"
        )


def _comment(connection: Connection, table: str, column: str, comment: str | None) -> None:
    value = "NULL" if comment is None else "'" + comment.replace("'", "''") + "'"
    connection.exec_driver_sql(
        f"COMMENT ON COLUMN {_q(connection, table)}.{_q(connection, column)} IS {value}"
    )


def _copy_column_grants(connection: Connection, table: str, source: str, target: str) -> None:
    """Column-level privileges of ``source`` granted on ``target`` too (a new column
    has none, and ``GRANT … (column)`` is how applications restrict key access)."""
    rows = connection.execute(
        sa.text(
            "SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END,"
            " a.privilege_type, a.is_grantable FROM pg_attribute att,"
            " aclexplode(att.attacl) a WHERE att.attrelid = to_regclass(:t) AND att.attname = :c"
        ),
        {"t": _q(connection, table), "c": source},
    ).all()
    for grantee, privilege, grantable in rows:
        role = "PUBLIC" if grantee == "PUBLIC" else _q(connection, str(grantee))
        connection.exec_driver_sql(
            f"GRANT {privilege} ({_q(connection, target)}) ON {_q(connection, table)} TO {role}"
            + (" WITH GRANT OPTION" if grantable else "")
        )


class PostgreSQLOnline(OnlineStrategy):
    """Online key migration on PostgreSQL (see the module docstring)."""

    # --- what it cannot do --------------------------------------------------------

    def refusals(self, connection: Connection, plan: PkMigrationPlan) -> list[str]:
        """Composite references, child keys over references, expression/partial
        indexes, views, partitions, ``timestamp_column``: the offline mode handles them."""
        problems = []
        if plan.timestamp_column:
            problems.append(
                "online mode orders the new keys by the old key; timestamp_column is offline-only"
            )
        if plan.views:
            problems.append(
                "online mode does not recreate views ("
                + ", ".join(v.name for v in plan.views)
                + "); use the offline mode"
            )
        for ref in plan.references:
            if ref.via is not None:
                problems.append(f"{ref.table} is a partition/child table: use the offline mode")
            elif len(ref.columns) > 1:
                problems.append(
                    f"foreign key {ref.constraint} on {ref.table} has several columns;"
                    " online mode handles single-column references"
                )
            elif len(_pk_columns(connection, ref.table)) != 1:
                problems.append(
                    f"{ref.table} needs a single-column primary key for the online backfill"
                )
        for dep in plan.dependents:
            if dep.table == plan.table and dep.kind == "primary":
                continue
            if dep.kind == "primary":
                problems.append(
                    f"the primary key {dep.name} of {dep.table} includes a reference to"
                    f" {plan.table}; online mode cannot rebuild it"
                )
            elif dep.definition and (" WHERE " in dep.definition or "(" in "".join(dep.columns)):
                problems.append(f"index {dep.name} is partial or on an expression")
            elif dep.definition and " USING btree " not in dep.definition:
                problems.append(f"index {dep.name} is not a btree index")
        kind = connection.execute(
            sa.text("SELECT relkind FROM pg_class WHERE oid = to_regclass(:t)"),
            {"t": _q(connection, plan.table)},
        ).scalar()
        if kind == "p":
            problems.append(f"{plan.table} is partitioned: use the offline mode")
        return problems

    # --- expand --------------------------------------------------------------------

    def set_lock_timeout(self, connection: Connection, seconds: float, local: bool) -> None:
        """``lock_timeout`` for this transaction (``local``) or the session.

        Never more than half the server's ``deadlock_timeout``: a step that
        locks several tables may wait for one while holding another that the
        application's transaction waits for; giving up before PostgreSQL looks
        for deadlocks makes the migration (which retries) the one that yields,
        never the application.
        """
        if not seconds:
            value = "0"
        else:
            deadlock_ms = connection.execute(
                sa.text(
                    "SELECT setting::int * CASE unit WHEN 's' THEN 1000 ELSE 1 END"
                    " FROM pg_settings WHERE name = 'deadlock_timeout'"
                )
            ).scalar_one()
            value = f"{max(1, min(int(seconds * 1000), int(deadlock_ms) // 2))}ms"
        connection.execute(
            sa.text("SELECT set_config('lock_timeout', :v, :local)"), {"v": value, "local": local}
        )

    def is_lock_timeout(self, error: BaseException) -> bool:
        """SQLSTATE 55P03 (lock_not_available) or 40P01 (deadlock: also retried)."""
        original = error.orig if isinstance(error, sa.exc.DBAPIError) else error
        return getattr(original, "sqlstate", None) in ("55P03", "40P01")

    def expand(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """Mapping table, new columns and sync triggers."""
        from sqla_ids.types.server_functions import install_uuid7_function

        install_uuid7_function(connection)
        mapping.mapping_table(plan).create(connection, checkfirst=True)
        q = _q(connection, plan.table)
        for table, column in plan.targets():
            tmp = _q(connection, plan.temp_column(table, column))
            connection.exec_driver_sql(
                f"ALTER TABLE {_q(connection, table)} ADD COLUMN IF NOT EXISTS {tmp} uuid"
            )
        key = _q(connection, plan.temp_column(plan.table, plan.column))
        # New rows get their UUID at insert, from now on (no table rewrite: a
        # default added after the column applies to new rows only).
        connection.exec_driver_sql(
            f"ALTER TABLE {q} ALTER COLUMN {key} SET DEFAULT sqla_ids_uuid7()"
        )
        self._sync_triggers(connection, plan, forward=True)

    def _sync_triggers(self, connection: Connection, plan: PkMigrationPlan, forward: bool) -> None:
        """One trigger function per affected table keeping the other side in step.

        ``forward`` (before the swap): the new columns follow the old ones.
        Otherwise (between swap and contract): the old columns follow the new.
        """
        self._drop_triggers(connection, plan)
        by_table: dict[str, list[str]] = {}
        m = _q(connection, plan.mapping_table)
        key_tmp = plan.temp_column(plan.table, plan.column)
        if forward:
            old_key, new_key = plan.column, key_tmp
        else:
            old_key, new_key = plan.old_column, plan.column
        ok, nk = _q(connection, old_key), _q(connection, new_key)
        # The parent: the mapping follows inserts, key changes and deletes. Key
        # changes are mapped BEFORE the row changes, so that an ON UPDATE
        # CASCADE (an AFTER trigger) finds the new old key in the mapping when
        # it rewrites the children.
        parent = [
            "IF TG_WHEN = 'BEFORE' AND TG_OP = 'INSERT' THEN",
            f"  IF NEW.{nk} IS NULL THEN NEW.{nk} := sqla_ids_uuid7(); END IF;"
            if forward
            else "  NULL;",
            "ELSIF TG_WHEN = 'BEFORE' AND TG_OP = 'UPDATE' THEN",
            f"  IF NEW.{ok} IS DISTINCT FROM OLD.{ok} AND OLD.{nk} IS NOT NULL THEN",
            f"    UPDATE {m} SET old_key = NEW.{ok} WHERE new_key = OLD.{nk};",
            "  END IF;",
            f"  IF NEW.{nk} IS DISTINCT FROM OLD.{nk} AND NEW.{nk} IS NOT NULL"
            f" AND NEW.{ok} IS NOT NULL THEN",
            f"    DELETE FROM {m} WHERE new_key = OLD.{nk};",
            f"    INSERT INTO {m} (old_key, new_key) VALUES (NEW.{ok}, NEW.{nk})",
            "      ON CONFLICT (old_key) DO UPDATE SET new_key = EXCLUDED.new_key;",
            "  END IF;",
            "ELSIF TG_WHEN = 'AFTER' AND TG_OP = 'INSERT' THEN",
            f"  IF NEW.{ok} IS NOT NULL AND NEW.{nk} IS NOT NULL THEN",
            f"    INSERT INTO {m} (old_key, new_key) VALUES (NEW.{ok}, NEW.{nk})",
            "      ON CONFLICT (old_key) DO UPDATE SET new_key = EXCLUDED.new_key;",
            "  END IF;",
            "ELSIF TG_WHEN = 'AFTER' AND TG_OP = 'DELETE' THEN",
            f"  DELETE FROM {m} WHERE old_key = OLD.{ok};",
            "END IF;",
        ]
        by_table.setdefault(plan.table, []).extend(parent)
        for n, ref in _refs(plan):
            if forward:
                source, target, look, give = (
                    ref.column,
                    plan.temp_column(ref.table, ref.column),
                    "old_key",
                    "new_key",
                )
            else:
                source, target, look, give = (
                    ref.column,
                    _child_old(plan, n, ref),
                    "new_key",
                    "old_key",
                )
            s, t = _q(connection, source), _q(connection, target)
            # A child row pointing at another parent (or a new child) takes that
            # parent's value from the mapping; rows whose parent is not mapped
            # yet are left NULL here and set by the backfill.
            by_table.setdefault(ref.table, []).extend(
                [
                    "IF TG_WHEN = 'BEFORE' AND TG_OP IN ('INSERT', 'UPDATE') THEN",
                    f"  IF TG_OP = 'INSERT' OR NEW.{s} IS DISTINCT FROM OLD.{s} THEN",
                    f"    NEW.{t} := (SELECT {give} FROM {m} WHERE {look} = NEW.{s});",
                    "  END IF;",
                    "END IF;",
                ]
            )
        for n, (table, lines) in enumerate(sorted(by_table.items())):
            function = _q(connection, _name(plan, "sync", n))
            body = "\n".join(
                [
                    "BEGIN",
                    *lines,
                    "IF TG_WHEN = 'BEFORE' THEN RETURN NEW; END IF;",
                    "RETURN NULL;",
                    "END;",
                ]
            )
            tag = _tag(body)
            connection.exec_driver_sql(
                f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql"
                f" AS {tag}\n{body}\n{tag}"
            )
            qt = _q(connection, table)
            before = _q(connection, _name(plan, "before", n))
            after = _q(connection, _name(plan, "after", n))
            connection.exec_driver_sql(
                f"CREATE TRIGGER {before} BEFORE INSERT OR UPDATE ON {qt}"
                f" FOR EACH ROW EXECUTE FUNCTION {function}()"
            )
            connection.exec_driver_sql(
                f"CREATE TRIGGER {after} AFTER INSERT OR DELETE ON {qt}"
                f" FOR EACH ROW EXECUTE FUNCTION {function}()"
            )

    def _drop_triggers(self, connection: Connection, plan: PkMigrationPlan) -> None:
        tables = sorted({plan.table, *(r.table for _, r in _refs(plan))})
        for n, table in enumerate(tables):
            if not sa.inspect(connection).has_table(table):
                continue
            for kind in ("before", "after"):
                connection.exec_driver_sql(
                    f"DROP TRIGGER IF EXISTS {_q(connection, _name(plan, kind, n))}"
                    f" ON {_q(connection, table)}"
                )
            connection.exec_driver_sql(
                f"DROP FUNCTION IF EXISTS {_q(connection, _name(plan, 'sync', n))}()"
            )

    # --- backfill ------------------------------------------------------------------

    def backfill(self, ctx: OnlineContext) -> None:
        """Parent keys in old-key order (computed in SQL), then the children."""
        plan = ctx.plan
        self._backfill_parent(ctx, plan)
        for n, ref in _refs(plan):
            self._backfill_child(ctx, plan, n, ref)

    def _backfill_parent(self, ctx: OnlineContext, plan: PkMigrationPlan) -> None:
        # Ordinals continue across batches and resumed runs (the count of rows
        # already done), so keys keep increasing with the old key. The first
        # timestamp lies far enough before the plan's time that every
        # backfilled key sorts before the keys given to new rows.
        start_ms = plan.base_time_ms - (plan.row_count >> 12) - 2
        batches = ctx.batches(f"{plan.table}.{plan.column} new keys", plan.row_count)

        def batch(connection: Connection, *, after: Any, done: int, n: int) -> tuple[Any, int]:
            t = _q(connection, plan.table)
            k = _q(connection, plan.column)
            tmp = _q(connection, plan.temp_column(plan.table, plan.column))
            where = f"{k} > :after AND " if after is not None else ""
            rows = (
                connection.execute(
                    sa.text(
                        f"WITH b AS (SELECT {k} AS k FROM {t} WHERE {where}{tmp} IS NULL"
                        f" ORDER BY {k} LIMIT :n FOR NO KEY UPDATE),"
                        " o AS (SELECT k, :done + row_number() OVER (ORDER BY k) AS ord FROM b)"
                        f" UPDATE {t} SET {tmp} ="
                        " CAST(lpad(to_hex(:start + (o.ord >> 12)), 12, '0')"
                        " || '7' || lpad(to_hex(o.ord & 4095), 3, '0')"
                        " || substr(CAST(gen_random_uuid() AS text), 20) AS uuid)"
                        f" FROM o WHERE {t}.{k} = o.k RETURNING {t}.{k}"
                    ),
                    {"after": after, "n": n, "done": done, "start": start_ms},
                )
                .scalars()
                .all()
            )
            return (max(rows) if rows else None), len(rows)

        done = ctx.transaction(partial(self._last_ordinal, plan=plan, start_ms=start_ms), "resume")
        for sweep in range(2):  # the second sweep catches rows whose key moved backwards
            after = None
            while True:
                n = batches.next()
                last, count = ctx.transaction(
                    partial(batch, after=after, done=done, n=n), "backfill"
                )
                if not count:
                    break
                after, done = last, done + count
                batches.done(count)
            if sweep == 0 and not self._unfilled_parents(ctx, plan):
                break

    def _last_ordinal(self, connection: Connection, *, plan: PkMigrationPlan, start_ms: int) -> int:
        """The highest ordinal a (killed) earlier run gave, read back from its keys:
        backfilled keys are the ones below the plan's time."""
        tmp = _q(connection, plan.temp_column(plan.table, plan.column))
        hex_ = "replace(CAST(k AS text), '-', '')"
        value = connection.execute(
            sa.text(
                f"SELECT (('x' || substr({hex_}, 1, 12))::bit(48)::bigint - :start) * 4096"
                f" + ('x' || substr({hex_}, 14, 3))::bit(12)::int"
                f" FROM (SELECT {tmp} AS k FROM {_q(connection, plan.table)}"
                f" WHERE {tmp} < CAST(:below AS uuid) ORDER BY {tmp} DESC LIMIT 1) last"
            ),
            {"start": start_ms, "below": f"{plan.base_time_ms:012x}70008000000000000000"},
        ).scalar()
        return int(value or 0)

    def _unfilled_parents(self, ctx: OnlineContext, plan: PkMigrationPlan) -> int:
        def work(connection: Connection) -> int:
            tmp = _q(connection, plan.temp_column(plan.table, plan.column))
            return int(
                connection.exec_driver_sql(
                    f"SELECT count(*) FROM {_q(connection, plan.table)} WHERE {tmp} IS NULL"
                ).scalar_one()
            )

        return ctx.transaction(work, "backfill check")

    def _backfill_child(
        self, ctx: OnlineContext, plan: PkMigrationPlan, n: int, ref: Reference
    ) -> None:
        found: dict[str, Any] = {}

        def setup(connection: Connection) -> None:
            found["pk"] = _pk_columns(connection, ref.table)[0]
            c, pk = _q(connection, ref.table), _q(connection, found["pk"])
            # The walk ends at the rows there are now: rows inserted from here
            # on take their new reference from the trigger (every parent is
            # mapped by now). Walking on to the end would chase the
            # application's inserts for as long as they arrive faster than a
            # batch takes -- for ever, at 1M parents and 100 inserts/s.
            found["total"], found["high"] = connection.exec_driver_sql(
                f"SELECT count(*), max({pk}) FROM {c}"
            ).one()

        def update(connection: Connection, *, after: Any, upto: Any) -> None:
            c, pk = _q(connection, ref.table), _q(connection, found["pk"])
            low = f"{c}.{pk} > :after" if after is not None else "true"
            high = f" AND {c}.{pk} <= :upto" if upto is not None else ""
            # One index probe of the mapping per child row. Misled by the
            # range's estimate, the planner would rather hash the batch and scan
            # the whole mapping, once per batch: 160 ms per 10,000 children with
            # a 1M-row mapping, the backfill growing with children x parents.
            connection.exec_driver_sql("SET LOCAL enable_hashjoin = off")
            connection.exec_driver_sql("SET LOCAL enable_mergejoin = off")
            tmp = _q(connection, plan.temp_column(ref.table, ref.column))
            connection.execute(
                sa.text(
                    f"UPDATE {c} SET {tmp} = m.new_key FROM {_q(connection, plan.mapping_table)} m"
                    f" WHERE {low}{high} AND m.old_key = {c}.{_q(connection, ref.column)}"
                    f" AND {c}.{tmp} IS DISTINCT FROM m.new_key"
                ),
                {"after": after, "upto": upto},
            )

        def batch(connection: Connection, *, after: Any, n: int) -> Any:
            c, pk = _q(connection, ref.table), _q(connection, found["pk"])
            where = f"{pk} > :after AND " if after is not None else ""
            upto = connection.execute(
                sa.text(
                    f"SELECT max(k) FROM (SELECT {pk} AS k FROM {c} WHERE {where}{pk} <= :high"
                    f" ORDER BY {pk} LIMIT :n) b"
                ),
                {"after": after, "high": found["high"], "n": n},
            ).scalar()
            if upto is not None:
                update(connection, after=after, upto=upto)
            return upto

        ctx.transaction(setup, "backfill")
        batches = ctx.batches(f"{ref.table}.{ref.column} new references", int(found["total"]))
        after = None
        while found["high"] is not None:
            n = batches.next()
            last = ctx.transaction(partial(batch, after=after, n=n), "backfill")
            if last is None:
                break
            after = last
            batches.done(n)
        # The rows past the end, once: only a transaction that inserted a child
        # before its parent was mapped and committed after the walk began has
        # one to fix there (the verification would catch any left over).
        ctx.transaction(partial(update, after=found["high"], upto=None), "backfill")

    # --- prepare -------------------------------------------------------------------

    def prepare(self, ctx: OnlineContext) -> None:
        """Indexes, NOT NULL proofs and foreign keys on the new columns, without
        blocking writes."""
        self._prepare(ctx, _Sides(ctx.plan, up=True))

    def _prepare(self, ctx: OnlineContext, sides: _Sides) -> None:
        plan = ctx.plan
        self._index(ctx, plan.table, [sides.key_new], _name(plan, "key", 0), unique=True)
        self._not_null(ctx, plan.table, sides.key_new, _name(plan, "nn", 0))
        for number, dep in _rebuilt(plan):
            cols = [sides.new_column(dep.table, c) for c in dep.columns]
            self._index(ctx, dep.table, cols, _name(plan, "ix", number), dep.kind == "unique")
        for n, ref in _refs(plan):
            if not ref.nullable:
                self._not_null(ctx, ref.table, sides.child_new(n, ref), _name(plan, "nn", n))
            if ref.constraint:
                self._foreign_key(ctx, plan, n, ref, sides)

    def _index(
        self, ctx: OnlineContext, table: str, columns: list[str], name: str, unique: bool
    ) -> None:
        def state(connection: Connection) -> tuple[bool | None, str, str]:
            valid = connection.execute(
                sa.text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:i)"),
                {"i": _q(connection, name)},
            ).scalar()
            cols = ", ".join(_q(connection, c) for c in columns)
            create = (
                f"CREATE {'UNIQUE ' if unique else ''}INDEX CONCURRENTLY {_q(connection, name)}"
                f" ON {_q(connection, table)} ({cols})"
            )
            return valid, f"DROP INDEX CONCURRENTLY IF EXISTS {_q(connection, name)}", create

        valid, drop, create = ctx.transaction(state, "index check")
        if valid:
            return
        if valid is False:  # a CONCURRENTLY build interrupted earlier leaves it invalid
            ctx.autocommit(drop, f"drop invalid index {name}")
        ctx.autocommit(create, f"index {name}")

    def _not_null(self, ctx: OnlineContext, table: str, column: str, name: str) -> None:
        def add(connection: Connection) -> None:
            exists = connection.execute(
                sa.text(
                    "SELECT 1 FROM pg_constraint WHERE conrelid = to_regclass(:t) AND conname = :n"
                ),
                {"t": _q(connection, table), "n": name},
            ).scalar()
            if not exists:
                connection.exec_driver_sql(
                    f"ALTER TABLE {_q(connection, table)} ADD CONSTRAINT {_q(connection, name)}"
                    f" CHECK ({_q(connection, column)} IS NOT NULL) NOT VALID"
                )

        ctx.transaction(add, f"check {name}")
        ctx.transaction(
            lambda c: c.exec_driver_sql(
                f"ALTER TABLE {_q(c, table)} VALIDATE CONSTRAINT {_q(c, name)}"
            ),
            f"validate {name}",
        )

    def _foreign_key(
        self, ctx: OnlineContext, plan: PkMigrationPlan, n: int, ref: Reference, sides: _Sides
    ) -> None:
        name = _name(plan, "fk", n)
        assert ref.constraint is not None

        def add(connection: Connection) -> None:
            exists = connection.execute(
                sa.text(
                    "SELECT 1 FROM pg_constraint WHERE conrelid = to_regclass(:t) AND conname = :n"
                ),
                {"t": _q(connection, ref.table), "n": name},
            ).scalar()
            if exists:
                return
            actions = _fk_actions(connection, ref.table, str(ref.constraint))
            connection.exec_driver_sql(
                f"ALTER TABLE {_q(connection, ref.table)} ADD CONSTRAINT {_q(connection, name)}"
                f" FOREIGN KEY ({_q(connection, sides.child_new(n, ref))})"
                f" REFERENCES {_q(connection, plan.table)}"
                f" ({_q(connection, sides.key_new)}){actions} NOT VALID"
            )

        ctx.transaction(add, f"foreign key {name}")
        ctx.transaction(
            lambda c: c.exec_driver_sql(
                f"ALTER TABLE {_q(c, ref.table)} VALIDATE CONSTRAINT {_q(c, name)}"
            ),
            f"validate {name}",
        )

    # --- swap ----------------------------------------------------------------------

    def _lock(self, connection: Connection, plan: PkMigrationPlan) -> None:
        tables = sorted({plan.table, *(r.table for _, r in _refs(plan))})
        connection.exec_driver_sql(
            "LOCK TABLE "
            + ", ".join(_q(connection, t) for t in tables)
            + " IN ACCESS EXCLUSIVE MODE"
        )

    def swap(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """The new columns take the old ones' names and roles."""
        self._swap(connection, plan, _Sides(plan, up=True))
        default = plan.new_default_sql
        t, q = _q(connection, plan.table), partial(_q, connection)
        connection.exec_driver_sql(
            f"ALTER TABLE {t} ALTER COLUMN {q(plan.column)} "
            + (f"SET DEFAULT {default}" if default else "DROP DEFAULT")
        )
        _comment(
            connection,
            plan.table,
            plan.old_column,
            OLD_COLUMN_COMMENT.format(table=plan.table, column=plan.column),
        )
        if plan.default.kind != "identity":
            # The application stops sending old keys; an identity keeps numbering them.
            connection.exec_driver_sql(
                f"ALTER TABLE {t} ALTER COLUMN {q(plan.old_column)} DROP NOT NULL"
            )
        for n, ref in _refs(plan):
            connection.exec_driver_sql(
                f"ALTER TABLE {q(ref.table)} ALTER COLUMN {q(_child_old(plan, n, ref))}"
                " DROP NOT NULL"
            )
        self._sync_triggers(connection, plan, forward=False)

    def _swap(self, connection: Connection, plan: PkMigrationPlan, sides: _Sides) -> None:
        def q(name: str) -> str:
            return _q(connection, name)

        self._lock(connection, plan)
        t = q(plan.table)
        comment = _column_comment(connection, plan.table, plan.column)
        _copy_column_grants(connection, plan.table, plan.column, sides.key_new)
        for n, ref in _refs(plan):
            _copy_column_grants(connection, ref.table, ref.column, sides.child_new(n, ref))
        for _, ref in _refs(plan):
            if ref.constraint:
                connection.exec_driver_sql(
                    f"ALTER TABLE {q(ref.table)} DROP CONSTRAINT {q(ref.constraint)}"
                )
        owners: dict[str, str] = {}
        for _, dep in _rebuilt(plan):
            owner = connection.execute(
                sa.text(
                    "SELECT conname FROM pg_constraint WHERE conindid = to_regclass(:i)"
                    " AND conrelid = to_regclass(:t)"
                ),
                {"i": q(dep.name), "t": q(dep.table)},
            ).scalar()
            if owner:
                owners[dep.name] = str(owner)
                connection.exec_driver_sql(f"ALTER TABLE {q(dep.table)} DROP CONSTRAINT {q(owner)}")
            else:
                connection.exec_driver_sql(f"DROP INDEX IF EXISTS {q(dep.name)}")
        pk_name = plan.pk_name or f"{plan.table}_pkey"
        connection.exec_driver_sql(f"ALTER TABLE {t} DROP CONSTRAINT {q(pk_name)}")
        connection.exec_driver_sql(
            f"ALTER TABLE {t} RENAME COLUMN {q(plan.column)} TO {q(sides.key_parked)}"
        )
        connection.exec_driver_sql(
            f"ALTER TABLE {t} RENAME COLUMN {q(sides.key_new)} TO {q(plan.column)}"
        )
        # The validated CHECK proves there is no NULL: SET NOT NULL does not scan.
        connection.exec_driver_sql(f"ALTER TABLE {t} ALTER COLUMN {q(plan.column)} SET NOT NULL")
        _not_null_follows(
            connection, plan.table, sides.key_parked, plan.column, _name(plan, "nno", 0)
        )
        connection.exec_driver_sql(f"ALTER TABLE {t} DROP CONSTRAINT {q(_name(plan, 'nn', 0))}")
        connection.exec_driver_sql(f"ALTER INDEX {q(_name(plan, 'key', 0))} RENAME TO {q(pk_name)}")
        connection.exec_driver_sql(
            f"ALTER TABLE {t} ADD CONSTRAINT {q(pk_name)} PRIMARY KEY USING INDEX {q(pk_name)}"
        )
        _comment(connection, plan.table, plan.column, comment)
        for n, ref in _refs(plan):
            c, new, parked = q(ref.table), sides.child_new(n, ref), sides.child_parked(n, ref)
            comment = _column_comment(connection, ref.table, ref.column)
            connection.exec_driver_sql(
                f"ALTER TABLE {c} RENAME COLUMN {q(ref.column)} TO {q(parked)}"
            )
            connection.exec_driver_sql(f"ALTER TABLE {c} RENAME COLUMN {q(new)} TO {q(ref.column)}")
            _comment(connection, ref.table, ref.column, comment)
            if not ref.nullable:
                connection.exec_driver_sql(
                    f"ALTER TABLE {c} ALTER COLUMN {q(ref.column)} SET NOT NULL"
                )
                _not_null_follows(connection, ref.table, parked, ref.column, _name(plan, "nno", n))
                connection.exec_driver_sql(
                    f"ALTER TABLE {c} DROP CONSTRAINT {q(_name(plan, 'nn', n))}"
                )
            if ref.constraint:
                connection.exec_driver_sql(
                    f"ALTER TABLE {c} RENAME CONSTRAINT {q(_name(plan, 'fk', n))}"
                    f" TO {q(ref.constraint)}"
                )
        for number, dep in _rebuilt(plan):
            connection.exec_driver_sql(
                f"ALTER INDEX {q(_name(plan, 'ix', number))} RENAME TO {q(dep.name)}"
            )
            if dep.name in owners:  # it was a UNIQUE constraint, not only an index
                connection.exec_driver_sql(
                    f"ALTER TABLE {q(dep.table)} ADD CONSTRAINT {q(owners[dep.name])}"
                    f" UNIQUE USING INDEX {q(dep.name)}"
                )

    # --- contract ------------------------------------------------------------------

    def contract(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """Drop the sync triggers and the children's old columns (unless kept)."""
        self._drop_triggers(connection, plan)
        if not plan.keep_child_old_columns:
            for n, ref in _refs(plan):
                connection.exec_driver_sql(
                    f"ALTER TABLE {_q(connection, ref.table)} DROP COLUMN IF EXISTS"
                    f" {_q(connection, _child_old(plan, n, ref))}"
                )

    # --- undo ----------------------------------------------------------------------

    def abort(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """Before the swap: drop everything expand and prepare added (dropping a
        column drops its indexes, checks and foreign keys)."""
        self._drop_triggers(connection, plan)
        for table, column in reversed(plan.targets()):  # children (and their FKs) first
            connection.exec_driver_sql(
                f"ALTER TABLE {_q(connection, table)} DROP COLUMN IF EXISTS"
                f" {_q(connection, plan.temp_column(table, column))}"
            )
        mapping.mapping_table(plan).drop(connection, checkfirst=True)

    # --- verification --------------------------------------------------------------

    def verify(self, connection: Connection, plan: PkMigrationPlan, swapped: bool) -> list[str]:
        """One statement per reference (one snapshot each): every row's new value is
        its mapped value, and the mapping has exactly one row per parent row."""
        problems = []
        t, m = _q(connection, plan.table), _q(connection, plan.mapping_table)
        if swapped:
            old_key, new_key = plan.old_column, plan.column
        else:
            old_key, new_key = plan.column, plan.temp_column(plan.table, plan.column)
        ok, nk = _q(connection, old_key), _q(connection, new_key)
        rows, mapped, wrong = connection.exec_driver_sql(
            f"SELECT (SELECT count(*) FROM {t}), (SELECT count(*) FROM {m}),"
            f" (SELECT count(*) FROM {t} p LEFT JOIN {m} x ON x.old_key = p.{ok}"
            f" WHERE p.{ok} IS NOT NULL AND x.new_key IS DISTINCT FROM p.{nk})"
        ).one()
        if wrong:
            problems.append(f"{plan.table}: {wrong} rows whose key differs from the mapping")
        if not swapped and rows != mapped:
            problems.append(f"{plan.table}: {rows} rows but {mapped} mapped")
        for n, ref in _refs(plan):
            c = _q(connection, ref.table)
            if swapped:
                source, target, look, give = (
                    _child_old(plan, n, ref),
                    ref.column,
                    "old_key",
                    "new_key",
                )
            else:
                source, target = ref.column, plan.temp_column(ref.table, ref.column)
                look, give = "old_key", "new_key"
            s, g = _q(connection, source), _q(connection, target)
            bad = connection.exec_driver_sql(
                f"SELECT count(*) FROM {c} r LEFT JOIN {m} x ON x.{look} = r.{s}"
                f" WHERE r.{s} IS NOT NULL AND x.{give} IS DISTINCT FROM r.{g}"
            ).scalar_one()
            if bad:
                problems.append(f"{ref.table}.{ref.column}: {bad} rows not matching the mapping")
        return problems

    def unprepare(self, ctx: OnlineContext) -> None:
        """After the swap, before the contract: the old columns (kept in step by the
        triggers) get their unique index, NOT NULL proofs, indexes and foreign keys
        back, without blocking writes."""
        plan = ctx.plan

        def unnumbered(connection: Connection) -> int:
            return int(
                connection.exec_driver_sql(
                    f"SELECT count(*) FROM {_q(connection, plan.table)}"
                    f" WHERE {_q(connection, plan.old_column)} IS NULL"
                ).scalar_one()
            )

        missing = ctx.transaction(unnumbered, "downgrade check")
        if missing:
            raise MigrationRefusedError(
                f"cannot undo the swap of {plan.table} online: {missing} rows inserted since"
                f" have no old key in {plan.old_column} (the old key had no default to"
                " number them); contract, then restore offline; nothing was changed"
            )
        self._prepare(ctx, _Sides(plan, up=False))

    def unswap(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """The old columns take their names and roles back; the UUID columns,
        the triggers and the mapping table go."""
        self._swap(connection, plan, _Sides(plan, up=False))
        self._drop_triggers(connection, plan)
        q = partial(_q, connection)
        for table, column in reversed(plan.targets()):  # children (and their FKs) first
            connection.exec_driver_sql(
                f"ALTER TABLE {q(table)} DROP COLUMN {q(plan.temp_column(table, column))}"
            )
        mapping.mapping_table(plan).drop(connection, checkfirst=True)
