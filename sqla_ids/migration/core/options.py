"""The options of a key migration, as one typed object.

The same :class:`PkMigrationOptions` travels from the Alembic operation to the
planner and the runner, is stored with the plan, and is rendered back into a
migration script, so nothing is lost on the way (``reverse()`` included).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


def _pairs(value: Iterable[Iterable[str]]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in value:
        pair = tuple(item)
        if len(pair) != 2 or not all(isinstance(p, str) and p for p in pair):
            raise ValueError(f"extra_references takes (table, column) pairs of names, got {item!r}")
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


@dataclass(frozen=True)
class PkMigrationOptions:
    """How to migrate one table's key to UUIDv7 (every field is optional).

    ``timestamp_column``: a ``created_at``-like column whose values give the
    new keys' timestamps (running maximum in key order), offline and online;
    default: synthesised from the key order.
    ``old_column``: where the old key values stay (default ``<key>_old``).
    ``mapping_table``: the old -> new table (default ``<table>_uuid7_map``).
    ``extra_references``: ``(table, column)`` pairs of plain columns that hold
    the key without a declared foreign key; they are converted too.
    ``batch_size``: rows per batch (progress, MariaDB durability); online, the
    most rows a batch takes (see ``batch_time``).
    ``seed``: makes the new keys reproducible (default: random, stored).
    ``keep_child_old_columns``: keep every referencing column's old values
    in ``<column>_old`` as well.
    ``drop_sequence``: drop the key's sequence (PostgreSQL ``serial``).
    ``server_default``: ``True`` fills new rows' keys on the server with
    UUIDv7 where the database can; an SQL expression string is used as the
    ``DEFAULT`` instead; ``False`` sets none.
    ``recreate_views``: drop the views over affected columns and recreate
    them from their definitions (default: refuse, naming them).
    ``acknowledged_routines``: names of stored functions, procedures and
    triggers that use the migrated columns and that you have checked (or will
    change) for the new key type; the others are refused, by name.

    Online mode (PostgreSQL and MariaDB; see docs/migration.md, "Online
    migration"):
    ``online``: migrate while the application keeps writing -- new columns
    kept in sync by triggers, a batched backfill, indexes and foreign keys
    built without blocking writes, then a short swap.
    ``lock_timeout``: seconds any online DDL may wait for a lock before it
    gives up and retries (so the application's statements never queue
    behind it for longer).
    ``batch_pause``: seconds to sleep between backfill batches.
    ``batch_time``: seconds an online backfill batch should take -- and hold
    its row locks, which an application statement touching one of those rows
    waits for. Batches start at 100 rows (or ``batch_size`` if fewer) and
    follow the measured rate, at most ``batch_size`` rows; ``0``: every batch
    takes ``batch_size`` rows.
    ``nice_ratio``: after each online backfill batch, rest this many times
    the time the batch took (gh-ost's ``--nice-ratio``): ``1`` halves the
    backfill's share of the server's time and I/O, and about doubles its
    duration; ``0``: no rest.
    ``swap_attempts``: how many times a lock-timed-out step is retried, with
    exponential backoff, before the migration stops (resumable).
    ``metadata_lock_wait``: MariaDB only: seconds (whole, at most
    ``lock_timeout``) an online rebuild or index build may wait for its
    metadata lock at its start and end. ``0`` (default): never wait, retry
    instead -- safe with any application, but a rebuild of a large table that
    always has a transaction open on it may never find its moment. Waiting
    lets it finish there, at a price: MariaDB then rolls back (error 1213) an
    application transaction that reads that table and then writes it while
    the rebuild waits -- for a child's rebuild, also one that writes a parent
    and then that child. The online downgrade's only such statement is the
    parent's rebuild.
    ``versions``: PostgreSQL and MariaDB, online only, UUIDv7 target: serve
    two versions of the affected tables (the parent and its children) from
    the expand until the contract, for rolling deploys (docs/migration.md,
    "Rolling deploys"). Before the swap, *after* presents the tables as they
    will be (UUID keys and references under the original names); after it,
    *before* presents them as they were (old keys under the original names).
    PostgreSQL: schemas of simple updatable views, picked with
    ``search_path``; ``True`` names them ``sqla_ids_after``/``sqla_ids_before``,
    a string is the prefix instead (``"shop"``: ``shop_after``/``shop_before``),
    for several applications in one database. MariaDB: databases of views,
    ``<prefix>_after_<database>``/``<prefix>_before_<database>`` (prefix
    ``sqla_ids`` for ``True``). A connection picks its version with
    :func:`sqla_ids.migration.version_connect_args`.

    Target (docs/migration.md, "UUID192 keys"; offline and online):
    ``target``: ``"uuid7"`` (default) makes the key and every reference a
    UUIDv7; ``"uuid192"`` makes them the 192-bit key of
    :class:`~sqla_ids.UUID192Type`: the same UUIDv7 (same order, same old-key
    mapping) in the leading 128 bits, then the row's 64-bit segment. A
    reference takes its parent's whole key.
    ``segment_column``: the migrated table's integer column whose value
    (0 to 2**64-1, never ``NULL``) is each key's segment -- a shard, a tenant,
    a type tag.
    ``segment_sql``: an SQL expression over the migrated table's columns
    giving the segment instead (``"tenant_id * 16 + 3"``, or a constant
    ``"7"``); it is SQL written by the migration's author, like a string
    ``server_default``. With neither, the keys have no segment (16 bytes).
    """

    timestamp_column: str | None = None
    old_column: str | None = None
    mapping_table: str | None = None
    extra_references: tuple[tuple[str, str], ...] = ()
    batch_size: int = 10_000
    seed: str | None = None
    keep_child_old_columns: bool = False
    drop_sequence: bool = False
    server_default: str | bool = True
    recreate_views: bool = False
    acknowledged_routines: tuple[str, ...] = field(default=())
    online: bool = False
    lock_timeout: float = 2.0
    batch_pause: float = 0.0
    batch_time: float = 0.5
    nice_ratio: float = 0.0
    swap_attempts: int = 20
    metadata_lock_wait: float = 0.0
    versions: bool | str = False
    target: str = "uuid7"
    segment_column: str | None = None
    segment_sql: str | None = None

    def __post_init__(self) -> None:
        # Lists are accepted (they read naturally in a migration script) and
        # frozen into tuples, so the options stay hashable and comparable.
        object.__setattr__(self, "extra_references", _pairs(self.extra_references))
        routines = self.acknowledged_routines
        if isinstance(routines, str):
            routines = (routines,)
        object.__setattr__(self, "acknowledged_routines", tuple(routines))
        if self.seed is not None and not isinstance(self.seed, str):
            object.__setattr__(self, "seed", str(self.seed))
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int):
            raise ValueError(f"batch_size must be a whole number, got {self.batch_size!r}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")
        sd = self.server_default
        if not isinstance(sd, str | bool) or sd == "":
            raise ValueError(
                "server_default must be True (UUIDv7 from the server where possible), an SQL"
                f" expression, or False (no default); got {sd!r}"
            )
        for name in ("lock_timeout", "batch_pause", "batch_time", "metadata_lock_wait"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{name} must be a number of seconds >= 0, got {value!r}")
        ratio = self.nice_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 100:
            raise ValueError(f"nice_ratio must be a number from 0 to 100, got {ratio!r}")
        if self.lock_timeout == 0:
            raise ValueError("lock_timeout must be more than 0 seconds (0 means no limit)")
        if self.metadata_lock_wait > self.lock_timeout:
            raise ValueError(
                f"metadata_lock_wait ({self.metadata_lock_wait} s) must not exceed"
                f" lock_timeout ({self.lock_timeout} s)"
            )
        attempts = self.swap_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ValueError(f"swap_attempts must be a whole number >= 1, got {attempts!r}")
        versions = self.versions
        if not isinstance(versions, bool | str) or versions == "" or len(str(versions)) > 56:
            raise ValueError(
                "versions must be True (schemas sqla_ids_after/sqla_ids_before), False, or"
                f" a prefix of at most 56 characters for the schemas' names; got {versions!r}"
            )
        self._check_target()
        for name in ("timestamp_column", "old_column", "mapping_table", "segment_column"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{name} must be a non-empty name, got {value!r}")

    def _check_target(self) -> None:
        """``target`` and its segment options agree (see the class docstring)."""
        if self.target not in TARGETS:
            raise ValueError(
                f"target must be one of {', '.join(map(repr, TARGETS))}, got {self.target!r}"
            )
        segment = self.segment_sql
        if segment is not None and (not isinstance(segment, str) or not segment.strip()):
            raise ValueError(f"segment_sql must be a non-empty SQL expression, got {segment!r}")
        named = [n for n in ("segment_column", "segment_sql") if getattr(self, n) is not None]
        if named and self.target != "uuid192":
            raise ValueError(
                f"{named[0]} gives UUID192 keys their segment: it needs target='uuid192'"
            )
        if len(named) == 2:
            raise ValueError("give the segment by segment_column or by segment_sql, not both")
        if self.target == "uuid192" and self.versions:
            raise ValueError(
                "versions serve UUIDv7 keys only: migrate to UUID192 without versions"
                " (the application switches at the swap), or to UUIDv7 with them"
            )

    def resumed_with(self, current: PkMigrationOptions) -> tuple[PkMigrationOptions, list[str]]:
        """These (recorded) options with ``current``'s :data:`KNOBS`, for a resumed
        run, and what that changed (``"batch_size 10000 -> 97"``). The other
        fields shape the plan and stay as recorded."""
        taken = {name: getattr(current, name) for name in KNOBS}
        changed = [
            f"{name} {getattr(self, name)!r} -> {value!r}"
            for name, value in taken.items()
            if getattr(self, name) != value
        ]
        return dataclasses.replace(self, **taken), changed

    def shape_differences(self, current: PkMigrationOptions) -> list[str]:
        """The fields other than :data:`KNOBS` (and ``online``) where ``current``
        differs from these recorded options: a resumed run cannot apply them."""
        return [
            f.name
            for f in dataclasses.fields(self)
            if f.name not in KNOBS
            and f.name != "online"
            and getattr(self, f.name) != getattr(current, f.name)
            and getattr(current, f.name) != f.default
        ]

    def replace(self, **changes: Any) -> PkMigrationOptions:
        """A copy with ``changes`` applied (unknown names raise ``TypeError``)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The options that differ from the defaults (JSON-serialisable)."""
        default = PkMigrationOptions()
        result: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value != getattr(default, f.name):
                if f.name == "extra_references":
                    value = [list(p) for p in value]
                elif f.name == "acknowledged_routines":
                    value = list(value)
                result[f.name] = value
        return result

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PkMigrationOptions:
        """Rebuild options saved by :meth:`to_dict`."""
        return cls(**dict(data))


#: The key types a migration can make (``target=``).
TARGETS: tuple[str, ...] = ("uuid7", "uuid192")

#: The options that only pace a run (batch sizes, pauses, lock waits): a resumed
#: migration takes them from the run resuming it; the others shape the plan.
KNOBS: tuple[str, ...] = (
    "batch_size",
    "batch_pause",
    "batch_time",
    "nice_ratio",
    "lock_timeout",
    "swap_attempts",
    "metadata_lock_wait",
)


def build_options(
    options: PkMigrationOptions | None, overrides: Mapping[str, Any]
) -> PkMigrationOptions:
    """``options`` (or the defaults) with keyword ``overrides`` applied."""
    base = options if options is not None else PkMigrationOptions()
    if not isinstance(base, PkMigrationOptions):
        raise TypeError(f"options must be a PkMigrationOptions, got {type(base).__name__}")
    try:
        return base.replace(**overrides) if overrides else base
    except TypeError as error:
        known = ", ".join(f.name for f in dataclasses.fields(PkMigrationOptions))
        raise TypeError(f"{error} (known options: {known})") from None
