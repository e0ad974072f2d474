"""Pure identifier algorithms: UUIDv7, COMB GUIDs, UUID192, encodings.

Nothing in this package imports SQLAlchemy; the column types build on it.

>>> from sqla_ids.identifiers import parse_uuid, to_base32, uuid7, uuid7_batch, uuid7_timestamp_ms
>>> key = uuid7()
>>> key.version, len(to_base32(key)), parse_uuid(to_base32(key)) == key
(7, 26, True)
>>> keys = uuid7_batch(100)
>>> keys == sorted(keys) and key < keys[0]
True
>>> uuid7_timestamp_ms(keys[-1]) >= uuid7_timestamp_ms(key)
True
"""

from sqla_ids.identifiers.clock import Clock, MonotonicClock, system_clock
from sqla_ids.identifiers.comb import (
    CombLayout,
    SequentialAsBinary,
    SequentialAsString,
    SequentialAtEnd,
    SqlServerOrderedGenerator,
    comb_guid,
    comb_timestamp_ms,
    from_sqlserver_order,
    sqlserver_sort_key,
    to_sqlserver_order,
)
from sqla_ids.identifiers.config import ConfigError, generator_from_config
from sqla_ids.identifiers.deterministic import ordered_uuid7s, uuid7_from_timestamp
from sqla_ids.identifiers.encoding import (
    CROCKFORD_ALPHABET,
    UUIDFormatError,
    from_base32,
    parse_uuid,
    to_base32,
    to_bytes,
    to_hex,
)
from sqla_ids.identifiers.generator import (
    UUIDv7Generator,
    default_generator,
    make_uuid,
    uuid7,
    uuid7_batch,
)
from sqla_ids.identifiers.inspection import (
    highest_uuid7,
    is_uuid7,
    lowest_uuid7,
    to_unix_ms,
    uuid7_bounds,
    uuid7_counter,
    uuid7_datetime,
    uuid7_timestamp_ms,
)
from sqla_ids.identifiers.layout import Layout
from sqla_ids.identifiers.partition import (
    MonthPartition,
    bucket_bounds,
    month_partitions,
    partition_bucket,
)
from sqla_ids.identifiers.uuid192 import UUID192, segment_of

__all__ = [
    "CROCKFORD_ALPHABET",
    "UUID192",
    "Clock",
    "CombLayout",
    "ConfigError",
    "Layout",
    "MonotonicClock",
    "MonthPartition",
    "SequentialAsBinary",
    "SequentialAsString",
    "SequentialAtEnd",
    "SqlServerOrderedGenerator",
    "UUIDFormatError",
    "UUIDv7Generator",
    "bucket_bounds",
    "comb_guid",
    "comb_timestamp_ms",
    "default_generator",
    "from_base32",
    "from_sqlserver_order",
    "generator_from_config",
    "highest_uuid7",
    "is_uuid7",
    "lowest_uuid7",
    "make_uuid",
    "month_partitions",
    "ordered_uuid7s",
    "parse_uuid",
    "partition_bucket",
    "segment_of",
    "sqlserver_sort_key",
    "system_clock",
    "to_base32",
    "to_bytes",
    "to_hex",
    "to_sqlserver_order",
    "to_unix_ms",
    "uuid7",
    "uuid7_batch",
    "uuid7_bounds",
    "uuid7_counter",
    "uuid7_datetime",
    "uuid7_from_timestamp",
    "uuid7_timestamp_ms",
]
