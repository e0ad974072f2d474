"""Primary-key choices under insert load, measured on a real database.

Insert N rows into a fresh two-column table ``(id, n)`` per key kind and
measure the time, the primary-key index size and, on PostgreSQL,
``pgstatindex`` leaf density and fragmentation and the WAL bytes written --
always next to ``bigint`` measured in the same run. Methods: ``core``
(``executemany``) and ``COPY``, where keys made by the client are generated
before the clock starts; ``orm``, where objects of a model declaring the key
as an application would (``uuid7_pk()``, ``uuid7_pk(server_default="serial")``,
…) are built beforehand and ``Session.add_all`` + ``commit`` is timed, keys
made at flush included.

Everything happens in a throw-away schema (PostgreSQL), database
(MariaDB/MySQL) or database file (SQLite) that :func:`scratch_area` creates
and always drops, so the user's tables are never touched. What differs per
database (column DDL, index statistics, ``COPY``, the scratch area) lives in
each database's :class:`~sqla_ids.dialects.bench.Bench`
(``sqla_ids/dialects/<database>/bench.py``).

Used by ``benchmarks/insert_keys.py`` (the full comparison with other
libraries) and by :mod:`sqla_ids.tools.layout_benchmark` (``sqla-ids bench``).
"""

from __future__ import annotations

import gc
import importlib
import multiprocessing
import os
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy import orm
from sqlalchemy.engine import URL, Connection, Dialect, Engine, make_url

from sqla_ids.dialects import for_dialect
from sqla_ids.errors import BenchmarkError
from sqla_ids.identifiers import Layout, UUIDv7Generator, uuid7_batch, uuid7_timestamp_ms
from sqla_ids.identifiers.layout import PRESETS
from sqla_ids.types.defaults import uuid7_pk
from sqla_ids.types.server_functions import (
    UUIDv7ServerDefault,
    install_uuid7_function,
    register_uuid7_function,
    uuid7_serial_supported,
)
from sqla_ids.types.uuid7 import UUIDv7

CHUNK = 10_000
"""Rows per ``executemany`` call of the Core insert."""
METHODS = ("core", "COPY", "orm")
"""Every insert method; ``COPY`` only where the database has it (``Bench.methods``)."""
TABLE = "bench_keys"
"""Name of the benchmark table inside the scratch area."""
RATE_CLOCK_START_MS = 1_750_000_000_000
"""First simulated millisecond of the rows-per-millisecond runs."""


# --- key kinds ------------------------------------------------------------------


_GENERATORS: dict[str, UUIDv7Generator] = {}  # per process, so a writer's keys keep increasing


def _layout_generator(layout: str) -> UUIDv7Generator:
    if layout not in _GENERATORS:
        _GENERATORS[layout] = UUIDv7Generator(PRESETS[layout])
    return _GENERATORS[layout]


def _optional(module: str, attribute: str) -> Callable[[], uuid.UUID] | None:
    try:
        return getattr(importlib.import_module(module), attribute)  # type: ignore[no-any-return]
    except ImportError:
        return None


# Other libraries' UUIDv7, compared when installed: source -> (module, function).
_OTHER_LIBRARIES = {"uuid6": ("uuid6", "uuid7"), "uuid_utils": ("uuid_utils.compat", "uuid7")}


@dataclass(frozen=True)
class Kind:
    """One key choice: the ``id`` column and how its values are made.

    Plain data, so a writer process can receive it. ``column`` is a key of
    :meth:`Bench.key_ddl <sqla_ids.dialects.bench.Bench.key_ddl>`, ``"server"``
    (our ``sqla_ids_uuid7()`` as server default) or ``"serial"`` (``sqla_ids_uuid7_serial()``).
    ``source`` says how the client makes keys: ``server`` (it does not),
    ``uuid4``, ``uuid7``, ``uuid7-text``, ``uuid6``, ``uuid_utils`` or
    ``random-tail``. ``layout`` names a :class:`~sqla_ids.identifiers.Layout`
    preset; ``per_ms`` simulates that many rows in each millisecond
    (``None``: the real clock).
    """

    name: str
    column: str
    source: str = "server"
    layout: str | None = None
    per_ms: int | None = None

    @property
    def ours(self) -> bool:
        """Whether the keys are sqla_ids UUIDv7 values (bound through ``UUIDv7``)."""
        return self.source == "uuid7"

    def keys(self, count: int) -> list[Any] | None:
        """``count`` new keys, or ``None`` when the database makes them."""
        if self.source == "server":  # also the "serial" column: the database makes them
            return None
        if self.source == "uuid4":
            return [uuid.uuid4() for _ in range(count)]
        if self.source == "uuid7" and self.per_ms is not None:
            return keys_at_rate(PRESETS[self.layout or "default"], count, self.per_ms)
        if self.source == "uuid7":
            return (
                uuid7_batch(count)
                if self.layout is None
                else _layout_generator(self.layout).batch(count)
            )
        if self.source == "uuid7-text":
            return [str(u) for u in uuid7_batch(count)]
        if self.source == "random-tail":
            return random_tail_at_rate(count, self.per_ms or 1)
        module, attribute = _OTHER_LIBRARIES[self.source]
        function = _optional(module, attribute)
        if function is None:
            raise ValueError(f"key source {self.source!r} needs the package {module!r}")
        return [function() for _ in range(count)]


def kinds() -> list[Kind]:
    """Every key kind of the full comparison this machine can run."""
    found = [
        Kind("bigint identity", "bigint"),
        Kind("UUIDv4 (client)", "uuid", "uuid4"),
        Kind("UUIDv7 sqla_ids (client)", "uuid", "uuid7"),
        Kind("UUIDv7 sqla_ids (server fn)", "server"),
        Kind("UUIDv7 sqla_ids (serial server fn)", "serial"),
        Kind("gen_random_uuid() (server)", "gen_random_uuid"),
        Kind("UUIDv7 as text (client)", "text", "uuid7-text"),
    ]
    for label, source in (
        ("UUIDv7 uuid6 (client)", "uuid6"),
        ("UUIDv7 uuid_utils (client)", "uuid_utils"),
    ):
        if _optional(*_OTHER_LIBRARIES[source]) is not None:
            found.insert(3, Kind(label, "uuid", source))
    return found


class _SteppedClock:
    """A clock the benchmark moves by hand: one simulated millisecond at a time."""

    def __init__(self, start_ms: int) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now


def keys_at_rate(layout: Layout, count: int, per_ms: int) -> list[uuid.UUID]:
    """``count`` UUIDv7s of ``layout``, ``per_ms`` of them in each simulated millisecond."""
    clock = _SteppedClock(RATE_CLOCK_START_MS)
    generator = UUIDv7Generator(layout, clock=clock)
    values: list[uuid.UUID] = []
    while len(values) < count:
        values += generator.batch(min(per_ms, count - len(values)))
        clock.now += 1
    return values


def clock_drift_ms(keys: Sequence[uuid.UUID], per_ms: int) -> int:
    """How many ms the keys' timestamps ran ahead of the simulated clock, at most.

    A counter that overflows advances the timestamp (docs/uuid7.md, "The bit layout"); a layout
    too small for the rate makes the stored times drift into the future.
    """
    return max(
        (
            uuid7_timestamp_ms(key) - (RATE_CLOCK_START_MS + n // per_ms)
            for n, key in enumerate(keys)
        ),
        default=0,
    )


def random_tail_at_rate(count: int, per_ms: int) -> list[uuid.UUID]:
    """UUIDv7s whose 74 bits after the millisecond are all random (no counter)."""
    version_variant = (0x7 << 76) | (0b10 << 62)
    random_mask = ((1 << 80) - 1) & ~((0xF << 76) | (0b11 << 62))
    values = []
    for n in range(count):
        ms = RATE_CLOCK_START_MS + n // per_ms
        tail = int.from_bytes(os.urandom(10), "big") & random_mask
        values.append(uuid.UUID(int=(ms << 80) | version_variant | tail))
    return values


# --- one measurement --------------------------------------------------------------


@dataclass
class Measure:
    """What one (kind, method) run gave."""

    seconds: float
    index_bytes: int | None
    density: float | None = None
    fragmentation: float | None = None
    wal_bytes: int | None = None
    drift_ms: int | None = None


def create_table(conn: Connection, kind: Kind, table: str = TABLE) -> None:
    """(Re)create the benchmark table with ``kind``'s key column."""
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
    if kind.column in ("server", "serial"):
        # Same DDL as a model column with UUIDv7ServerDefault() (trigger on MariaDB).
        md = sa.MetaData()
        default = UUIDv7ServerDefault(serial=kind.column == "serial")
        sa.Table(
            table,
            md,
            sa.Column("id", UUIDv7(), primary_key=True, server_default=default),
            sa.Column("n", sa.BigInteger, nullable=False),
        )
        md.create_all(conn)
        return
    ddl = for_dialect(conn.dialect).bench().key_ddl(conn.dialect)[kind.column]
    conn.exec_driver_sql(f"CREATE TABLE {table} ({ddl}, n BIGINT NOT NULL)")


def insert_core(
    conn: Connection, kind: Kind, keys: list[Any] | None, rows: int, table: str = TABLE
) -> None:
    """Insert ``rows`` rows by SQLAlchemy Core ``executemany`` in :data:`CHUNK`-row calls.

    The statement is a typed ``insert()``, so each key is bound the way an
    application declaring that column would bind it (ours through ``UUIDv7``).
    """
    if keys is None:
        statement = sa.insert(sa.table(table, sa.column("n", sa.BigInteger())))
        for start in range(0, rows, CHUNK):
            conn.execute(statement, [{"n": n} for n in range(start, min(rows, start + CHUNK))])
        return
    # Our keys go through UUIDv7, whose default storage matches Bench.key_ddl.
    key_type = (
        UUIDv7()
        if kind.ours
        else for_dialect(conn.dialect).bench().key_type(conn.dialect, kind.column)
    )
    statement = sa.insert(
        sa.table(table, sa.column("id", key_type), sa.column("n", sa.BigInteger()))
    )
    for start in range(0, rows, CHUNK):
        conn.execute(
            statement,
            [{"id": keys[n], "n": n} for n in range(start, min(rows, start + CHUNK))],
        )


def insert_copy(conn: Connection, keys: list[Any] | None, rows: int, table: str = TABLE) -> None:
    """Insert ``rows`` rows with the database's bulk-load protocol (PostgreSQL ``COPY``)."""
    for_dialect(conn.dialect).bench().copy(conn, table, keys, rows)


def orm_key_column(kind: Kind, dialect: Dialect) -> orm.MappedColumn[Any] | None:
    """The ``id`` declaration an application would write for ``kind``; ``None``: no ORM form.

    ``bigint``: an integer primary key (identity/auto-increment); ours:
    ``uuid7_pk()`` (client) and ``uuid7_pk(server_default="serial")``; the
    plain server function: ``server_default=UUIDv7ServerDefault()`` without
    a client default; other libraries: their function as ``default``.
    """
    if kind.per_ms is not None or kind.layout is not None:
        return None
    if kind.column == "bigint":
        return orm.mapped_column(sa.BigInteger, primary_key=True)
    if kind.column == "server":
        return orm.mapped_column(UUIDv7(), primary_key=True, server_default=UUIDv7ServerDefault())
    if kind.column == "serial":
        return uuid7_pk(server_default="serial")
    if kind.column != "uuid":
        return None
    if kind.ours:
        return uuid7_pk()
    if kind.source == "uuid4":
        make: Callable[[], uuid.UUID] | None = uuid.uuid4
    else:
        module, attribute = _OTHER_LIBRARIES.get(kind.source, ("", ""))
        make = _optional(module, attribute) if module else None
    if make is None:
        return None
    key_type = for_dialect(dialect).bench().key_type(dialect, "uuid")
    return orm.mapped_column(key_type, primary_key=True, default=make)


def orm_objects(kind: Kind, dialect: Dialect, rows: int, table: str = TABLE) -> list[Any]:
    """``rows`` new objects of a fresh model of ``table`` with ``kind``'s key (no key set)."""
    key = orm_key_column(kind, dialect)
    if key is None:
        raise ValueError(f"key kind {kind.name!r} has no ORM form")

    class Base(orm.DeclarativeBase):
        pass

    model = type(
        "BenchRow",
        (Base,),
        {
            "__tablename__": table,
            "id": key,
            "n": orm.mapped_column(sa.BigInteger, nullable=False),
        },
    )
    orm.configure_mappers()
    return [model(n=n) for n in range(rows)]


def insert_orm(conn: Connection, objects: list[Any]) -> None:
    """``Session.add_all`` + ``commit`` on ``conn``'s transaction (committed by the caller)."""
    with orm.Session(conn) as session:
        session.add_all(objects)
        session.commit()


def measure(
    engine: Engine, kind: Kind, rows: int, method: str = "core", settle: bool = False
) -> Measure:
    """Insert ``rows`` rows with ``kind`` keys by ``method`` and measure the result.

    ``settle``: first let the database write out earlier runs' work, where
    its module knows how (PostgreSQL ``CHECKPOINT``). Off by default: on a
    user's server (``sqla-ids bench``) that is not ours to force.
    """
    pieces = for_dialect(engine.dialect).bench()
    if method not in METHODS:
        raise ValueError(f"unknown insert method {method!r} (choose from {', '.join(METHODS)})")
    # Generated beforehand, outside the timing; ORM objects get their keys at flush.
    objects = orm_objects(kind, engine.dialect, rows) if method == "orm" else None
    keys = None if objects is not None else kind.keys(rows)
    # Pay the garbage collector's debt for those objects now: left pending,
    # a full collection over all of them lands inside the timed insert.
    gc.collect()
    with engine.begin() as conn:
        create_table(conn, kind)
    if settle:
        with engine.begin() as conn:
            pieces.settle(conn)
    with engine.begin() as conn:
        wal_before = pieces.wal_position(conn)
        started = time.perf_counter()
        if objects is not None:
            insert_orm(conn, objects)
        elif method == "COPY":
            insert_copy(conn, keys, rows)
        else:
            insert_core(conn, kind, keys, rows)
    seconds = time.perf_counter() - started
    with engine.begin() as conn:
        wal_after = pieces.wal_position(conn)
        size, density, fragmentation = pieces.index_stats(conn, TABLE)
        conn.exec_driver_sql(f"DROP TABLE {TABLE}")
    wal = None if wal_before is None or wal_after is None else wal_after - wal_before
    drift = None if keys is None or kind.per_ms is None else clock_drift_ms(keys, kind.per_ms)
    return Measure(seconds, size, density, fragmentation, wal, drift)


def _writer(url: str, kind: Kind, rows: int, chunk: int, start_line: Any) -> None:
    engine = sa.create_engine(url)
    register_uuid7_function(engine)  # SQLite's server function lives in the client
    try:
        with engine.connect() as conn:
            kind.keys(1)  # load the key library before the start line
            start_line.wait(_START_TIMEOUT)
            for start in range(0, rows, chunk):
                count = min(chunk, rows - start)
                insert_core(conn, kind, kind.keys(count), count)  # fresh keys, real clock
                conn.commit()
    except BaseException:
        start_line.abort()  # the others (and the parent) stop waiting
        raise
    finally:
        engine.dispose()


_START_TIMEOUT = 120.0  # seconds a writer process may take to start and connect


def measure_concurrent(engine: Engine, url: str, kind: Kind, rows: int, writers: int) -> Measure:
    """``writers`` processes insert ``rows`` rows in total into one table at once.

    Each process commits 1,000-row transactions and makes its keys as it
    goes, with the real clock, like application servers sharing a table.
    The clock starts when every process has connected (a barrier), so
    process start-up is not counted.
    """
    pieces = for_dialect(engine.dialect).bench()
    with engine.begin() as conn:
        create_table(conn, kind)
        wal_before = pieces.wal_position(conn)
    context = multiprocessing.get_context("spawn")
    start_line = context.Barrier(writers + 1)
    processes = [
        context.Process(target=_writer, args=(url, kind, rows // writers, 1_000, start_line))
        for _ in range(writers)
    ]
    for process in processes:
        process.start()
    try:
        start_line.wait(_START_TIMEOUT)
        started = time.perf_counter()
    except threading.BrokenBarrierError:
        started = time.perf_counter()  # a writer failed to start; reported below
    for process in processes:
        process.join()
    seconds = time.perf_counter() - started
    failed = [p.exitcode for p in processes if p.exitcode]
    with engine.begin() as conn:
        wal_after = pieces.wal_position(conn)
        size, density, fragmentation = pieces.index_stats(conn, TABLE)
        conn.exec_driver_sql(f"DROP TABLE {TABLE}")
    wal = None if wal_before is None or wal_after is None else wal_after - wal_before
    if failed or start_line.broken:
        code = failed[0] if failed else "none"
        raise BenchmarkError(f"a writer for {kind.name} failed (exit code {code})")
    return Measure(seconds, size, density, fragmentation, wal)


# --- the scratch area ---------------------------------------------------------------


@dataclass
class Scratch:
    """The throw-away area the benchmark works in."""

    engine: Engine
    url: str
    """URL (with password) of the area, for writer processes."""
    name: str
    server_function_error: str | None = None
    """Why ``sqla_ids_uuid7()`` could not be installed there (``None``: it is)."""
    serial_function: bool = False
    """Whether ``sqla_ids_uuid7_serial()`` is installed there too."""


@contextmanager
def scratch_area(url: URL | str) -> Iterator[Scratch]:
    """An engine on a throw-away schema/database/file, dropped afterwards (also on error).

    Our server function is installed inside it, so it goes with it.
    """
    url = make_url(url)
    pieces = for_dialect(url.get_backend_name()).bench()
    name = f"sqla_ids_bench_{secrets.token_hex(3)}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        scratch_url = pieces.scratch_create(admin, url, name)
        try:
            engine = sa.create_engine(scratch_url)
            register_uuid7_function(engine)
            error = None
            serial = False
            try:
                with engine.begin() as conn:
                    serial = uuid7_serial_supported(conn.dialect)
                    install_uuid7_function(conn, serial=serial)
            except sa.exc.DBAPIError as failure:  # e.g. MariaDB binary log rules
                error, serial = str(failure.orig).strip(), False
            try:
                yield Scratch(
                    engine, scratch_url.render_as_string(hide_password=False), name, error, serial
                )
            finally:
                engine.dispose()
        finally:
            pieces.scratch_drop(admin, url, name)
    finally:
        admin.dispose()


# --- tables of benchmarks/insert_keys.py ----------------------------------------------


class Table(NamedTuple):
    """A result table: title, column names and rows (arguments of ``print_table``)."""

    title: str
    header: list[str]
    rows: list[list[object]]


def _ratio(value: float | None, base: float | None) -> str:
    if value is None or not base:
        return "n/a"
    return f"{value / base:.2f}x"


def _mib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**20:.1f}"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def insert_table(
    label: str, scratch: Scratch, rows: int, methods: Sequence[str], repeat: int = 1
) -> Table:
    """The main table for one database: every kind and method, ratios to ``bigint``.

    With ``repeat`` > 1 the kinds run in interleaved rounds and each keeps its
    fastest round (least disturbed by other work on a shared machine) and
    its smallest WAL volume (WAL is counted server-wide).
    """
    engine = scratch.engine
    columns = for_dialect(engine.dialect).bench().key_ddl(engine.dialect)
    table_rows: list[list[object]] = []
    for method in methods:
        measure(engine, kinds()[0], min(rows, 2_000), method)  # warm-up, not reported
        chosen = [
            kind
            for kind in kinds()
            if (
                (kind.column in columns)
                or (kind.column == "server" and scratch.server_function_error is None)
                or (kind.column == "serial" and scratch.serial_function)
            )
            and (method != "orm" or orm_key_column(kind, engine.dialect) is not None)
        ]
        best: dict[str, Measure] = {}
        for round_ in range(repeat):
            # Each round starts one kind later, so no kind always follows the
            # same neighbour (whose dirty pages the server may still be writing).
            shift = round_ % len(chosen)
            for kind in chosen[shift:] + chosen[:shift]:
                result = measure(engine, kind, rows, method, settle=True)
                previous = best.get(kind.name)
                if previous is not None:
                    result.seconds = min(result.seconds, previous.seconds)
                    if previous.wal_bytes is not None and result.wal_bytes is not None:
                        result.wal_bytes = min(result.wal_bytes, previous.wal_bytes)
                best[kind.name] = result
        baseline = best[chosen[0].name]
        for kind in chosen:
            result = best[kind.name]
            table_rows.append(
                [
                    f"{kind.name} [{method}]",
                    rows / result.seconds,
                    _ratio(result.seconds, baseline.seconds),
                    _mib(result.index_bytes),
                    _ratio(result.index_bytes, baseline.index_bytes),
                    _percent(result.density),
                    _percent(result.fragmentation),
                    _mib(result.wal_bytes),
                    _ratio(result.wal_bytes, baseline.wal_bytes),
                ]
            )
    made = "keys generated beforehand"
    if "orm" in methods:
        made = "core/COPY: keys generated beforehand; orm: add_all + commit, keys made at flush"
    return Table(
        f"{label}: insert {rows:,} rows ({made}; ratios to bigint)",
        [
            "key [method]",
            "rows/s",
            "time",
            "PK MiB",
            "PK size",
            "leaf dens.",
            "leaf frag.",
            "WAL MiB",
            "WAL",
        ],
        table_rows,
    )


def rate_table(label: str, engine: Engine, rows: int, rates: Sequence[int]) -> Table:
    """Leaf density when ``rate`` rows share each millisecond, inserted in order.

    Ours against a UUIDv7 whose bits after the millisecond are random.
    """
    method = "COPY" if "COPY" in for_dialect(engine.dialect).bench().methods else "core"
    table_rows: list[list[object]] = []
    bigint = measure(engine, Kind("bigint", "bigint"), rows, method)
    table_rows.append(["bigint identity", "-", _percent(bigint.density), _mib(bigint.index_bytes)])
    for rate in rates:
        for kind in (
            Kind("UUIDv7 sqla_ids", "uuid", "uuid7", "default", rate),
            Kind("UUIDv7 random after ms", "uuid", "random-tail", None, rate),
        ):
            result = measure(engine, kind, rows, method)
            size = f"{_mib(result.index_bytes)} ({_ratio(result.index_bytes, bigint.index_bytes)})"
            table_rows.append([kind.name, rate, _percent(result.density), size])
    return Table(
        f"{label}: {rows:,} rows, R rows sharing each millisecond ({method}, in order)",
        ["key", "rows/ms", "leaf density", "PK MiB (vs bigint)"],
        table_rows,
    )


def concurrent_table(label: str, scratch: Scratch, rows: int, writers: int) -> Table:
    """``writers`` processes inserting ``rows`` rows in total into one table at once."""
    chosen = [Kind("bigint identity", "bigint"), Kind("UUIDv4 (client)", "uuid", "uuid4")]
    chosen.append(Kind("UUIDv7 sqla_ids (client)", "uuid", "uuid7"))
    if scratch.server_function_error is None:
        chosen.append(Kind("UUIDv7 sqla_ids (server fn)", "server"))
    if scratch.serial_function:
        chosen.append(Kind("UUIDv7 sqla_ids (serial server fn)", "serial"))
    table_rows: list[list[object]] = []
    base_rate = None
    for kind in chosen:
        result = measure_concurrent(scratch.engine, scratch.url, kind, rows, writers)
        rate = rows / result.seconds
        base_rate = base_rate or rate
        table_rows.append(
            [
                kind.name,
                rate,
                f"{rate / base_rate:.2f}x",
                _percent(result.density),
                _mib(result.index_bytes),
            ]
        )
    return Table(
        f"{label}: {writers} processes inserting {rows:,} rows into one table (1,000-row txns)",
        ["key", "rows/s", "vs bigint", "leaf density", "PK MiB"],
        table_rows,
    )
