"""The preflight's estimates against real runs: time, extra disk, log volume, longest lock.

For each database and mode, fresh tables are loaded -- the benchmark's
(``benchmarks/online_migration.py``: a parent and two children of twice its
rows) at a few sizes, and Chinook's ``Track`` table (``tests/data``) -- then
``preflight()`` gives its estimate and the migration runs, measured:

* time: the migration call, wall clock;
* extra disk, peak and kept: the database's files sampled every 0.1 s during the
  run (PostgreSQL ``pg_database_size``; MariaDB the database's directory plus
  ``ibdata1`` and the undo files; SQLite the file and its journal), minus before;
* log volume: PostgreSQL ``pg_current_wal_lsn()`` difference; MariaDB
  ``Innodb_lsn_current`` difference (redo) and ``SHOW BINARY LOGS`` (binary log);
  SQLite the journal's largest size;
* longest lock: offline PostgreSQL and SQLite from the first change to the commit;
  offline MariaDB the longest statement; online the swap's locked transaction.

The WAL, redo and binary log counters are the server's, so run this against
servers nothing else uses (the figures in docs/migration.md come from a
private PostgreSQL cluster and a private MariaDB with ``log_bin`` on). ``--fit``
prints coefficients fitted to the results (least squares through the
estimate model's terms). Run::

    python benchmarks/preflight_calibration.py --pg URL --mariadb URL --sqlite DIR \
        --sizes 20000 100000 300000 --out results.json
    python benchmarks/preflight_calibration.py --fit results.json
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

from online_migration import Database, MariaDB  # noqa: E402

from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, preflight  # noqa: E402
from tests import datasets  # noqa: E402

MB = 1024 * 1024


class Sampler:
    """The largest value ``read()`` returns while the run goes on (every 0.1 s)."""

    def __init__(self, read: Callable[[], int]) -> None:
        self.read = read
        self.peak = read()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, self.read())

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.read())


class Statements:
    """Every statement and commit on an engine, timed (to find the locks)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.events: list[tuple[float, float, int, str]] = []
        self._open: dict[int, tuple[float, str]] = {}

        @sa.event.listens_for(engine, "before_cursor_execute")
        def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            self._open[id(cursor)] = (time.monotonic(), statement)

        @sa.event.listens_for(engine, "after_cursor_execute")
        def after(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            start, sql = self._open.pop(id(cursor), (time.monotonic(), statement))
            self.events.append((start, time.monotonic(), id(conn.connection.dbapi_connection), sql))

        @sa.event.listens_for(engine, "commit")
        def commit(conn: Any) -> None:
            now = time.monotonic()
            self.events.append((now, now, id(conn.connection.dbapi_connection), "COMMIT"))

    def longest_statement(self) -> float:
        return max(
            (end - start for start, end, _, sql in self.events if sql != "COMMIT"), default=0
        )

    def locked(self, opener: str, closer: str) -> float:
        """Longest time from a statement starting with ``opener`` (or a ``DO``
        block running it: PostgreSQL's online steps lock several tables in one)
        to the next ``closer`` (a statement or ``COMMIT``) on the same connection."""
        longest = 0.0
        for i, (start, _end, conn, sql) in enumerate(self.events):
            text = sql.lstrip().upper()
            if not (text.startswith(opener) or (text.startswith("DO ") and opener in text)):
                continue
            for later in self.events[i + 1 :]:
                if later[2] == conn and later[3].lstrip().upper().startswith(closer):
                    longest = max(longest, later[1] - start)
                    break
        return longest

    def first_change_to_commit(self) -> float:
        starts = [
            s for s, _, _, sql in self.events if sql.lstrip().upper().startswith(("ALTER", "DROP"))
        ]
        commits = [s for s, _, _, sql in self.events if sql == "COMMIT"]
        return (max(commits) - min(starts)) if starts and commits else 0.0


# --- per database -----------------------------------------------------------------------


class Target:
    """One server (or SQLite directory) to calibrate on."""

    name = ""
    modes: tuple[str, ...] = ("offline",)

    @contextmanager
    def fresh(self) -> Iterator[sa.Engine]:
        raise NotImplementedError

    def disk(self, engine: sa.Engine) -> int:
        raise NotImplementedError

    def logs(self, engine: sa.Engine) -> dict[str, int]:
        raise NotImplementedError

    def lock(self, mode: str, statements: Statements, seconds: float) -> float:
        raise NotImplementedError

    def settle(self, engine: sa.Engine) -> None:
        """Before measuring the disk (nothing by default)."""

    def load_benchmark(self, engine: sa.Engine, parents: int) -> None:
        raise NotImplementedError


class PostgreSQLTarget(Target):
    name = "postgresql"
    modes = ("offline", "online")

    def __init__(self, url: str) -> None:
        self.base = sa.make_url(url)
        self.db = Database()

    @contextmanager
    def fresh(self) -> Iterator[sa.Engine]:
        admin, engine, schema = self.db.scratch(self.base)
        try:
            yield engine
        finally:
            engine.dispose()
            self.db.drop(admin, schema)
            admin.dispose()

    def disk(self, engine: sa.Engine) -> int:
        with engine.connect() as conn:
            return int(
                conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar_one()
            )

    def settle(self, engine: sa.Engine) -> None:
        # The files of dropped and rewritten tables go at the next checkpoint.
        with engine.connect() as conn:
            conn.exec_driver_sql("CHECKPOINT")

    def logs(self, engine: sa.Engine) -> dict[str, int]:
        with engine.connect() as conn:
            lsn = conn.exec_driver_sql(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')"
            ).scalar_one()
        return {"WAL": int(lsn)}

    def lock(self, mode: str, statements: Statements, seconds: float) -> float:
        if mode == "online":
            return statements.locked("LOCK TABLE", "COMMIT")
        return statements.first_change_to_commit()

    def load_benchmark(self, engine: sa.Engine, parents: int) -> None:
        self.db.load(engine, parents, 2 * parents)


class MariaDBTarget(Target):
    name = "mariadb"
    modes = ("offline", "online")

    def __init__(self, url: str, datadir: str) -> None:
        self.base = sa.make_url(url)
        self.db = MariaDB()
        self.datadir = Path(datadir)
        self.schema = ""

    @contextmanager
    def fresh(self) -> Iterator[sa.Engine]:
        admin, engine, self.schema = self.db.scratch(self.base)
        try:
            yield engine
        finally:
            engine.dispose()
            self.db.drop(admin, self.schema)
            admin.dispose()

    def disk(self, engine: sa.Engine) -> int:
        files = [*(self.datadir / self.schema).glob("*"), *self.datadir.glob("ibdata*")]
        files += [*self.datadir.glob("undo*")]
        total = 0
        for file in files:
            with contextlib.suppress(FileNotFoundError):  # a rebuild's file, gone meanwhile
                total += file.stat().st_size
        return total

    def logs(self, engine: sa.Engine) -> dict[str, int]:
        with engine.connect() as conn:
            lsn = conn.exec_driver_sql("SHOW GLOBAL STATUS LIKE 'Innodb_lsn_current'").one()[1]
            binlogs = conn.exec_driver_sql("SHOW BINARY LOGS").all()
        return {"redo log": int(lsn), "binary log": sum(int(row[1]) for row in binlogs)}

    def lock(self, mode: str, statements: Statements, seconds: float) -> float:
        if mode == "online":
            return statements.locked("LOCK TABLES", "UNLOCK TABLES")
        return statements.longest_statement()

    def load_benchmark(self, engine: sa.Engine, parents: int) -> None:
        self.db.load(engine, parents, 2 * parents)


class SQLiteTarget(Target):
    name = "sqlite"

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory)
        self.file = self.directory / "calibration.sqlite3"

    @contextmanager
    def fresh(self) -> Iterator[sa.Engine]:
        for suffix in ("", "-journal", "-wal"):
            Path(f"{self.file}{suffix}").unlink(missing_ok=True)
        engine = sa.create_engine(f"sqlite:///{self.file}")
        try:
            yield engine
        finally:
            engine.dispose()

    def disk(self, engine: sa.Engine) -> int:
        return self.file.stat().st_size if self.file.exists() else 0

    def journal(self) -> int:
        sizes = [Path(f"{self.file}{s}") for s in ("-journal", "-wal")]
        return sum(p.stat().st_size for p in sizes if p.exists())

    def logs(self, engine: sa.Engine) -> dict[str, int]:
        return {}

    def lock(self, mode: str, statements: Statements, seconds: float) -> float:
        return seconds

    def load_benchmark(self, engine: sa.Engine, parents: int) -> None:
        children = 2 * parents
        with engine.begin() as conn:
            for sql in (
                "CREATE TABLE parent (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
                " note TEXT)",
                "CREATE TABLE child_a (id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL"
                " REFERENCES parent (id) ON DELETE CASCADE, label TEXT NOT NULL UNIQUE)",
                "CREATE TABLE child_b (id INTEGER PRIMARY KEY, parent_id INTEGER"
                " REFERENCES parent (id) ON DELETE SET NULL, body TEXT NOT NULL)",
                "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < :p)"
                " INSERT INTO parent (name) SELECT 'p' || n FROM s",
                "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < :c)"
                " INSERT INTO child_a (parent_id, label)"
                " SELECT 1 + (n * 7919) % :p, 'a' || n FROM s",
                "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < :c)"
                " INSERT INTO child_b (parent_id, body)"
                " SELECT 1 + (n * 104729) % :p, 'b' || n FROM s",
                "CREATE INDEX child_a_parent ON child_a (parent_id)",
                "CREATE INDEX child_b_parent ON child_b (parent_id)",
            ):
                conn.execute(sa.text(sql), {"p": parents, "c": children})


# --- one run ----------------------------------------------------------------------------


def _dataset(target: Target, engine: sa.Engine, dataset: str, parents: int) -> str:
    """Load the tables; the table to migrate."""
    if dataset == "benchmark":
        target.load_benchmark(engine, parents)
        return "parent"
    dialect = "mariadb" if target.name == "mariadb" else target.name
    if dialect == "sqlite":
        datasets.load_sqlite(Path(str(engine.url.database)), datasets.script("chinook", "sqlite"))
    else:
        with engine.begin() as conn:
            datasets.load(conn, "chinook", dialect)
    # Invoice (412 rows) and its InvoiceLine (2,240): the Chinook key both modes take.
    return next(t for t in sa.inspect(engine).get_table_names() if t.lower() == "invoice")


def run(
    target: Target, mode: str, dataset: str, parents: int, options: PkMigrationOptions
) -> dict[str, Any]:
    """Load, estimate, migrate and measure once (with ``options``: the key's target)."""
    with target.fresh() as engine:
        table = _dataset(target, engine, dataset, parents)
        if target.name == "mariadb":
            with engine.connect() as conn:  # InnoDB's sizes come from its statistics
                conn.exec_driver_sql("ANALYZE TABLE " + ", ".join(_tables(engine))).all()
        online = mode == "online"
        with engine.connect() as conn:
            report = preflight(conn, table, dataclasses.replace(options, online=online))
            conn.rollback()
        entry = report.tables[0]
        if entry.refused or entry.estimate is None:
            return {"refused": entry.refused}
        estimate = entry.estimate
        target.settle(engine)
        before_disk, before_logs = target.disk(engine), target.logs(engine)
        statements = Statements(engine)
        journal = Sampler(target.journal) if isinstance(target, SQLiteTarget) else None
        with Sampler(lambda: target.disk(engine)) as disk:
            if journal is not None:
                journal.__enter__()
            started = time.monotonic()
            with engine.connect() as conn:
                migrate_pk_to_uuid7(conn, table, dataclasses.replace(options, online=online))
                conn.commit()
            seconds = time.monotonic() - started
            if journal is not None:
                journal.__exit__()
        after_logs = target.logs(engine)
        target.settle(engine)
        logs = {name: after_logs[name] - before_logs[name] for name in after_logs}
        if journal is not None:
            logs["journal"] = journal.peak
        plan = entry.plan
        assert plan is not None
        return {
            "database": target.name,
            "mode": mode,
            "dataset": (dataset if dataset != "benchmark" else f"benchmark {parents:,}")
            + ("" if plan.new_key_bytes is None else f", {plan.options.target}"),
            "shape": {
                "parent_rows": plan.row_count,
                "new_key_bytes": plan.new_key_bytes,
                "rows": sum(
                    s.rows * sum(1 for t, _ in plan.targets() if t == s.table) for s in entry.sizes
                ),
                "bytes": sum(s.total_bytes for s in entry.sizes),
                "largest": max(s.total_bytes for s in entry.sizes),
            },
            "measured": {
                "seconds": seconds,
                "peak_disk": disk.peak - before_disk,
                "kept_disk": target.disk(engine) - before_disk,
                "logs": logs,
                "lock": target.lock(mode, statements, seconds),
            },
            "estimate": {
                "seconds": [estimate.seconds.low, estimate.seconds.high],
                "peak_disk": [estimate.peak_disk.low, estimate.peak_disk.high],
                "kept_disk": [estimate.kept_disk.low, estimate.kept_disk.high],
                "logs": {
                    log.facts.name: [log.bytes.low, log.bytes.high]
                    for log in estimate.logs
                    if log.facts.enabled
                },
                "lock": [estimate.lock_seconds.low, estimate.lock_seconds.high],
            },
        }


def _tables(engine: sa.Engine) -> list[str]:
    q = engine.dialect.identifier_preparer.quote
    return [q(t) for t in sa.inspect(engine).get_table_names()]


# --- fit and report ---------------------------------------------------------------------


def _ratio(measured: float, estimate: list[float]) -> float:
    middle = (estimate[0] * estimate[1]) ** 0.5 if estimate[0] > 0 else estimate[1]
    return measured / middle if middle else float("nan")


#: The mapping table's bytes per row and the bytes taken whatever the size, chosen
#: from the storage formats (the runs cannot tell them from the rest: a larger
#: parent always comes with larger children here), per database.
MAPPING_ROW = {"postgresql": 110.0, "mariadb": 90.0, "sqlite": 100.0}
DISK_FIXED = {"postgresql": 0.0, "mariadb": 20.0 * MB, "sqlite": 0.0}


def _through_origin(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ``y = a * x``."""
    return sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)


def fit(results: list[dict[str, Any]]) -> None:
    """Least-squares coefficients per database and mode, for the estimate model's terms."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        if "measured" in r:
            groups.setdefault((r["database"], r["mode"]), []).append(r)
    for (database, mode), runs in sorted(groups.items()):
        shape = [r["shape"] for r in runs]
        m = [r["measured"] for r in runs]
        mapping = [s["parent_rows"] * MAPPING_ROW[database] for s in shape]
        fixed = DISK_FIXED[database]
        per_row, seconds_fixed = _line([s["rows"] for s in shape], [x["seconds"] for x in m])
        lines = [
            f"{database} {mode}: seconds_fixed={seconds_fixed:.3f}"
            f" seconds_per_row={per_row * 1e6:.2f}e-6"
        ]
        for key in ("peak_disk", "kept_disk"):
            slope = _through_origin(
                [s["bytes"] for s in shape],
                [x[key] - fixed - mp for x, mp in zip(m, mapping, strict=True)],
            )
            lines.append(f"  {key.replace('_disk', '')}_per_byte={slope:.3f}")
        for name in m[0]["logs"]:
            logged = [x["logs"][name] for x in m]
            both = _through_origin(
                [s["bytes"] + mp for s, mp in zip(shape, mapping, strict=True)], logged
            )
            tables = _through_origin([s["bytes"] for s in shape], logged)
            lines.append(
                f"  {name}: per byte of tables and mapping {both:.3f}; of tables only {tables:.3f}"
            )
        lock_slope, lock_fixed = _line([s["largest"] for s in shape], [x["lock"] for x in m])
        share = _through_origin([x["seconds"] for x in m], [x["lock"] for x in m])
        lines.append(
            f"  lock: share of the run {share:.2f}; or {lock_fixed:.3f} s"
            f" + {lock_slope * MB:.4f} s/MB of the largest table;"
            f" measured {_fmt([x['lock'] for x in m])} s"
        )
        rate = [s["rows"] / x["seconds"] for s, x in zip(shape, m, strict=True)]
        lines.append(f"  rows/s: {_fmt(rate)}")
        print("\n".join(lines))


def _line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    if len(xs) < 2:
        return (ys[0] / xs[0] if xs[0] else 0.0), 0.0
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var
    return slope, mean_y - slope * mean_x


def _fmt(values: list[float]) -> str:
    return ", ".join(f"{v:.3g}" for v in values)


def _logged(measured: dict[str, Any], name: str) -> float:
    """The measured volume of the log the estimate names (SQLite: the journal's peak)."""
    logs: dict[str, float] = measured["logs"]
    return logs.get("journal", 0) if name in ("rollback journal", "WAL file") else logs[name]


def _cell(measured: float, estimate: list[float], unit: Callable[[float], str]) -> str:
    inside = estimate[0] <= measured <= estimate[1]
    return f"{unit(measured)} ({unit(estimate[0])}-{unit(estimate[1])}){'' if inside else ' **'}"


def reestimate(result: dict[str, Any], central: bool = False) -> dict[str, Any]:
    """``result`` with its estimate made again from its shape by the current
    coefficients (to see how they fit runs measured before); ``central``: the
    model's value itself (no error spread, no allowance), for the errors."""
    from sqla_ids.migration.backends import registered
    from sqla_ids.migration.core.estimate import estimate
    from sqla_ids.migration.core.sizing import LogFacts, ServerFacts, Shape, TableSize

    database = {"postgresql": "PostgreSQL", "mariadb": "MariaDB", "sqlite": "SQLite"}
    backend = next(b for d, b in registered().items() if d.label == database[result["database"]])
    shape = result["shape"]
    rest = (shape["bytes"] - shape["largest"]) / 2
    tables = (
        TableSize("a", shape["rows"], shape["largest"], 0),
        TableSize("b", 0, int(rest), 0),
        TableSize("c", 0, int(rest), 0),
    )
    names = {"journal": "rollback journal"}
    logs = tuple(
        LogFacts(names.get(n, n), format="ROW" if n == "binary log" else "")
        for n in result["measured"]["logs"]
    )
    server = ServerFacts("", logs=logs)
    online = result["mode"] == "online"
    model = backend.preflight.cost_model(online, server)
    assert model is not None
    if central:
        model = model.central()
    new = shape.get("new_key_bytes")
    e = estimate(
        model, result["mode"], Shape(8, shape["parent_rows"], tables, new_key_bytes=new), server
    )
    return {
        **result,
        "estimate": {
            "seconds": [e.seconds.low, e.seconds.high],
            "peak_disk": [e.peak_disk.low, e.peak_disk.high],
            "kept_disk": [e.kept_disk.low, e.kept_disk.high],
            "logs": {log.facts.name: [log.bytes.low, log.bytes.high] for log in e.logs},
            "lock": [e.lock_seconds.low, e.lock_seconds.high],
        },
    }


def table(results: list[dict[str, Any]]) -> str:
    """Markdown: measured (estimated range) per run; ** where outside the range."""

    def s(v: float) -> str:
        return f"{v:.1f} s" if v >= 1 else f"{v * 1000:.0f} ms"

    def mb(v: float) -> str:
        return f"{v / MB:.1f}" if abs(v) < 10 * MB else f"{v / MB:.0f}"

    lines = [
        "| database, mode | tables | rows | time | peak extra disk, MB | kept, MB"
        " | log volume, MB | longest lock |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if "measured" not in r:
            continue
        m, e = r["measured"], r["estimate"]
        logs = "; ".join(
            f"{name} {_cell(_logged(m, name), rng, mb)}" for name, rng in e["logs"].items()
        )
        lines.append(
            f"| {r['database']}, {r['mode']} | {r['dataset']} | {r['shape']['rows']:,}"
            f" | {_cell(m['seconds'], e['seconds'], s)}"
            f" | {_cell(m['peak_disk'], e['peak_disk'], mb)}"
            f" | {_cell(m['kept_disk'], e['kept_disk'], mb)}"
            f" | {logs} | {_cell(m['lock'], e['lock'], s)} |"
        )
    return "\n".join(lines)


def errors(results: list[dict[str, Any]]) -> str:
    """Markdown: measured / the model's central value, per quantity (smallest to
    largest over the runs), and how many runs fell inside the estimated range."""
    found: dict[tuple[str, str], dict[str, list[float]]] = {}
    inside: dict[tuple[str, str], dict[str, list[bool]]] = {}
    for r in results:
        if "measured" not in r:
            continue
        m, point, ranged = r["measured"], reestimate(r, central=True)["estimate"], r["estimate"]
        key = (r["database"], r["mode"])
        pairs = [(w, m[w], point[w][0], ranged[w]) for w in ("seconds", "peak_disk", "kept_disk")]
        pairs += [
            (name, _logged(m, name), point["logs"][name][0], ranged["logs"][name])
            for name in ranged["logs"]
        ]
        # Online the lock is the swap's, measured, not modelled: only its range counts.
        lock_point = 0.0 if r["mode"] == "online" else point["lock"][0]
        pairs.append(("lock", m["lock"], lock_point, ranged["lock"]))
        for what, got, expected, span in pairs:
            if what in ("rollback journal", "WAL file") and got == 0:
                continue  # the run ended between two samples of the journal
            if expected > 0 and got > 0:
                found.setdefault(key, {}).setdefault(what, []).append(got / expected)
            inside.setdefault(key, {}).setdefault(what, []).append(span[0] <= got <= span[1])
    names = ["seconds", "peak_disk", "kept_disk", "lock"]
    logs = sorted({w for v in found.values() for w in v} - set(names))
    lines = [
        "| database, mode | " + " | ".join([*names, *logs]) + " |",
        "|---|" + "---|" * (len(names) + len(logs)),
    ]
    for key in sorted(found):
        cells = []
        for what in [*names, *logs]:
            ratios = found[key].get(what)
            hits = inside[key].get(what, [])
            ratio = f"{min(ratios):.2f}-{max(ratios):.2f} " if ratios else ""
            cells.append(f"{ratio}({sum(hits)}/{len(hits)} in range)" if hits else "--")
        lines.append(f"| {key[0]}, {key[1]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", help="PostgreSQL URL (a server nothing else uses)")
    parser.add_argument("--mariadb", help="MariaDB URL (a server nothing else uses)")
    parser.add_argument("--mariadb-datadir", default="/var/lib/mysql", help="its datadir")
    parser.add_argument("--sqlite", help="directory for the SQLite file")
    parser.add_argument("--sizes", type=int, nargs="*", default=[20_000, 100_000, 300_000])
    parser.add_argument("--modes", nargs="*", default=["offline", "online"])
    parser.add_argument("--no-chinook", action="store_true")
    parser.add_argument("--target", default="uuid7", help="uuid7 or uuid192 (the keys made)")
    parser.add_argument(
        "--segment-sql", help="with --target uuid192: the segment expression (e.g. 7)"
    )
    parser.add_argument("--out", help="write the results (JSON) here")
    parser.add_argument("--fit", help="fit coefficients to a results file and print them")
    parser.add_argument("--table", help="print the markdown table of a results file")
    parser.add_argument(
        "--again", action="store_true", help="with --table: estimate again, current coefficients"
    )
    args = parser.parse_args(argv)
    if args.fit or args.table:
        results = json.loads(Path(args.fit or args.table).read_text())
        if args.again:
            results = [reestimate(r) if "measured" in r else r for r in results]
        if args.fit:
            fit(results)
        print(table(results))
        print(errors(results))
        return 0
    targets: list[Target] = []
    if args.sqlite:
        targets.append(SQLiteTarget(args.sqlite))
    if args.pg:
        targets.append(PostgreSQLTarget(args.pg))
    if args.mariadb:
        targets.append(MariaDBTarget(args.mariadb, args.mariadb_datadir))
    results = []
    for target in targets:
        for mode in target.modes:
            if mode not in args.modes:
                continue
            runs = [] if args.no_chinook else [("chinook", 0)]
            runs += [("benchmark", n) for n in args.sizes]
            for dataset, parents in runs:
                options = PkMigrationOptions(target=args.target, segment_sql=args.segment_sql)
                result = run(target, mode, dataset, parents, options)
                results.append(result)
                print(json.dumps(result), flush=True)
                if args.out:
                    Path(args.out).write_text(json.dumps(results, indent=1))
    print(table(results))
    print(errors(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
