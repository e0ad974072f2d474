"""MariaDB: the new keys' SQL, shared by the offline mapping and the online backfill.

A key built from a (millisecond, counter) number and the seed's hash
(:func:`key_sql`, :func:`hash_hex_sql`): the offline mapping hashes each row's
ordinal, the online backfill its old key (its mark, see
:mod:`sqla_ids.migration.core.backfill`). With a ``timestamp_column`` both modes
take the numbers from :func:`~sqla_ids.migration.core.mapping.key_numbers`
itself, on the rows read: MariaDB's running ``MAX() OVER (... ROWS UNBOUNDED
PRECEDING)`` reads the whole frame again for every row (0.10 s for 2,000 rows,
1.51 s for 8,000), which made both 9-13 times slower in SQL.
"""

from __future__ import annotations


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
