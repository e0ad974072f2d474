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
  PostgreSQL); then the parent's primary key moves to the new column in one
  online rebuild (``DROP PRIMARY KEY, ADD PRIMARY KEY (new), ADD UNIQUE
  (old)``): InnoDB cannot swap its clustered index without a rebuild, so the
  rebuild happens here, online, and the swap needs none. Each child is then
  backfilled from the parent in keyset batches, and only then gets the
  indexes of its old column built again on the new one (one sorted build,
  online) and a foreign key added without validation
  (``foreign_key_checks=0``: metadata only; the verification below proves it
  holds), so cascades keep the new column right from then on. A reference
  whose rule is ``SET NULL`` is swept once more after that, for the rows a
  cascade emptied between their backfill and the foreign key.
* **prepare**: the children's new columns become ``NOT NULL`` (and their old
  ones nullable) in one online rebuild each; every row is then compared
  through the mapping, in one snapshot.
* **swap**: under ``LOCK TABLES`` (the application waits, for the time of a
  few metadata-only ``ALTER TABLE`` statements): foreign keys dropped and
  added again under their names, columns and indexes renamed, the new key's
  default and ``BEFORE INSERT`` trigger, triggers turned round so the old
  columns stay in step until the contract.
* **contract**: under ``LOCK TABLES`` again, drop those triggers, the
  indexes the swap parked and the children's old columns (an instant ``DROP
  COLUMN``). The parent keeps ``<key>_old`` (unique) and the
  mapping table, as the offline migration does.

Lock waits: a statement of the migration never waits for a metadata lock (it
is retried, up to 25 times ``swap_attempts``, after 20-200 ms); row locks
wait ``innodb_lock_wait_timeout``, whole seconds on MariaDB, so
``lock_timeout`` is rounded up to at least one second there.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from functools import partial
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.errors import LockTimeoutError, MigrationRefusedError
from sqla_ids.migration import mapping
from sqla_ids.migration.model import OLD_COLUMN_COMMENT, PkMigrationPlan, Reference, refuse
from sqla_ids.migration.online_names import Sides, child_old, object_name, rebuilt, references
from sqla_ids.migration.progress import logger
from sqla_ids.migration.strategies import OnlineContext, OnlineStrategy, execute_sql, literal

# MariaDB error numbers retried as lock waits: ER_LOCK_WAIT_TIMEOUT (row and
# metadata locks) and ER_LOCK_DEADLOCK.
_LOCK_ERRORS = (1205, 1213)

# Where a session's own isolation level is kept while the migration changes it.
_ISOLATION = "sqla_ids_online_isolation"

# RENAME COLUMN / RENAME INDEX (metadata only) need MariaDB 10.5.2.
_MIN_VERSION = (10, 5, 2)

# The temporary table of a child backfill batch (one per session).
_BATCH = "sqla_ids_online_batch"

# Backfill sweeps before giving up on rows that keep moving.
_SWEEPS = 5

# The smallest buffer pool, as a share of the tables a migration rewrites, that
# the benchmark measured without stalls over 1 s: with a sixth (128 MB for
# 750 MB) the longest stall was 335-395 ms; with a twelfth (64 MB) the
# application's statements on those tables waited up to 2.4 s in the backfill
# and 2.0 s in the downgrade (docs/migration.md, "Measured").
_POOL_SHARE = 1 / 6

# The default of a UUID column between the undo of the swap and its removal:
# 32 hex digits, which native UUID and CHAR(32) columns both take.
_NO_UUID = "0" * 32

# With the tables locked (swap, unswap): how long one statement waits for a
# metadata lock held by a background thread or a transaction on a linked
# table, and how often the locked work is retried before giving up. Whole
# seconds: MariaDB's lock_wait_timeout takes no fraction.
_LOCKED_WAIT_SECONDS = 1
_LOCKED_ATTEMPTS = 5


def _q(connection: Connection, name: str) -> str:
    return str(connection.dialect.identifier_preparer.quote(name))


def _columns(connection: Connection, table: str) -> dict[str, dict[str, Any]]:
    rows = connection.execute(
        sa.text(
            "SELECT COLUMN_NAME, IS_NULLABLE, COLUMN_KEY FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t"
        ),
        {"t": table},
    ).all()
    return {r[0]: {"nullable": r[1] == "YES", "key": r[2]} for r in rows}


def _indexes(connection: Connection, table: str) -> dict[str, list[str]]:
    rows = connection.execute(
        sa.text(
            "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t ORDER BY INDEX_NAME, SEQ_IN_INDEX"
        ),
        {"t": table},
    ).all()
    found: dict[str, list[str]] = {}
    for name, column in rows:
        found.setdefault(name, []).append(column)
    return found


def _foreign_keys(connection: Connection, table: str) -> set[str]:
    return set(
        connection.execute(
            sa.text(
                "SELECT CONSTRAINT_NAME FROM information_schema.REFERENTIAL_CONSTRAINTS"
                " WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = :t"
            ),
            {"t": table},
        ).scalars()
    )


def _triggers(connection: Connection) -> set[str]:
    return set(
        connection.execute(
            sa.text(
                "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS"
                " WHERE TRIGGER_SCHEMA = DATABASE()"
            )
        ).scalars()
    )


def _pk_column(connection: Connection, table: str) -> list[str]:
    return _indexes(connection, table).get("PRIMARY", [])


def _hex(column_sql: str) -> str:
    """32 hex digits of a UUID column, native ``UUID`` (dashed) or ``CHAR(32)``."""
    return f"REPLACE(CAST({column_sql} AS CHAR), '-', '')"


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


def _restored(connection: Connection, plan: PkMigrationPlan, table: str, column: str) -> str:
    """``MODIFY COLUMN`` putting ``table.column`` back exactly as recorded (comment too)."""
    definition = plan.column_definition(table, column)
    comment = definition.comment if definition is not None else ""
    return f"MODIFY COLUMN {_q(connection, column)} {_body(plan, table, column)}" + (
        f" COMMENT {literal(connection, comment)}" if comment else ""
    )


def _nullable(body: str) -> str:
    return body.replace(" NOT NULL", " NULL", 1)


def old_key_index(connection: Connection, plan: PkMigrationPlan) -> str | None:
    """The unique index an online migration leaves on the parent's old key
    (named after it: it keeps the old key unique, and indexed as an
    ``AUTO_INCREMENT`` column must be, from the backfill on), if it is there.
    The offline restore after the contract drops it with the old column's name."""
    if not plan.migration_options.online:
        return None
    found = _indexes(connection, plan.table).get(plan.old_column)
    return plan.old_column if found == [plan.old_column] else None


def _parked_index(plan: PkMigrationPlan, number: int) -> str:
    """Where the swap parks an original index over a column leaving (see
    :meth:`MariaDBOnline._index_swap`) until the contract drops it."""
    return object_name(plan, "ixo", number)


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


class MariaDBOnline(OnlineStrategy):
    """Online key migration on MariaDB (see the module docstring)."""

    # --- what it cannot do --------------------------------------------------------

    def refusals(self, connection: Connection, plan: PkMigrationPlan) -> list[str]:
        """What this module cannot carry over online; the offline mode handles it."""
        problems = []
        version: tuple[Any, ...] = tuple(connection.dialect.server_version_info or ())
        if version[:3] < _MIN_VERSION:
            problems.append(
                "online mode needs MariaDB 10.5.2 or later (RENAME COLUMN/INDEX without a"
                f" rebuild); this server is {'.'.join(map(str, version))}"
            )
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
        for table in plan.affected_tables:
            engine, row_format = connection.execute(
                sa.text(
                    "SELECT ENGINE, ROW_FORMAT FROM information_schema.TABLES"
                    " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t"
                ),
                {"t": table},
            ).one()
            if str(engine or "").lower() != "innodb":
                problems.append(f"{table} is not an InnoDB table ({engine}): no online rebuild")
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
                    problems.append(
                        f"{table} has {why}: InnoDB cannot rename, move or drop its"
                        " columns without a rebuild, which the swap would do with the"
                        " tables locked"
                    )
        for ref in plan.references:
            if len(ref.columns) > 1:
                problems.append(
                    f"foreign key {ref.constraint} on {ref.table} has several columns;"
                    " online mode handles single-column references"
                )
            elif len(_pk_column(connection, ref.table)) != 1:
                problems.append(
                    f"{ref.table} needs a single-column primary key for the online backfill"
                )
        for dep in plan.dependents:
            definition = dep.definition or ""
            if dep.kind == "primary":
                problems.append(
                    f"the primary key of {dep.table} includes a reference to"
                    f" {plan.table}; online mode cannot rebuild it"
                )
            elif definition.startswith(("ADD FULLTEXT", "ADD SPATIAL")) or "`(" in definition:
                problems.append(f"index {dep.name} is a fulltext/spatial or prefix index")
            elif " DESC" in definition:
                problems.append(f"index {dep.name} has a descending column")
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
        if _ISOLATION not in connection.info:
            connection.info[_ISOLATION] = connection.exec_driver_sql(
                "SELECT @@SESSION.tx_isolation"
            ).scalar_one()
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
        connection.exec_driver_sql(
            f"SET SESSION lock_wait_timeout = 0, innodb_lock_wait_timeout = {value},"
            " tx_isolation = 'READ-COMMITTED'"
        )

    def retry_delays(self, attempts: int) -> list[float]:
        """Many short, jittered waits: a step that does not wait for metadata locks
        needs an instant when no application transaction holds the tables."""
        return [random.uniform(0.02, 0.2) for _ in range(max(attempts, 1) * 25)]

    def release(self, connection: Connection) -> None:
        """The server's defaults and the session's isolation level back."""
        isolation = connection.info.pop(_ISOLATION, None)
        connection.exec_driver_sql(
            "SET SESSION lock_wait_timeout = DEFAULT, innodb_lock_wait_timeout = DEFAULT"
        )
        if isolation is not None:
            connection.execute(sa.text("SET SESSION tx_isolation = :i"), {"i": isolation})

    def is_lock_timeout(self, error: BaseException) -> bool:
        """Error 1205 (lock wait timeout) or 1213 (deadlock: also retried)."""
        original = error.orig if isinstance(error, sa.exc.DBAPIError) else error
        args: tuple[Any, ...] = tuple(getattr(original, "args", ()))
        return bool(args) and args[0] in _LOCK_ERRORS

    # --- expand --------------------------------------------------------------------

    def expand(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """Mapping table, new columns and sync triggers.

        MariaDB's DDL commits on its own, and each statement needs an instant
        when no application transaction holds its tables (it does not wait):
        a retried expand skips, by the catalog, what an earlier attempt did --
        ``IF NOT EXISTS`` alone would still take the locks -- so that every
        attempt makes progress.
        """
        from sqla_ids.dialects.mysql.migration import uuid_type_sql
        from sqla_ids.types.server_functions import install_uuid7_function

        install_uuid7_function(connection)
        mapping.mapping_table(plan).create(connection, checkfirst=True)
        uuid_sql = uuid_type_sql(connection)
        for table, column in plan.targets():
            if plan.temp_column(table, column) in _columns(connection, table):
                continue
            definition = plan.column_definition(table, column)
            comment = (
                f" COMMENT {literal(connection, definition.comment)}"
                if definition is not None and definition.comment
                else ""
            )
            # A nullable column added last is instant (LOCK=NONE: where the
            # table's format rules that out, an online rebuild rather than a
            # lock); the original column's comment goes with the values it
            # will carry.
            execute_sql(
                connection,
                f"ALTER TABLE {_q(connection, table)} ADD COLUMN IF NOT EXISTS"
                f" {_q(connection, plan.temp_column(table, column))} {uuid_sql} NULL{comment},"
                " LOCK=NONE",
            )
        self._sync_triggers(connection, plan, forward=True)

    def _trigger_names(self, plan: PkMigrationPlan) -> list[tuple[str, str, str, str]]:
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

    def _sync_triggers(self, connection: Connection, plan: PkMigrationPlan, forward: bool) -> None:
        """Triggers keeping the other side in step: ``forward`` (before the swap)
        the new columns follow the old ones, otherwise the old follow the new.

        Each ``CREATE TRIGGER`` commits on its own and a retried expand continues
        where it stopped, so the application writes between two of them: the
        triggers that keep the mapping go first and the one giving new parent
        rows their key last -- a row inserted before it exists gets its key
        from the backfill, with its mapping. Turned round (at the swap, tables
        locked), the old ones go first.
        """
        if not forward:
            self._drop_triggers(connection, plan)
        m = _q(connection, plan.mapping_table)
        key_tmp = plan.temp_column(plan.table, plan.column)
        old_key, new_key = (plan.column, key_tmp) if forward else (plan.old_column, plan.column)
        ok, nk = _q(connection, old_key), _q(connection, new_key)
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
            add(
                plan.table,
                "BEFORE",
                "INSERT",
                f"IF NEW.{nk} IS NULL THEN SET NEW.{nk} = sqla_ids_uuid7(); END IF;",
            )
        add(
            plan.table,
            "BEFORE",
            "UPDATE",
            f"IF NOT (NEW.{ok} <=> OLD.{ok}) AND OLD.{nk} IS NOT NULL THEN",
            f"  UPDATE {m} SET old_key = NEW.{ok} WHERE new_key = OLD.{nk};",
            "END IF;",
            f"IF NOT (NEW.{nk} <=> OLD.{nk}) AND NEW.{nk} IS NOT NULL"
            f" AND NEW.{ok} IS NOT NULL THEN",
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
        add(plan.table, "AFTER", "DELETE", f"DELETE FROM {m} WHERE old_key = OLD.{ok};")
        p = _q(connection, plan.table)
        for n, ref in references(plan):
            tmp = plan.temp_column(ref.table, ref.column)
            if forward:
                source, target, look, give = ref.column, tmp, plan.column, key_tmp
            else:
                source, target = ref.column, child_old(plan, n, ref)
                look, give = plan.column, plan.old_column
            s, t = _q(connection, source), _q(connection, target)
            # A locking read: it sees the parent row committed a moment ago even
            # in a REPEATABLE READ transaction whose snapshot is older (the
            # foreign key check reads it the same way).
            lookup = (
                f"SET NEW.{t} = (SELECT {_q(connection, give)} FROM {p}"
                f" WHERE {_q(connection, look)} = NEW.{s} LOCK IN SHARE MODE);"
            )
            add(ref.table, "BEFORE", "INSERT", lookup)
            add(
                ref.table, "BEFORE", "UPDATE", f"IF NOT (NEW.{s} <=> OLD.{s}) THEN {lookup} END IF;"
            )
        order = {"AFTER DELETE": 0, "AFTER INSERT": 1, "BEFORE UPDATE": 2, "BEFORE INSERT": 3}
        names = sorted(
            self._trigger_names(plan),
            key=lambda t: (
                t[1] == plan.table and t[2:] == ("BEFORE", "INSERT"),
                order[" ".join(t[2:])],
            ),
        )
        existing = _triggers(connection) if forward else set()
        for name, table, timing, event in names:
            body = lines.get((table, timing, event))
            if not body or name in existing:
                continue
            execute_sql(
                connection,
                f"CREATE TRIGGER IF NOT EXISTS {_q(connection, name)} {timing} {event}"
                f" ON {_q(connection, table)} FOR EACH ROW BEGIN\n" + "\n".join(body) + "\nEND",
            )

    def _drop_triggers(self, connection: Connection, plan: PkMigrationPlan) -> None:
        existing = _triggers(connection)
        for name, *_ in self._trigger_names(plan):
            if name in existing:
                execute_sql(connection, f"DROP TRIGGER IF EXISTS {_q(connection, name)}")

    # --- backfill ------------------------------------------------------------------

    def backfill(self, ctx: OnlineContext) -> None:
        """Parent keys in old-key order, the parent's primary key moved online,
        the children backfilled, then their indexes and foreign keys on the new
        columns (and ``SET NULL`` references swept again)."""
        plan = ctx.plan

        def sizes(connection: Connection) -> tuple[int, int]:
            row = connection.execute(
                sa.text(
                    "SELECT @@innodb_buffer_pool_size, COALESCE(SUM(DATA_LENGTH"
                    " + INDEX_LENGTH), 0) FROM information_schema.TABLES"
                    " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN :tables"
                ).bindparams(sa.bindparam("tables", expanding=True)),
                {"tables": list(plan.affected_tables)},
            ).one()
            return int(row[0]), int(row[1])

        advice = pool_advice(*ctx.transaction(sizes, "buffer pool check"))
        if advice:
            logger.warning("%s: %s", plan.table, advice)
        up = Sides(plan, up=True)
        self._backfill_parent(ctx, plan)
        self._move_primary_key(ctx, up)
        # The indexes on the new columns come after the backfill: kept up to
        # date during it, every row written would insert into them at a
        # random place (a child's rows are walked in its own key's order, not
        # its parent's), and with a table larger than the buffer pool those
        # random page reads and writes used up InnoDB's free pages faster
        # than its page cleaner made them: measured with a 128 MB pool, 1M
        # parents and 2 x 2M children, the application's statements froze
        # for up to 3.9 s whenever the pool ran out. One sorted build per
        # index afterwards reads each child once.
        for n, ref in references(plan):
            self._backfill_child(ctx, plan, n, ref, up)
        for table in plan.affected_tables:
            self._rebuilt_indexes(ctx, plan, table, up)
        for n, ref in references(plan):
            self._foreign_key(ctx, plan, n, ref, up)
        # Until its foreign key was there, a cascade setting a reference NULL
        # (MariaDB fires no trigger for it) left the new column pointing at
        # the parent; sweep those references again now that it is there.
        for n, ref in references(plan):
            if _sets_null(ref):
                self._backfill_child(ctx, plan, n, ref, up)

    def _keep(self, connection: Connection, table: str, alias: str) -> str:
        from sqla_ids.dialects.mysql.migration import preserved_columns

        return "".join(
            f", {alias}.{_q(connection, c)} = {alias}.{_q(connection, c)}"
            for c in preserved_columns(connection, table)
        )

    def _backfill_parent(self, ctx: OnlineContext, plan: PkMigrationPlan) -> None:
        # Ordinals continue across batches and resumed runs, so keys keep
        # increasing with the old key; the first timestamp lies far enough
        # before the plan's time that every backfilled key sorts before the
        # keys given to new rows (as on PostgreSQL).
        start_ms = plan.base_time_ms - (plan.row_count >> 12) - 2
        batches = ctx.batches(f"{plan.table}.{plan.column} new keys", plan.row_count)

        def batch(connection: Connection, *, after: Any, done: int, n: int) -> tuple[Any, int]:
            t = _q(connection, plan.table)
            k = _q(connection, plan.column)
            tmp = _q(connection, plan.temp_column(plan.table, plan.column))
            low = f"{k} > :after AND " if after is not None else ""
            upto, count = connection.execute(
                sa.text(
                    f"SELECT MAX(k), COUNT(*) FROM (SELECT {k} AS k FROM {t} WHERE {low}{tmp}"
                    " IS NULL ORDER BY k LIMIT :n) b"
                ),
                {"after": after, "n": n},
            ).one()
            if not count:
                return None, 0
            # 48-bit milliseconds, version 7, the 12-bit ordinal's low part,
            # variant 10 and 62 random bits: 32 hex digits, which native UUID
            # and CHAR(32) columns both take.
            key = (
                "LOWER(CONCAT(LPAD(HEX(:start + (b.o >> 12)), 12, '0'), '7',"
                " LPAD(HEX(b.o & 4095), 3, '0'), HEX(8 | (ASCII(RANDOM_BYTES(1)) & 3)),"
                " SUBSTRING(HEX(RANDOM_BYTES(8)), 2)))"
            )
            # The batch's rows X-locked first: the UPDATE below reads them in
            # its derived table with S locks and would upgrade them to X, and
            # an application's DELETE queued between the two deadlocks with it
            # (InnoDB then rolls back the application).
            connection.execute(
                sa.text(
                    f"SELECT {k} FROM {t} WHERE {low}{k} <= :upto AND {tmp} IS NULL FOR UPDATE"
                ),
                {"after": after, "upto": upto},
            ).all()
            connection.execute(
                sa.text(
                    f"UPDATE {t} p JOIN (SELECT {k} AS k, :done + ROW_NUMBER() OVER"
                    f" (ORDER BY {k}) AS o FROM {t} WHERE {low}{k} <= :upto AND {tmp} IS NULL) b"
                    f" ON p.{k} = b.k SET p.{tmp} = {key}{self._keep(connection, plan.table, 'p')}"
                    f" WHERE p.{tmp} IS NULL"
                ),
                {"after": after, "upto": upto, "done": done, "start": start_ms},
            )
            return upto, int(count)

        done = ctx.transaction(partial(self._last_ordinal, plan=plan, start_ms=start_ms), "resume")
        for _sweep in range(_SWEEPS):  # further sweeps: rows whose key moved meanwhile
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
            if not ctx.transaction(partial(self._unfilled, plan=plan), "backfill check"):
                return
        raise MigrationRefusedError(
            f"{plan.table}: rows keep changing their keys faster than the backfill; stopped"
            " before the swap (run the migration again to continue)"
        )

    def _unfilled(self, connection: Connection, *, plan: PkMigrationPlan) -> int:
        tmp = _q(connection, plan.temp_column(plan.table, plan.column))
        return int(
            connection.exec_driver_sql(
                f"SELECT COUNT(*) FROM {_q(connection, plan.table)} WHERE {tmp} IS NULL"
            ).scalar_one()
        )

    def _last_ordinal(self, connection: Connection, *, plan: PkMigrationPlan, start_ms: int) -> int:
        """The highest ordinal an earlier (killed) run gave, read back from its keys:
        backfilled keys are the ones below the plan's time."""
        tmp = _q(connection, plan.temp_column(plan.table, plan.column))
        value = connection.execute(
            sa.text(
                f"SELECT (CAST(CONV(SUBSTRING({_hex('k')}, 1, 12), 16, 10) AS SIGNED) - :start)"
                f" * 4096 + CAST(CONV(SUBSTRING({_hex('k')}, 14, 3), 16, 10) AS SIGNED)"
                f" FROM (SELECT {tmp} AS k FROM {_q(connection, plan.table)}"
                f" WHERE {_hex(tmp)} < :below ORDER BY {_hex(tmp)} DESC LIMIT 1) last"
            ),
            {"start": start_ms, "below": f"{plan.base_time_ms:012x}70008000000000000000"},
        ).scalar()
        return int(value or 0)

    def _alter_online(self, ctx: OnlineContext, table: str, clauses: list[str], what: str) -> None:
        """One ``ALTER TABLE`` that rebuilds or adds an index while the application
        reads and writes (``LOCK=NONE``); it is retried when its short exclusive
        metadata locks at the start and the end are not granted at once (or
        within ``metadata_lock_wait``)."""
        if not clauses:
            return
        # The end of a long rebuild needs an instant when no transaction has the
        # table open: on a table the application always has open (measured: a
        # 1M-row rebuild under the benchmark's writer failed at its end 12
        # times in 12) it may wait for one -- when the user accepts that MariaDB
        # then rolls back an application transaction that reads the table and
        # then writes it (an MDL upgrade behind the waiting DDL is a deadlock
        # whose victim is always the DML).
        wait = math.ceil(ctx.metadata_lock_wait)

        def work(connection: Connection) -> None:
            execute_sql(
                connection,
                (f"SET STATEMENT lock_wait_timeout = {wait} FOR " if wait else "")
                + f"ALTER TABLE {_q(connection, table)} "
                + ", ".join(clauses)
                + ", ALGORITHM=INPLACE, LOCK=NONE",
            )

        try:
            ctx.transaction(work, what)
        except LockTimeoutError as error:
            if wait:
                raise
            raise LockTimeoutError(
                f"{error}; an online ALTER needs an instant when no transaction has"
                f" {table} open, and this application always has one: with"
                " metadata_lock_wait=1 it waits for one (see its caveat in"
                " docs/migration.md)"
            ) from None

    def _move_primary_key(self, ctx: OnlineContext, sides: Sides) -> None:
        """The primary key onto ``sides.key_new`` (one online rebuild), the column
        leaving it kept unique; a non-auto-increment old key becomes nullable
        (rows inserted after the swap have none)."""
        plan = ctx.plan
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
            if sides.up and plan.default.kind != "auto_increment":
                result.append(f"MODIFY COLUMN {q(plan.column)} {_nullable(body)}")
            if not sides.up:
                from sqla_ids.dialects.mysql.migration import uuid_type_sql

                result.append(f"MODIFY COLUMN {q(plan.old_column)} {body}")
                # The UUID column leaves the key and goes at the undo: nullable
                # now (that needs this rebuild), so that rows inserted between
                # the undo and its removal need no value.
                definition = plan.column_definition(plan.table, plan.column)
                default = f" DEFAULT {plan.new_default_sql}" if plan.new_default_sql else ""
                comment = definition.comment if definition is not None else ""
                result.append(
                    f"MODIFY COLUMN {q(plan.column)} {uuid_type_sql(connection)} NULL{default}"
                    + (f" COMMENT {literal(connection, comment)}" if comment else "")
                )
            if not sides.up and plan.old_column in _indexes(connection, plan.table):
                result.append(f"DROP INDEX {q(plan.old_column)}")
            return result

        todo = ctx.transaction(clauses, "primary key check")
        self._alter_online(ctx, plan.table, todo, f"primary key of {plan.table}")

    def _rebuilt_indexes(
        self, ctx: OnlineContext, plan: PkMigrationPlan, table: str, sides: Sides
    ) -> None:
        """The indexes of ``table`` over affected columns built again over the
        columns replacing them (no rebuild of the table: ``LOCK=NONE``). Undoing
        the swap, an original index parked by it needs no build."""

        def clauses(connection: Connection) -> list[str]:
            existing = _indexes(connection, table)
            result = []
            for number, dep in rebuilt(plan):
                if dep.table != table or dep.kind == "primary":
                    continue
                name = object_name(plan, "ix", number)
                if name in existing or (not sides.up and _parked_index(plan, number) in existing):
                    continue
                cols = ", ".join(
                    _q(connection, sides.new_column(dep.table, c)) for c in dep.columns
                )
                kind = "UNIQUE INDEX" if dep.kind == "unique" else "INDEX"
                result.append(f"ADD {kind} {_q(connection, name)} ({cols})")
            return result

        todo = ctx.transaction(clauses, "index check")
        self._alter_online(ctx, table, todo, f"indexes of {table}")

    def _foreign_key(
        self, ctx: OnlineContext, plan: PkMigrationPlan, n: int, ref: Reference, sides: Sides
    ) -> None:
        """The reference's foreign key on the new column, added without a scan
        (``foreign_key_checks=0``: metadata only); the checks prove it holds."""
        if not ref.constraint:
            return
        name = object_name(plan, "fk", n)

        def add(connection: Connection) -> None:
            if name in _foreign_keys(connection, ref.table):
                return
            execute_sql(
                connection,
                f"SET STATEMENT foreign_key_checks = 0 FOR ALTER TABLE {_q(connection, ref.table)}"
                f" ADD CONSTRAINT {_q(connection, name)} FOREIGN KEY"
                f" ({_q(connection, sides.child_new(n, ref))})"
                f" REFERENCES {_q(connection, plan.table)} ({_q(connection, sides.key_new)})"
                f"{_actions(ref)}, ALGORITHM=INPLACE, LOCK=NONE",
            )

        ctx.transaction(add, f"foreign key {name}")

    def _backfill_child(
        self, ctx: OnlineContext, plan: PkMigrationPlan, n: int, ref: Reference, sides: Sides
    ) -> None:
        """``target`` of every row set from its parent, in keyset batches of the
        child's primary key (rows whose reference was set NULL by a cascade
        before the new foreign key existed get NULL too)."""
        info: dict[str, Any] = {}
        if sides.up:
            source, target = ref.column, plan.temp_column(ref.table, ref.column)
            look, give = plan.column, plan.temp_column(plan.table, plan.column)
        else:
            source, target = ref.column, child_old(plan, n, ref)
            look, give = plan.column, plan.old_column

        def setup(connection: Connection) -> None:
            info["pk"] = _pk_column(connection, ref.table)[0]
            # Each sweep ends at the rows there are when it starts: rows
            # inserted later take their new reference from the trigger. Walking
            # on to the end would chase the application's inserts for as long
            # as they arrive faster than a batch takes.
            c, pk = _q(connection, ref.table), _q(connection, info["pk"])
            info["total"], info["high"] = connection.exec_driver_sql(
                f"SELECT COUNT(*), MAX({pk}) FROM {c}"
            ).one()

        ctx.transaction(setup, "backfill")
        batches = ctx.batches(f"{ref.table}.{ref.column} new references", int(info["total"]))

        def batch(connection: Connection, *, after: Any, n: int) -> Any:
            c, p = _q(connection, ref.table), _q(connection, plan.table)
            pk = _q(connection, info["pk"])
            # The parent's primary key is the old or the new key column, by
            # phase (it moves in the backfill going up, after it coming down).
            pp = _q(connection, _pk_column(connection, plan.table)[0])
            low = f"r.{pk} > :after AND " if after is not None else ""
            upto = connection.execute(
                sa.text(
                    f"SELECT MAX(k) FROM (SELECT r.{pk} AS k FROM {c} r WHERE {low}r.{pk} <= :high"
                    " ORDER BY k LIMIT :n) b"
                ),
                {"after": after, "high": info["high"], "n": n},
            ).scalar()
            if upto is None:
                return None
            s, t = _q(connection, source), _q(connection, target)
            lo, gv = _q(connection, look), _q(connection, give)
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
            #    session. A parent not found (its key moved since) is not a NULL
            #    reference: left for the next sweep.
            connection.execute(
                sa.text(
                    f"CREATE TEMPORARY TABLE {_BATCH} AS SELECT r.{pk} AS k, r.{s} AS s,"
                    f" x.{gv} AS v, x.{pp} AS p FROM {c} r LEFT JOIN {p} x ON x.{lo} = r.{s}"
                    f" WHERE {low}r.{pk} <= :upto AND NOT (r.{t} <=> x.{gv})"
                    f" AND (x.{lo} IS NOT NULL OR r.{s} IS NULL)"
                ),
                {"after": after, "upto": upto},
            )
            try:
                # 2. Those parents, S-locked through their primary key (a
                #    secondary index would lock its own entry first, which the
                #    application's DELETE, holding the row, must X-lock after:
                #    another deadlock): a parent being deleted or re-keyed now is
                #    waited for before this batch holds any child row.
                connection.exec_driver_sql(
                    f"SELECT STRAIGHT_JOIN x.{pp} FROM {_BATCH} b JOIN {p} x"
                    f" ON x.{pp} = b.p LOCK IN SHARE MODE"
                ).all()
                # 3. Set where the reference is still the one read (else the
                # application's trigger has set it already); no foreign key
                # check, which would lock the parents row by row (the checks
                # verify).
                connection.exec_driver_sql(
                    f"SET STATEMENT foreign_key_checks = 0 FOR UPDATE {c} r JOIN {_BATCH} b"
                    f" ON b.k = r.{pk} SET r.{t} = b.v{self._keep(connection, ref.table, 'r')}"
                    f" WHERE r.{s} <=> b.s"
                )
            finally:
                connection.exec_driver_sql(f"DROP TEMPORARY TABLE IF EXISTS {_BATCH}")
            return upto

        def unfilled(connection: Connection) -> int:
            s, t = _q(connection, source), _q(connection, target)
            return int(
                connection.exec_driver_sql(
                    f"SELECT COUNT(*) FROM {_q(connection, ref.table)}"
                    f" WHERE {s} IS NOT NULL AND {t} IS NULL"
                ).scalar_one()
            )

        for sweep in range(_SWEEPS):  # further sweeps: rows whose parent's key moved
            if sweep:
                ctx.transaction(setup, "backfill")
            after = None
            while info["high"] is not None:
                n = batches.next()
                last = ctx.transaction(partial(batch, after=after, n=n), "backfill")
                if last is None:
                    break
                after = last
                batches.done(n)
            if not ctx.transaction(unfilled, "backfill check"):
                return
        raise MigrationRefusedError(
            f"{ref.table}.{ref.column}: references keep moving faster than the backfill;"
            " stopped before the swap (run the migration again to continue)"
        )

    # --- prepare -------------------------------------------------------------------

    def prepare(self, ctx: OnlineContext) -> None:
        """The children's new columns ``NOT NULL`` where the old ones are, and the
        old ones nullable where new rows may have no old value (see
        :func:`_old_values_stay_not_null`), in one online rebuild per child."""
        self._child_nulls(ctx, Sides(ctx.plan, up=True))

    def _child_nulls(self, ctx: OnlineContext, sides: Sides) -> None:
        from sqla_ids.dialects.mysql.migration import uuid_type_sql

        plan = ctx.plan
        for n, ref in references(plan):
            new, old = sides.child_new(n, ref), ref.column

            def clauses(
                connection: Connection, ref: Reference = ref, new: str = new, old: str = old
            ) -> list[str]:
                columns = _columns(connection, ref.table)
                body = _body(plan, ref.table, ref.column)
                definition = plan.column_definition(ref.table, ref.column)
                comment = (
                    f" COMMENT {literal(connection, definition.comment)}"
                    if definition is not None and definition.comment
                    else ""
                )
                result: list[str] = []
                if ref.nullable:
                    return result
                if columns[new]["nullable"]:
                    type_sql = uuid_type_sql(connection) + " NOT NULL" if sides.up else body
                    result.append(f"MODIFY COLUMN {_q(connection, new)} {type_sql}{comment}")
                # Coming down, the UUID column leaving needs no change: the swap
                # back gives it a default, the undo then drops it.
                leaving_nullable = columns[old]["nullable"]
                if sides.up and not _old_values_stay_not_null(plan) and not leaving_nullable:
                    result.append(f"MODIFY COLUMN {_q(connection, old)} {_nullable(body)}")
                return result

            todo = ctx.transaction(clauses, "null check")
            self._alter_online(ctx, ref.table, todo, f"NOT NULL on {ref.table}")

    # --- verification --------------------------------------------------------------

    def verify(self, connection: Connection, plan: PkMigrationPlan, swapped: bool) -> list[str]:
        """In one snapshot (InnoDB's REPEATABLE READ): every row's new value is its
        mapped value, and no reference set NULL kept a value on the other side."""
        problems = []
        t, m = _q(connection, plan.table), _q(connection, plan.mapping_table)
        if swapped:
            old_key, new_key = plan.old_column, plan.column
        else:
            old_key, new_key = plan.column, plan.temp_column(plan.table, plan.column)
        ok, nk = _q(connection, old_key), _q(connection, new_key)
        connection.exec_driver_sql("SELECT 1")  # the snapshot starts here
        wrong = connection.exec_driver_sql(
            f"SELECT COUNT(*) FROM {t} p LEFT JOIN {m} x ON x.old_key = p.{ok}"
            f" WHERE p.{ok} IS NOT NULL AND NOT (x.new_key <=> p.{nk})"
        ).scalar_one()
        if wrong:
            problems.append(f"{plan.table}: {wrong} rows whose key differs from the mapping")
        if not swapped:
            unkeyed = connection.exec_driver_sql(
                f"SELECT COUNT(*) FROM {t} WHERE {nk} IS NULL"
            ).scalar_one()
            if unkeyed:
                problems.append(f"{plan.table}: {unkeyed} rows without a new key")
        for n, ref in references(plan):
            c = _q(connection, ref.table)
            if swapped:
                source, target = child_old(plan, n, ref), ref.column
            else:
                source, target = ref.column, plan.temp_column(ref.table, ref.column)
            s, g = _q(connection, source), _q(connection, target)
            bad = connection.exec_driver_sql(
                f"SELECT COUNT(*) FROM {c} r LEFT JOIN {m} x ON x.old_key = r.{s}"
                f" WHERE (r.{s} IS NOT NULL AND NOT (x.new_key <=> r.{g}))"
                f" OR (r.{s} IS NULL AND r.{g} IS NOT NULL)"
            ).scalar_one()
            if bad:
                problems.append(f"{ref.table}.{ref.column}: {bad} rows not matching the mapping")
        return problems

    # --- swap ----------------------------------------------------------------------

    def _locked(
        self, connection: Connection, plan: PkMigrationPlan, work: Callable[[], None]
    ) -> None:
        """``work`` with every affected table write-locked: the application waits
        (for metadata-only statements) instead of seeing half a swap. MariaDB's
        DDL commits on its own; ``LOCK TABLES`` holds across those commits."""
        # The mapping table is gone once an undo has dropped it: a retried undo
        # (its earlier attempt stopped by a lock timeout after that) locks the rest.
        mapping_exists = connection.execute(
            sa.text(
                "SELECT COUNT(*) FROM information_schema.TABLES"
                " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t"
            ),
            {"t": plan.mapping_table},
        ).scalar_one()
        tables = sorted(
            set(plan.affected_tables) | ({plan.mapping_table} if mapping_exists else set())
        )
        # Taking the tables does not wait (lock_wait_timeout = 0): failing
        # here changes nothing, and the step is retried.
        execute_sql(
            connection, "LOCK TABLES " + ", ".join(f"{_q(connection, t)} WRITE" for t in tables)
        )
        previous = connection.exec_driver_sql("SELECT @@SESSION.lock_wait_timeout").scalar_one()
        try:
            # Holding them, each ALTER still upgrades its lock, and waits for
            # whoever else holds one: InnoDB's purge and statistics threads
            # (MariaDB 10.6+), a transaction on a table a foreign key links to.
            # Failing now would hand the application half a swap when the
            # tables are unlocked, so the statements wait (a little) and the
            # work, whose statements are idempotent, is retried under the lock.
            connection.execute(
                sa.text("SET SESSION lock_wait_timeout = :s"), {"s": _LOCKED_WAIT_SECONDS}
            )
            for attempt in range(1, _LOCKED_ATTEMPTS + 1):
                try:
                    work()
                    break
                except sa.exc.DBAPIError as error:
                    if not self.is_lock_timeout(error) or attempt == _LOCKED_ATTEMPTS:
                        raise
                    logger.info(
                        "%s: a locked step waited for a metadata lock (attempt %d/%d)",
                        plan.table,
                        attempt,
                        _LOCKED_ATTEMPTS,
                    )
        finally:
            connection.exec_driver_sql("UNLOCK TABLES")
            connection.execute(sa.text("SET SESSION lock_wait_timeout = :s"), {"s": previous})

    def swap(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """The new columns take the old ones' names and roles (metadata only)."""

        def work() -> None:
            self._swap(connection, plan, Sides(plan, up=True))
            for sql in plan.new_default.trigger_sql:
                execute_sql(connection, sql)
            self._sync_triggers(connection, plan, forward=False)

        self._locked(connection, plan, work)

    def _swap(self, connection: Connection, plan: PkMigrationPlan, sides: Sides) -> None:
        from sqla_ids.dialects.mysql.migration import uuid_type_sql

        q = partial(_q, connection)
        uuid_sql = uuid_type_sql(connection)
        # Every relationship stays enforced between any two statements: DDL
        # commits statement by statement, and a migration killed between two of
        # them leaves the application writing to the tables (unlocked) until it
        # runs again. Each child has two foreign keys until its turn: the
        # original one on the column leaving and ours on the column arriving.
        # 1. The parent: names swapped, the key's default, comments. Both
        # foreign keys follow their parent column's new name.
        parent = _columns(connection, plan.table)
        if sides.key_new in parent and plan.column in parent:
            key_def = plan.column_definition(plan.table, plan.column)
            body = _body(plan, plan.table, plan.column)
            comment = key_def.comment if key_def is not None else ""
            position = self._position(connection, plan, plan.table, plan.column)
            if sides.up:
                old_comment = OLD_COLUMN_COMMENT.format(table=plan.table, column=plan.column)
                old_body = body if plan.default.kind == "auto_increment" else _nullable(body)
                default = f" DEFAULT {plan.new_default_sql}" if plan.new_default_sql else ""
                clauses = [
                    f"CHANGE COLUMN {q(plan.column)} {q(plan.old_column)} {old_body}"
                    f" COMMENT {literal(connection, old_comment)}",
                    f"CHANGE COLUMN {q(sides.key_new)} {q(plan.column)} {uuid_sql} NOT NULL"
                    f"{default}"
                    + (f" COMMENT {literal(connection, comment)}" if comment else "")
                    + position,
                ]
            else:
                clauses = [
                    f"CHANGE COLUMN {q(plan.column)} {q(sides.key_parked)} {uuid_sql} NULL",
                    f"CHANGE COLUMN {q(plan.old_column)} {q(plan.column)} {body}"
                    + (f" COMMENT {literal(connection, comment)}" if comment else "")
                    + position,
                ]
            # A self-reference's indexes move with its foreign key, in step 2.
            self_references = {r.column for _, r in references(plan) if r.table == plan.table}
            clauses += self._index_swap(connection, plan, plan.table, sides, self_references)
            execute_sql(
                connection,
                f"ALTER TABLE {q(plan.table)} {', '.join(clauses)}, ALGORITHM=NOCOPY",
            )
        # 2. Each child, in two statements: the original foreign key goes with the
        # column leaving (ours still holds the one arriving), names swapped and
        # indexes renamed; then the original foreign key comes back on the
        # column that took its name, in the statement that drops ours (MariaDB
        # cannot drop and add one name in one statement).
        for n, ref in references(plan):
            columns = _columns(connection, ref.table)
            new, parked = sides.child_new(n, ref), sides.child_parked(n, ref)
            if new in columns and parked not in columns:
                definition = plan.column_definition(ref.table, ref.column)
                comment = definition.comment if definition is not None else ""
                if sides.up:
                    type_sql = f"{uuid_sql} {'NULL' if ref.nullable else 'NOT NULL'}"
                    leaving = f"RENAME COLUMN {q(ref.column)} TO {q(parked)}"
                else:
                    type_sql = _body(plan, ref.table, ref.column)
                    # No trigger fills the UUID column leaving: a default (metadata
                    # only; making it nullable would rebuild the table) lets the
                    # application insert should the undo be stopped before it
                    # drops the column (the lock ends with the connection).
                    leaving = f"CHANGE COLUMN {q(ref.column)} {q(parked)} {uuid_sql}" + (
                        " NULL"
                        if columns[ref.column]["nullable"]
                        else f" NOT NULL DEFAULT '{_NO_UUID}'"
                    )
                clauses = [
                    *(
                        [f"DROP FOREIGN KEY IF EXISTS {q(ref.constraint)}"]
                        if ref.constraint
                        else []
                    ),
                    leaving,
                    f"CHANGE COLUMN {q(new)} {q(ref.column)} {type_sql}"
                    + (f" COMMENT {literal(connection, comment)}" if comment else "")
                    + self._position(connection, plan, ref.table, ref.column),
                    *self._index_swap(connection, plan, ref.table, sides),
                ]
                execute_sql(
                    connection,
                    f"ALTER TABLE {q(ref.table)} {', '.join(clauses)}, ALGORITHM=NOCOPY",
                )
            ours = object_name(plan, "fk", n)
            if ref.constraint and ours in _foreign_keys(connection, ref.table):
                execute_sql(
                    connection,
                    f"SET STATEMENT foreign_key_checks = 0 FOR ALTER TABLE {q(ref.table)}"
                    f" ADD CONSTRAINT {q(ref.constraint)} FOREIGN KEY IF NOT EXISTS"
                    f" ({q(ref.column)}) REFERENCES {q(plan.table)} ({q(plan.column)})"
                    f"{_actions(ref)}, DROP FOREIGN KEY {q(ours)}, ALGORITHM=NOCOPY",
                )

    def _index_swap(
        self,
        connection: Connection,
        plan: PkMigrationPlan,
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
        down, the UUID column's index goes (the undo drops the column).
        """
        q = partial(_q, connection)
        existing = _indexes(connection, table)
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
                else:
                    clauses.append(f"DROP INDEX {q(dep.name)}")
            clauses.append(f"RENAME INDEX {q(arriving)} TO {q(dep.name)}")
        return clauses

    def _position(
        self, connection: Connection, plan: PkMigrationPlan, table: str, column: str
    ) -> str:
        """Where ``table.column`` was (``FIRST``/``AFTER``): moving a column is instant."""
        definition = plan.column_definition(table, column)
        if definition is None:
            return ""
        if definition.after is None:
            return " FIRST"
        if definition.after not in _columns(connection, table):
            return ""
        return f" AFTER {_q(connection, definition.after)}"

    # --- contract ------------------------------------------------------------------

    def contract(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """Drop the sync triggers, the indexes the swap parked and the children's
        old columns (unless kept): metadata only, with the tables locked once
        (each statement needs its table's metadata lock, which an application
        that always has a transaction open leaves free only for an instant --
        too rarely to find one per statement)."""
        q = partial(_q, connection)

        def work() -> None:
            if _old_values_stay_not_null(plan):
                # Until now the triggers filled the old values; a default
                # (metadata only) fills them for rows inserted after the
                # triggers' removal, should the migration be stopped before
                # the columns' (the lock ends with the connection).
                for n, ref in references(plan):
                    old = child_old(plan, n, ref)
                    column = _columns(connection, ref.table).get(old)
                    if column is not None and not column["nullable"]:
                        execute_sql(
                            connection,
                            f"ALTER TABLE {q(ref.table)} ALTER COLUMN {q(old)} SET DEFAULT 0,"
                            " ALGORITHM=INSTANT",
                        )
            self._drop_triggers(connection, plan)
            clauses: dict[str, list[str]] = {}
            for table in plan.affected_tables:
                existing = _indexes(connection, table)
                clauses[table] = [
                    f"DROP INDEX {q(_parked_index(plan, number))}"
                    for number, dep in rebuilt(plan)
                    if dep.table == table and _parked_index(plan, number) in existing
                ]
            if not plan.keep_child_old_columns:
                for n, ref in references(plan):
                    old = child_old(plan, n, ref)
                    if old in _columns(connection, ref.table):
                        clauses[ref.table].append(f"DROP COLUMN {q(old)}")
            for table, todo in clauses.items():
                if todo:
                    # NOCOPY: dropping an index or a column never rebuilds the
                    # table (it would fail here rather than rebuild it locked).
                    execute_sql(
                        connection,
                        f"ALTER TABLE {q(table)} {', '.join(todo)}, ALGORITHM=NOCOPY",
                    )

        self._locked(connection, plan, work)

    # --- undo ----------------------------------------------------------------------

    def abort(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """Before the swap: everything expand and backfill added goes, the primary
        key moves back and the columns get their nullability back (online
        rebuilds where something was rebuilt)."""
        q = partial(_q, connection)
        self._drop_triggers(connection, plan)
        for n, ref in references(plan):
            tmp = plan.temp_column(ref.table, ref.column)
            columns = _columns(connection, ref.table)
            clauses = []
            if object_name(plan, "fk", n) in _foreign_keys(connection, ref.table):
                execute_sql(
                    connection,
                    f"ALTER TABLE {q(ref.table)} DROP FOREIGN KEY {q(object_name(plan, 'fk', n))}",
                )
            existing = _indexes(connection, ref.table)
            for number, dep in rebuilt(plan):
                if dep.table == ref.table and object_name(plan, "ix", number) in existing:
                    clauses.append(f"DROP INDEX {q(object_name(plan, 'ix', number))}")
            if tmp in columns:
                clauses.append(f"DROP COLUMN {q(tmp)}")
            if not ref.nullable and columns[ref.column]["nullable"]:
                clauses.append(_restored(connection, plan, ref.table, ref.column))
            if clauses:
                execute_sql(
                    connection,
                    f"ALTER TABLE {q(ref.table)} {', '.join(dict.fromkeys(clauses))},"
                    " ALGORITHM=INPLACE, LOCK=NONE",
                )
        key_tmp = plan.temp_column(plan.table, plan.column)
        clauses = []
        if _pk_column(connection, plan.table) == [key_tmp]:
            clauses += ["DROP PRIMARY KEY", f"ADD PRIMARY KEY ({q(plan.column)})"]
        if plan.old_column in _indexes(connection, plan.table):
            clauses.append(f"DROP INDEX {q(plan.old_column)}")
        if key_tmp in _columns(connection, plan.table):
            clauses.append(f"DROP COLUMN {q(key_tmp)}")
        if _columns(connection, plan.table)[plan.column]["nullable"]:
            clauses.append(_restored(connection, plan, plan.table, plan.column))
        if clauses:
            execute_sql(
                connection,
                f"ALTER TABLE {q(plan.table)} {', '.join(clauses)}, ALGORITHM=INPLACE, LOCK=NONE",
            )
        mapping.mapping_table(plan).drop(connection, checkfirst=True)

    def unprepare(self, ctx: OnlineContext) -> None:
        """After the swap, before the contract: the old columns refilled where a
        cascade left them behind, their foreign keys back (metadata only), and
        the primary key back on the old key -- online. Their indexes are parked
        by the swap and their ``NOT NULL`` kept where the parent's key is
        ``AUTO_INCREMENT``: then no child is rebuilt, and the one statement
        that may wait for a metadata lock (``metadata_lock_wait``) is the
        parent's rebuild. Otherwise (indexes dropped by an older swap, old
        values nullable) they are built again, online."""
        plan = ctx.plan

        def unnumbered(connection: Connection) -> int:
            return int(
                connection.exec_driver_sql(
                    f"SELECT COUNT(*) FROM {_q(connection, plan.table)}"
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
        down = Sides(plan, up=False)
        for table in plan.affected_tables:
            self._rebuilt_indexes(ctx, plan, table, down)
        for n, ref in references(plan):
            self._foreign_key(ctx, plan, n, ref, down)
            self._backfill_child(ctx, plan, n, ref, down)
        self._child_nulls(ctx, down)
        self._move_primary_key(ctx, down)

    def unswap(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """The old columns take their names and roles back and the UUID columns go
        (metadata only, tables locked); then the mapping table goes."""
        down = Sides(plan, up=False)
        q = partial(_q, connection)

        def work() -> None:
            self._drop_triggers(connection, plan)
            for trigger in plan.new_default.triggers:
                execute_sql(connection, f"DROP TRIGGER IF EXISTS {trigger}")
            self._swap(connection, plan, down)
            # Still under the lock: each of these statements needs its table's
            # metadata lock, which an application writing all the time (a shop
            # then its item, in one transaction) leaves free only for an
            # instant -- too rarely to find one per statement, and a statement
            # waiting for it would make MariaDB roll that transaction back. An
            # unindexed column's DROP is instant (no rebuild).
            for _, ref in references(plan):
                tmp = plan.temp_column(ref.table, ref.column)
                if tmp in _columns(connection, ref.table):
                    execute_sql(
                        connection,
                        f"ALTER TABLE {q(ref.table)} DROP COLUMN {q(tmp)}, ALGORITHM=INSTANT",
                    )
            key_tmp = plan.temp_column(plan.table, plan.column)
            if key_tmp in _columns(connection, plan.table):
                # Its unique index goes with it (dropping an index: no rebuild).
                execute_sql(
                    connection,
                    f"ALTER TABLE {q(plan.table)} DROP COLUMN {q(key_tmp)}, ALGORITHM=NOCOPY",
                )

        self._locked(connection, plan, work)
        mapping.mapping_table(plan).drop(connection, checkfirst=True)
