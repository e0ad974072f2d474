"""PostgreSQL: the new keys' SQL, one rule for the offline mapping and the online backfill.

The expressions of :mod:`sqla_ids.migration.core.mapping`'s rule in SQL: a row's
timestamp as a key number (:func:`time_number_sql`), the running maximum that
keeps key numbers from going back (:data:`KEY_NUMBER_SQL`), and the key built from
a number and the seed's hash (:func:`key_sql`). The offline mapping hashes each
row's ordinal, the online backfill its old key (its mark, see
:mod:`sqla_ids.migration.core.backfill`).
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from sqla_ids.migration.core.model import PkMigrationPlan


def time_number_sql(connection: Connection, plan: PkMigrationPlan) -> str:
    """``t``: a row's ``timestamp_column`` value as a key number, ``ms << 18``
    (``NULL`` stays ``NULL``, before 1970: 0), in ``numeric`` as it may pass 2**63.
    ``extract(epoch ...)`` reads a timestamp without time zone or a date as UTC."""
    assert plan.timestamp_column is not None
    col = connection.dialect.identifier_preparer.quote(plan.timestamp_column)
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
