"""MariaDB: the new keys' SQL, shared by the offline mapping and the online backfill.

A key built from a (millisecond, counter) number and the seed's hash
(:func:`key_sql`, :func:`hash_hex_sql`): the offline mapping hashes each row's
ordinal, the online backfill its old key (its mark, see
:mod:`sqla_ids.migration.core.backfill`). With a ``timestamp_column`` both modes
take the numbers from :func:`~sqla_ids.migration.core.mapping.key_numbers`
itself, on the rows read: MariaDB's running ``MAX() OVER (... ROWS UNBOUNDED
PRECEDING)`` reads the whole frame again for every row (0.10 s for 2,000 rows,
1.51 s for 8,000), which made both 9-13 times slower in SQL.

A UUID192 key (``target="uuid192"``) is those 16 bytes and the row's segment's
8 (:func:`stored_key_sql`); the online triggers read the segment from the row
they fire for (:func:`row_segment_sql`), and a parent's key chosen by a child
written before it waits for the parent's segment as a *pending* value
(:data:`PENDING_LENGTH`).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.engine import Dialect

from sqla_ids.dialects.sql import quoter
from sqla_ids.migration.core import analysis, mapping
from sqla_ids.migration.core.model import PkMigrationPlan


def hash_hex_sql(text: str) -> str:
    """The first 14 hex digits of ``SHA2("<seed>:<text>")``: a new key's 56 last bits."""
    return f"SUBSTRING(SHA2(CONCAT(:seed, ':', {text}), 256), 1, 14)"


def key_sql(ms: str, counter: str, hashed: str) -> str:
    """32 hex digits (which native ``UUID`` and ``CHAR(32)`` columns both take) of
    millisecond ``ms``, 18-bit ``counter`` and the seed's bits of ``hashed``
    (:func:`sqla_ids.migration.core.mapping.new_key`)."""
    return (
        f"LOWER(CONCAT(LPAD(HEX({ms}), 12, '0'), '7', LPAD(HEX({counter} >> 6), 3, '0'),"
        f" HEX(128 | ({counter} & 63)), {hash_hex_sql(hashed)}))"
    )


def segment_hex_sql(segment: str) -> str:
    """16 hex digits of a UUID192 segment (an integer SQL expression, 0 to
    2**64-1): its 8 big-endian bytes. ``HEX()`` of an integer writes it as an
    unsigned 64-bit number, so ``BIGINT UNSIGNED`` values past 2**63 keep their
    bits. ``NULL`` stays ``NULL``."""
    return f"LPAD(HEX({segment}), 16, '0')"


def stored_key_sql(plan: PkMigrationPlan, uuid_hex: str, segment: str | None) -> str:
    """The value a new key column holds for ``uuid_hex`` (SQL of 32 hex digits,
    as :func:`key_sql` and ``sqla_ids_uuid7()`` give them): the digits
    themselves for UUIDv7 keys (native ``UUID`` and ``CHAR(32)`` columns take
    them), for UUID192 keys their 16 bytes and ``segment``'s 8 -- none when
    ``segment`` or its value is ``NULL``, as ``UUID192(u, None)`` stores."""
    if not plan.uuid192:
        return uuid_hex
    if segment is None:
        return f"UNHEX({uuid_hex})"
    return f"UNHEX(CONCAT({uuid_hex}, COALESCE({segment_hex_sql(segment)}, '')))"


def append_segment_sql(leading: str, segment: str | None) -> str:
    """A UUID192 key of the 16 bytes ``leading`` (SQL) and ``segment``'s 8 (none
    when ``segment`` or its value is ``NULL``)."""
    if segment is None:
        return leading
    return f"CONCAT({leading}, COALESCE(UNHEX({segment_hex_sql(segment)}), ''))"


def key_hex_sql(plan: PkMigrationPlan, stored: str) -> str:
    """32 hex digits of the UUID in a stored new key (SQL): a native ``UUID``
    column reads with dashes, a ``CHAR(32)`` one without, a UUID192 key is bytes."""
    if plan.uuid192:
        return f"LOWER(HEX(SUBSTRING({stored}, 1, 16)))"
    return f"REPLACE(CAST({stored} AS CHAR), '-', '')"


def placeholder_sql(plan: PkMigrationPlan) -> str:
    """The placeholder default of a new key or reference column while it is
    ``NOT NULL`` and the triggers fill it: an ``INSERT ... SELECT`` leaving out
    a ``NOT NULL`` column without a default is refused before any trigger runs
    (1364, measured on MariaDB 10.11); the triggers replace it. The nil
    UUID's 32 hex digits (native ``UUID`` and ``CHAR(32)`` columns take them);
    for UUID192 keys the empty string -- a length no UUID192 value has."""
    return "''" if plan.uuid192 else "'" + "0" * 32 + "'"


def row_segment_sql(
    dialect: Dialect,
    plan: PkMigrationPlan,
    row: str,
    columns: Iterable[str],
    swapped: bool = False,
) -> str | None:
    """The UUID192 segment of the parent row in a trigger's ``row`` (``NEW``)
    (:func:`sqla_ids.migration.core.mapping.row_segment_sql`): MariaDB has no
    ``NEW.*``, so the one-row relation lists the ``columns`` (the table's, as
    the trigger is created) that the expression mentions."""
    quote = quoter(dialect)
    named = analysis.mentions(plan.options.segment_sql or "", columns, "`")
    fields = ", ".join(f"{row}.{quote(c)} AS {quote(c)}" for c in named) or "1 AS `1`"
    return mapping.row_segment_sql(dialect, plan, row, f"SELECT {fields}", swapped)


#: A parent's key chosen by a child row written before the parent (foreign key
#: checks off: imports, fixtures) when the key has a segment: the parent's
#: segment is not known yet. The byte ``FF`` then the UUID's 16 -- a length no
#: UUID192 value has, and a first byte none has before the year 10889 (a
#: UUIDv7's first 48 bits are its millisecond), so pending values sort after
#: every key and an index on the column finds them by a range
#: (:func:`pending_range_sql`). The parent's insert completes it with its own
#: segment, in the mapping and in the children that took it.
PENDING_LENGTH = 17


def pending_key_sql(uuid_hex: str) -> str:
    """:data:`PENDING_LENGTH` bytes: ``FF`` and the 16 of ``uuid_hex`` (32 hex digits)."""
    return f"CONCAT(X'FF', UNHEX({uuid_hex}))"


def is_pending_sql(value: str) -> str:
    """Whether a stored key (SQL) is a pending one (:func:`pending_key_sql`)."""
    return f"(LENGTH({value}) = {PENDING_LENGTH} AND LEFT({value}, 1) = X'FF')"


def pending_uuid_sql(value: str) -> str:
    """The UUID's 16 bytes in a pending key (SQL)."""
    return f"SUBSTRING({value}, 2, 16)"


def pending_range_sql(column: str) -> str:
    """A range condition holding for every pending value of ``column`` (and no
    key made before the year 10889), which an index on the column reads."""
    return f"{column} >= X'FF'"
