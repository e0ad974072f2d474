"""The preflight on the three databases: every field there, and its statements
are the ones the migration then runs.

Each test plans a migration with :func:`sqla_ids.migration.preflight`,
runs it while capturing every statement sent to the server (SQLAlchemy's
``before_cursor_execute``), and compares the DDL -- in order, text for text --
with the preflight's. The one statement the preflight cannot build before the
expand (MariaDB's ``NOT NULL`` rebuild of a child at the online prepare,
built from the columns the expand adds) is reported as such, and checked to be
the only difference. Names carry quotes, a backtick, spaces and unicode.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids.migration import (
    PreflightReport,
    migrate_pk_to_uuid7,
    preflight,
    restore_pk_from_uuid7,
)
from sqla_ids.migration.core import state
from sqla_ids.migration.core.sizing import DataStep

PARENT = "shop \"s'"
CHILD = "itém`x"
VIEW = "shop view"

# Statements that change the schema (the DDL a dry run shows), as sent to the server;
# not the temporary table of a MariaDB backfill batch (part of the batch's work).
_DDL = re.compile(
    r"\s*(SET STATEMENT .*? FOR )?(?!(CREATE|DROP) TEMPORARY )"
    r"(CREATE|ALTER|DROP|COMMENT|GRANT|REVOKE|LOCK|UNLOCK|DO)\b",
    re.I,
)


def _ddl(statements: list[str], dialect: sa.Dialect) -> list[str]:
    escaped = dialect.paramstyle in ("format", "pyformat")
    found = []
    for sql in statements:
        if _DDL.match(sql):
            found.append((sql.replace("%%", "%") if escaped else sql).strip())
    return found


def _first_runs(statements: list[str]) -> list[str]:
    return list(dict.fromkeys(statements))


def _without_locks_not_taken(statements: list[str]) -> list[str]:
    """MariaDB: a ``LOCK TABLES`` the server did not give in time is released
    (``UNLOCK TABLES`` right after it) before the step is tried again."""
    kept: list[str] = []
    for sql in statements:
        if sql == "UNLOCK TABLES" and kept and kept[-1].startswith("LOCK TABLES "):
            kept.pop()
            continue
        kept.append(sql)
    return kept


@contextmanager
def _captured(engine: Engine) -> Iterator[list[str]]:
    sent: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        sent.append(statement)

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


def _schema(engine: Engine, *, view: bool, text_key: bool = False) -> None:
    """A parent and a child with two references to it (one ``NOT NULL`` and
    ``CASCADE``, one nullable and ``SET NULL``), the key an integer or text."""
    key: sa.types.TypeEngine[Any] = (
        sa.String(20) if text_key else sa.BigInteger().with_variant(sa.Integer, "sqlite")
    )
    metadata = sa.MetaData()
    sa.Table(
        PARENT,
        metadata,
        sa.Column("id", key, primary_key=True, autoincrement=not text_key),
        sa.Column("name", sa.String(40), nullable=False),
    )
    sa.Table(
        CHILD,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column(
            "shop id",
            key,
            sa.ForeignKey(f"{PARENT}.id", ondelete="CASCADE", name="ité fk"),
            nullable=False,
            index=True,
        ),
        sa.Column(
            "other",
            key,
            sa.ForeignKey(f"{PARENT}.id", ondelete="SET NULL", name="other fk"),
            nullable=True,
        ),
        sa.Column("note", sa.String(40)),
    )
    metadata.create_all(engine)

    def ref(n: int) -> Any:
        return f"k{n:03d}" if text_key else n

    with engine.begin() as conn:
        parent, child = metadata.tables[PARENT], metadata.tables[CHILD]
        conn.execute(
            sa.insert(parent),
            [
                {"id": ref(n), "name": f"p{n}"} if text_key else {"name": f"p{n}"}
                for n in range(1, 51)
            ],
        )
        conn.execute(
            sa.insert(child),
            [
                {
                    "id": n,
                    "shop id": ref(1 + n % 50),
                    "other": ref(1 + n % 7) if n % 3 else None,
                    "note": f"c{n}",
                }
                for n in range(1, 121)
            ],
        )
        q = engine.dialect.identifier_preparer.quote
        if view:
            conn.exec_driver_sql(
                f"CREATE VIEW {q(VIEW)} AS SELECT c.{q('shop id')}, c.note FROM {q(CHILD)} c"
            )
        if engine.dialect.name == "postgresql":
            # A user trigger: disabled while the offline rewrite runs, enabled after.
            conn.exec_driver_sql(
                "CREATE FUNCTION sqla_ids_t_noop() RETURNS trigger LANGUAGE plpgsql"
                " AS $$ BEGIN RETURN NEW; END $$"
            )
            conn.exec_driver_sql(
                f"CREATE TRIGGER {q('noop trg')} BEFORE INSERT ON {q(CHILD)}"
                " FOR EACH ROW EXECUTE FUNCTION sqla_ids_t_noop()"
            )


def _check_fields(report: PreflightReport, engine: Engine, mode: str) -> None:
    server = report.server
    assert server.label.split()[0] in ("SQLite", "PostgreSQL", "MariaDB")
    assert server.database_bytes is not None and server.database_bytes > 0
    assert server.free_disk_source  # a figure's source, or why there is none
    assert server.free_disk_bytes is None or server.free_disk_bytes > 0
    assert server.logs and server.settings
    [table] = report.tables
    assert table.mode == mode and not table.refused and table.plan is not None
    assert {s.table: s.rows for s in table.sizes} == {PARENT: 50, CHILD: 120}
    assert {(r.table, r.column) for r in table.plan.references} == {
        (CHILD, "shop id"),
        (CHILD, "other"),
    }
    assert all(s.data_bytes > 0 for s in table.sizes)
    changes = "\n".join(table.changes())
    assert f"rewrite {CHILD}.shop id" in changes
    assert "recreate index" in changes
    estimate = table.estimate
    assert estimate is not None and estimate.mode == mode
    for value in (estimate.seconds, estimate.peak_disk, estimate.kept_disk, estimate.lock_seconds):
        assert 0 < value.low <= value.high
    assert estimate.logs and all(log.bytes.low <= log.bytes.high for log in estimate.logs)
    assert estimate.lock_what and estimate.batch_size > 0
    assert table.recommendation and table.recommended_mode in ("offline", "online")
    phases = [p.phase for p in table.phases]
    if mode == "offline":
        assert phases == ["offline"]
        assert "offline" in table.estimates
    else:
        assert phases == ["expand", "backfill", "prepare", "swap", "contract"]
        assert {"offline", "online"} <= set(table.estimates)
    assert all(p.runs for p in table.phases)
    text = report.describe()
    for word in ("free disk", "estimate", "longest lock", "recommended", "phase"):
        assert word in text
    assert report.to_dict()["tables"][0]["estimates"][mode]["seconds"]


def _run_and_compare(engine: Engine, mode: str, **options: Any) -> PreflightReport:
    online = mode == "online"
    with engine.connect() as conn:
        report = preflight(conn, PARENT, online=online, **options)
        conn.rollback()
    _check_fields(report, engine, mode)
    [table] = report.tables
    expected = _ddl([s.sql for s in table.statements], engine.dialect)
    with _captured(engine) as sent, engine.connect() as conn:
        migrate_pk_to_uuid7(conn, PARENT, online=online, **options)
        conn.commit()
    # A step that met a lock timeout (another session, or on MariaDB the server's
    # purge thread, holding a table's metadata lock for a moment) is built and run
    # again from the catalog: its statements then show up twice. Each statement
    # counts at its first run, on both sides.
    ran = _without_locks_not_taken(_ddl(sent, engine.dialect))
    assert not Counter(expected) - Counter(ran)  # each as often as shown, at least
    got, expected = _first_runs(ran), _first_runs(expected)
    notes = [note for phase in table.phases for note in phase.notes]
    if notes:  # built from the columns the expand adds: only those may differ
        extra = [sql for sql in got if sql not in expected]
        assert len(extra) == len(notes) and all("MODIFY COLUMN" in sql for sql in extra)
        got = [sql for sql in got if sql in expected]
    assert got == expected
    # The data steps (fills, copies, backfills) are listed where they run.
    assert any(isinstance(s, DataStep) for p in table.phases for s in p.steps)
    if not online:  # (the online runs end in the private schema that is dropped)
        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, PARENT)
            conn.commit()
    return report


def test_offline_preflight_statements_are_the_ones_run(private_engine: Engine) -> None:
    _schema(private_engine, view=True)
    report = _run_and_compare(private_engine, "offline", recreate_views=True)
    statements = [s.sql for s in report.tables[0].statements]
    quote = private_engine.dialect.identifier_preparer.quote
    assert any(quote(VIEW) in s and s.lstrip().upper().startswith("CREATE") for s in statements)
    if private_engine.dialect.name == "postgresql":
        assert any("DISABLE TRIGGER" in s for s in statements)
        assert any("ENABLE TRIGGER" in s for s in statements)


@pytest.mark.slow_on("mariadb")  # (MariaDB's offline statements: the test above)
def test_uuid192_preflight_statements_are_the_ones_run(private_engine: Engine) -> None:
    """The same with UUID192 keys: the preflight shows their type and the mapping."""
    _schema(private_engine, view=True)
    report = _run_and_compare(
        private_engine, "offline", recreate_views=True, target="uuid192", segment_sql="7"
    )
    binary = {"postgresql": "BYTEA", "mysql": "VARBINARY(24)", "sqlite": "BLOB"}
    wanted = binary[private_engine.dialect.name]
    assert any(wanted in s.sql for s in report.tables[0].statements)


@pytest.mark.slow
@pytest.mark.parametrize("text_key", [False, True], ids=["integer key", "text key"])
@pytest.mark.parametrize("database", ["postgresql", "mariadb"])
def test_online_preflight_statements_are_the_ones_run(
    database: str, text_key: bool, request: pytest.FixtureRequest
) -> None:
    engine: Engine = request.getfixturevalue(f"{database}_private_engine")
    _schema(engine, view=False, text_key=text_key)
    with engine.begin() as conn:  # there already (another migration's): not created again
        state.state_table.create(conn)
    report = _run_and_compare(engine, "online", batch_size=20)
    [table] = report.tables
    swap = next(p for p in table.phases if p.phase == "swap")
    first = swap.statements[0].sql
    if database == "postgresql":  # one block: no lock waited for while another is held
        assert first.startswith("DO ") and "LOCK TABLE " in first, first
    else:
        assert first.startswith("LOCK TABLES "), first
    if database == "mariadb":  # said, not guessed
        prepare = next(p for p in table.phases if p.phase == "prepare")
        assert any("NOT NULL" in note for note in prepare.notes)


def test_refusals_are_reported_not_raised(engine: Engine) -> None:
    metadata = sa.MetaData()
    sa.Table(
        "pf two keys",
        metadata,
        sa.Column("a", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("b", sa.Integer, primary_key=True, autoincrement=False),
    )
    metadata.create_all(engine)
    try:
        with engine.connect() as conn:
            report = preflight(conn, "pf two keys")
            missing = preflight(conn, "pf no such table")
        [table] = report.tables
        assert report.refused and "primary key of 2 columns" in table.refused[0]
        assert table.sizes and table.sizes[0].rows == 0
        assert "REFUSED" in report.describe()
        assert "does not exist" in missing.tables[0].refused[0]
    finally:
        metadata.drop_all(engine)


def test_online_refusal_names_why_and_recommends_offline(sqlite_engine: Engine) -> None:
    metadata = sa.MetaData()
    sa.Table("pf solo", metadata, sa.Column("id", sa.Integer, primary_key=True))
    metadata.create_all(sqlite_engine)
    try:
        with sqlite_engine.connect() as conn:
            offline = preflight(conn, "pf solo").tables[0]
            online = preflight(conn, "pf solo", online=True).tables[0]
        assert offline.recommended_mode == "offline"
        assert "no online mode" in offline.online_refused[0]
        assert online.refused == online.online_refused and online.refused
        assert not online.phases
    finally:
        metadata.drop_all(sqlite_engine)


def test_alembic_dry_run_logs_the_preflight(
    sqlite_engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    from alembic.operations import Operations
    from alembic.runtime.migration import MigrationContext

    import sqla_ids.alembic  # noqa: F401 - registers the operations

    metadata = sa.MetaData()
    sa.Table("pf dry", metadata, sa.Column("id", sa.Integer, primary_key=True))
    metadata.create_all(sqlite_engine)
    try:
        with sqlite_engine.connect() as conn, caplog.at_level("INFO", "alembic.sqla_ids"):
            op = Operations(MigrationContext.configure(conn))
            op.migrate_pk_to_uuid7("pf dry", dry_run=True)  # type: ignore[attr-defined]
            kind = sa.inspect(conn).get_columns("pf dry")[0]["type"]
        assert isinstance(kind, sa.Integer)  # nothing changed
        assert "dry run of migrate_pk_to_uuid7('pf dry')" in caplog.text
        for part in ("estimate, offline:", "longest lock", "phase offline", "RENAME TO"):
            assert part in caplog.text
    finally:
        metadata.drop_all(sqlite_engine)


def test_a_run_that_does_not_fit_is_warned_about() -> None:
    from sqla_ids.migration.backends.mysql import preflight as mariadb
    from sqla_ids.migration.core.estimate import estimate
    from sqla_ids.migration.core.sizing import LogFacts, ServerFacts, Shape, TableSize

    mb = 1024 * 1024
    tables = (TableSize("p", 1_000_000, 100 * mb, 50 * mb), TableSize("c", 2_000_000, 200 * mb, 0))
    shape = Shape(8, 1_000_000, tables)
    binlog = LogFacts("binary log", retained=True, format="ROW")
    redo = LogFacts("redo log", soft_limit_bytes=96 * mb, soft_limit_name="innodb_log_file_size")
    roomy = ServerFacts("MariaDB", free_disk_bytes=100_000 * mb, logs=(redo, binlog))
    tight = ServerFacts(
        "MariaDB", free_disk_bytes=500 * mb, free_disk_source="here", logs=roomy.logs
    )
    model = mariadb.cost_model(False, roomy)
    assert model is not None
    fits = estimate(model, "offline", shape, roomy)
    assert [w for w in fits.warnings if "does not fit" in w] == []
    # The redo volume far exceeds the ring: extra checkpoints, said.
    assert any("exceeds innodb_log_file_size (96 MB)" in w for w in fits.warnings)
    tight_fit = estimate(model, "offline", shape, tight)
    [warning] = [w for w in tight_fit.warnings if "does not fit" in w]
    assert "the peak extra disk and the binary log" in warning and "500 MB are free" in warning
    # The binary log off: no volume, and it no longer counts against the disk.
    off = ServerFacts("MariaDB", logs=(redo, LogFacts("binary log", enabled=False)))
    assert [log.bytes.high for log in estimate(model, "offline", shape, off).logs][1] == 0


def test_size_settings_are_read_in_bytes() -> None:
    from sqla_ids.migration.core.sizing import setting_bytes

    assert setting_bytes("1024", "MB") == 1024**3
    assert setting_bytes("16", "8kB") == 16 * 8 * 1024
    assert setting_bytes("-1", "MB") is None  # no limit
    assert setting_bytes("300", "s") is None  # not a size
