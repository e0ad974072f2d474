"""PostgreSQL: the new keys' SQL, one rule for the offline mapping and the online backfill.

The expressions of :mod:`sqla_ids.migration.core.mapping`'s rule in SQL: a row's
timestamp as a key number (:func:`time_number_sql`), the running maximum that
keeps key numbers from going back (:data:`KEY_NUMBER_SQL`), and the key built from
a number and the seed's hash (:func:`key_sql`). The offline mapping hashes each
row's ordinal, the online backfill its old key (its mark, see
:mod:`sqla_ids.migration.core.backfill`).
"""

from __future__ import annotations

from sqlalchemy.engine import Connection, Dialect

from sqla_ids.dialects.sql import quote_name
from sqla_ids.migration.core import mapping
from sqla_ids.migration.core.model import PkMigrationPlan


def time_number_sql(connection: Connection, plan: PkMigrationPlan) -> str:
    """``t``: a row's ``timestamp_column`` value as a key number, ``ms << 18``
    (``NULL`` stays ``NULL``, before 1970: 0), in ``numeric`` as it may pass 2**63.
    ``extract(epoch ...)`` reads a timestamp without time zone or a date as UTC."""
    assert plan.timestamp_column is not None
    col = quote_name(connection.dialect, plan.timestamp_column)
    return (
        f"CASE WHEN {col} IS NULL THEN NULL"
        f" ELSE GREATEST(floor(extract(epoch FROM {col}) * 1000), 0)::numeric * 262144 END"
    )


#: ``v``, the key number of the row ranked ``r`` (from 1) in key order ``k`` among
#: rows whose numbers ``t`` come from their timestamps, continuing after ``:prev``:
#: :func:`sqla_ids.migration.core.mapping.key_numbers` in SQL, a running ``max()``.
KEY_NUMBER_SQL = (
    "r + GREATEST(CAST(:prev AS numeric), max(t - r) OVER (ORDER BY k ROWS UNBOUNDED PRECEDING))"
)


def hash_hex_sql(text: str) -> str:
    """The first 14 hex digits of ``sha256("<seed>:<text>")``: a new key's 56 last bits."""
    return (
        "substr(encode(sha256(convert_to(CAST(:seed AS text) || ':' || "
        f"{text}, 'UTF8')), 'hex'), 1, 14)"
    )


def key_sql(ms: str, counter: str, hashed: str) -> str:
    """The ``uuid`` of millisecond ``ms``, 18-bit ``counter`` and the seed's bits
    of ``hashed`` (:func:`sqla_ids.migration.core.mapping.new_key`)."""
    return (
        f"CAST(lpad(to_hex({ms}), 12, '0') || '7' || lpad(to_hex({counter} >> 6), 3, '0')"
        f" || to_hex(128 | ({counter} & 63)) || {hash_hex_sql(hashed)} AS uuid)"
    )


#: Millisecond and counter of a ``numeric`` key number ``v``.
NUMBER_PARTS = ("div(v, 262144)::bigint", "mod(v, 262144)::bigint")


def segment_bytes_sql(segment: str) -> str:
    """A UUID192 segment (an integer SQL expression, 0 to 2**64-1) as its 8
    big-endian bytes: ``int8send`` writes a ``bigint``, so a segment past 2**63
    goes as its two's complement. ``NULL`` stays ``NULL``."""
    return (
        f"int8send(CAST(CASE WHEN ({segment}) > 9223372036854775807"
        f" THEN ({segment}) - 18446744073709551616 ELSE ({segment}) END AS bigint))"
    )


def append_segment_sql(leading: str, segment: str | None) -> str:
    """A UUID192 key of the 16 bytes ``leading`` (SQL) and ``segment``'s 8 (none
    when ``segment`` or its value is ``NULL``, as ``UUID192(u, None)`` stores)."""
    if segment is None:
        return leading
    return f"{leading} || COALESCE({segment_bytes_sql(segment)}, ''::bytea)"


def stored_key_sql(plan: PkMigrationPlan, uuid: str, segment: str | None) -> str:
    """The value a new key column holds for the ``uuid`` SQL expression: itself
    for UUIDv7 keys, for UUID192 keys its 16 bytes and ``segment``'s 8."""
    return append_segment_sql(f"uuid_send({uuid})", segment) if plan.uuid192 else uuid


def key_uuid_sql(plan: PkMigrationPlan, stored: str) -> str:
    """The ``uuid`` in a stored new key (SQL): :func:`stored_key_sql` read back."""
    if not plan.uuid192:
        return stored
    return f"CAST(encode(substr({stored}, 1, 16), 'hex') AS uuid)"


def row_segment_sql(
    dialect: Dialect, plan: PkMigrationPlan, row: str, swapped: bool = False
) -> str | None:
    """The UUID192 segment of the parent row in the PL/pgSQL record ``row``
    (:func:`sqla_ids.migration.core.mapping.row_segment_sql`; the row's columns
    are ``row.*``)."""
    return mapping.row_segment_sql(dialect, plan, row, f"SELECT {row}.*", swapped)


#: A parent's key chosen by a child row written before the parent (a deferred
#: foreign key, a replica session) when the key has a segment: the parent's
#: segment is not known yet. Its 16 bytes and one zero byte -- a length no
#: UUID192 value has, so it can be told apart and never passes for a key; the
#: parent's insert completes it with its own segment, in the mapping and in
#: the children that took it (:func:`sync_trigger_statements`).
PENDING_LENGTH = 17


def pending_key_sql(uuid: str) -> str:
    """:data:`PENDING_LENGTH` bytes: the ``uuid``'s 16 and a zero byte."""
    return f"uuid_send({uuid}) || decode('00', 'hex')"
