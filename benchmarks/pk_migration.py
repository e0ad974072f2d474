"""Migrating a bigint key to UUIDv7: sqla_ids against the SQL a careful engineer writes by hand.

The data and the hand-written SQL are those of ``benchmarks/online_migration.py``:
``parent`` (bigint key, unique ``name``) and two children of twice its rows each
(``child_a.parent_id NOT NULL ... ON DELETE CASCADE``, ``child_b.parent_id``
nullable ``ON DELETE SET NULL``, both indexed). For every size of the curve,
each mode runs on a fresh copy, the modes interleaved (round ``r`` starts with
mode ``r``), for several rounds; reported are the median time, the spread
(fastest -- slowest) and the ratio of medians to the hand-written SQL, and the
write-ahead log (PostgreSQL: ``pg_current_wal_lsn()`` before and after) or the
binary log (MariaDB: the sizes ``SHOW BINARY LOGS`` lists, when ``log_bin`` is
on; it cannot be switched on at run time) and InnoDB's redo log
(``Innodb_lsn_current``) each mode wrote. Those counters are the server's: other
sessions writing meanwhile add to them (the load average is printed).

Modes (``--modes``):

* ``hand``: the hand-written conversion, one transaction, no checks;
* ``offline``: ``migrate_pk_to_uuid7`` (mapping table, old keys kept, every check);
* ``online``: ``migrate_pk_to_uuid7(online=True)`` with no application running,
  expand to swap, then the contract (both in the time; the contract alone is
  printed too).

``--profile`` adds where each mode's time goes: every SQL statement timed
(grouped by its first words), and the online runner's DEBUG step timings. Run::

    python benchmarks/pk_migration.py                       # 50k..400k parents, 3 rounds
    python benchmarks/pk_migration.py --sizes 1000000 --rounds 1
    python benchmarks/pk_migration.py --url mysql+pymysql://root@127.0.0.1:3306/test
    python benchmarks/pk_migration.py --quick
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from online_migration import DEFAULT_URL, Database, database_for  # same data, same SQL

from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7
from sqla_ids.tools.report import format_table

MODES = ("hand", "offline", "online")


class Profile:
    """Every statement's time (grouped by its first words) and the online steps'."""

    def __init__(self) -> None:
        self.statements: dict[str, list[float]] = defaultdict(list)
        self.steps: dict[str, list[float]] = defaultdict(list)
        self._started: list[float] = []

    def before(self, *args: Any) -> None:
        self._started.append(time.perf_counter())

    def after(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        took = time.perf_counter() - self._started.pop()
        self.statements[_shape(statement)].append(took)


def _shape(statement: str) -> str:
    """A statement's kind: its first words, names and numbers generalised."""
    text = re.sub(r"\s+", " ", statement.strip())
    text = re.sub(r"'[^']*'", "'?'", text)
    text = re.sub(r"\b\d+\b", "N", text)
    return text[:90]


class _Steps(logging.Handler):
    """The online runner's ``<table>: <step> took <s> s`` DEBUG records."""

    def __init__(self, profile: Profile) -> None:
        super().__init__(logging.DEBUG)
        self.profile = profile

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == "%s: %s took %.3f s" and isinstance(record.args, tuple):
            _table, what, took = record.args
            self.profile.steps[re.sub(r"\d+", "N", str(what))].append(float(took))


def run_once(
    db: Database,
    base: sa.URL,
    mode: str,
    parents: int,
    children: int,
    batch_size: int,
    profile: Profile | None,
) -> dict[str, Any]:
    """One mode on a fresh copy: its seconds and the log bytes it wrote."""
    admin, engine, schema = db.scratch(base)
    try:
        db.load(engine, parents, children)
        db.settle(engine)
        work: Callable[[], dict[str, float]] = {
            "hand": lambda: _hand(db, engine),
            "offline": lambda: _offline(engine, batch_size),
            "online": lambda: _online(engine, batch_size),
        }[mode]
        listeners: list[tuple[str, Any]] = []
        migration_log = logging.getLogger("alembic.sqla_ids.migration")
        handler = _Steps(profile) if profile else None
        if profile:
            listeners = [("before_cursor_execute", profile.before)]
            listeners.append(("after_cursor_execute", profile.after))
            for name, fn in listeners:
                sa.event.listen(engine, name, fn)
            assert handler is not None
            migration_log.addHandler(handler)
            migration_log.setLevel(logging.DEBUG)
        with engine.connect() as conn:
            before = db.log_counters(conn)
        load = os.getloadavg()[0]
        try:
            result = work()
        finally:
            if profile:
                for name, fn in listeners:
                    sa.event.remove(engine, name, fn)
                migration_log.removeHandler(handler)  # type: ignore[arg-type]
        with engine.connect() as conn:
            after = db.log_counters(conn)
        result["load"] = load
        for key, value in before.items():
            if value is not None and after.get(key) is not None:
                result[key] = after[key] - value
        return result
    finally:
        engine.dispose()
        db.drop(admin, schema)
        admin.dispose()


def _hand(db: Database, engine: sa.Engine) -> dict[str, float]:
    started = time.perf_counter()
    with engine.begin() as conn:
        for sql in db.baseline_sql:
            conn.exec_driver_sql(sql)
    return {"seconds": time.perf_counter() - started}


def _offline(engine: sa.Engine, batch_size: int) -> dict[str, float]:
    started = time.perf_counter()
    with engine.connect() as conn:  # its own transactions (one per step on MariaDB)
        migrate_pk_to_uuid7(conn, "parent", PkMigrationOptions(batch_size=batch_size))
        conn.commit()
    return {"seconds": time.perf_counter() - started}


def _online(engine: sa.Engine, batch_size: int) -> dict[str, float]:
    options = PkMigrationOptions(online=True, batch_size=batch_size)
    started = time.perf_counter()
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "parent", options, phase="swap")
    swapped = time.perf_counter()
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "parent", options, phase="contract")
    ended = time.perf_counter()
    return {"seconds": ended - started, "contract": ended - swapped}


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def report(db: Database, results: dict[int, dict[str, list[dict[str, Any]]]], rounds: int) -> str:
    """The curve: per size and mode, median time, spread, ratios to the hand-written SQL."""
    lines = []
    logs = [k for k in ("wal", "binlog", "redo") if _has(results, k)]
    header = ["parents", "mode", "median s", "spread s", "vs hand"]
    for key in logs:
        header += [f"{key} MB", f"{key} vs hand"]
    header.append("load")
    rows = []
    for size, modes in results.items():
        hand = modes.get("hand", [])
        base = _median([r["seconds"] for r in hand])
        for mode, runs in modes.items():
            times = [r["seconds"] for r in runs]
            row: list[Any] = [
                f"{size:,}",
                mode,
                f"{_median(times):.2f}",
                f"{min(times):.2f}-{max(times):.2f}",
                f"{_median(times) / base:.2f}x" if hand else "-",
            ]
            for key in logs:
                mine = _median([r[key] for r in runs if key in r])
                theirs = _median([r[key] for r in hand if key in r])
                row += [f"{mine / 2**20:.1f}", f"{mine / theirs:.2f}x" if theirs else "-"]
            row.append(" ".join(f"{r['load']:.1f}" for r in runs))
            rows.append(row)
    lines.append(
        format_table(
            header,
            rows,
            title=f"{db.name}: parent N rows, child_a and child_b 2N rows each,"
            f" {rounds} round(s), fresh copy per run, modes interleaved",
        )
    )
    online = [r for modes in results.values() for r in modes.get("online", [])]
    if online:
        lines.append(
            "online: the contract alone took "
            + ", ".join(f"{r['contract']:.2f}" for r in online)
            + " s (included above)"
        )
    return "\n".join(lines)


def _has(results: dict[int, dict[str, list[dict[str, Any]]]], key: str) -> bool:
    return any(key in r for modes in results.values() for runs in modes.values() for r in runs)


def profile_report(profiles: dict[str, Profile], top: int) -> str:
    """Where each mode's time went: the costliest statement kinds and online steps."""
    out = []
    for mode, profile in profiles.items():
        rows = sorted(profile.statements.items(), key=lambda kv: -sum(kv[1]))[:top]
        total = sum(sum(v) for v in profile.statements.values())
        out.append(
            format_table(
                ["statement", "count", "s", "share"],
                [[k, len(v), f"{sum(v):.2f}", f"{sum(v) / total:.0%}"] for k, v in rows],
                title=f"{mode}: SQL statements ({total:.2f} s in all)",
            )
        )
        if profile.steps:
            steps = sorted(profile.steps.items(), key=lambda kv: -sum(kv[1]))[:top]
            out.append(
                format_table(
                    ["online step", "count", "s"],
                    [[k, len(v), f"{sum(v):.2f}"] for k, v in steps],
                    title=f"{mode}: the online runner's steps (DEBUG timings)",
                )
            )
    return "\n\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Run the modes over the sizes and print the curve."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL, help="PostgreSQL or MariaDB URL")
    parser.add_argument(
        "--sizes",
        help="parent rows, comma-separated (children: twice each);"
        " default 50000,100000,200000,400000 (--quick: 2000)",
    )
    parser.add_argument("--rounds", type=int, help="rounds per size (3; --quick: 1)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"of {', '.join(MODES)}")
    parser.add_argument(
        "--batch-size",
        type=int,
        default=PkMigrationOptions().batch_size,
        help="sqla_ids batch_size (default: the library's)",
    )
    parser.add_argument("--quick", action="store_true", help="one round of 2,000 parents")
    parser.add_argument("--profile", action="store_true", help="where the time goes, per mode")
    parser.add_argument("--top", type=int, default=12, help="--profile: lines per mode")
    parser.add_argument("--json", help="also write the raw results to this file")
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = "2000" if args.quick else "50000,100000,200000,400000"
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    sizes = [int(s) for s in args.sizes.split(",")]
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}: choose from {', '.join(MODES)}")
    base = sa.make_url(args.url)
    db = database_for(base)
    print(db.describe_logs(base), flush=True)
    results: dict[int, dict[str, list[dict[str, Any]]]] = {}
    profiles: dict[str, Profile] = {m: Profile() for m in modes} if args.profile else {}
    for size in sizes:
        results[size] = {m: [] for m in modes}
        for r in range(args.rounds):
            order = modes[r % len(modes) :] + modes[: r % len(modes)]
            for mode in order:
                run = run_once(db, base, mode, size, 2 * size, args.batch_size, profiles.get(mode))
                results[size][mode].append(run)
                print(
                    f"  {size:,} parents, round {r + 1}, {mode}: {run['seconds']:.2f} s "
                    + " ".join(f"{k} {v / 2**20:.1f} MB" for k, v in run.items() if k in db.logs)
                    + f" (load {run['load']:.2f})",
                    flush=True,
                )
    print()
    print(report(db, results, args.rounds))
    if profiles:
        print()
        print(profile_report(profiles, args.top))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({str(k): v for k, v in results.items()}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
