"""YugabyteDB (YSQL): PostgreSQL's own query layer, with a few things refused by name.

YSQL runs PostgreSQL's parser, PL/pgSQL and catalog on a distributed store,
so sqla_ids' PostgreSQL DDL carries over: the ``uuid`` key, the server-side
UUIDv7 function (a ``DO`` block, ``set_config``, ``gen_random_uuid()``), the
order-number ``SEQUENCE`` with its ``COMMENT`` and ``CHECK``, ``bytea``, and
``PARTITION OF``. Refused, with the reason
(:class:`~sqla_ids.dialects.postgresql.variant.PostgreSQLVariant`): the
serial UUIDv7 function (YSQL caches sequence values per connection), the
insert benchmark and the key migration (each DDL statement is its own
transaction). None of it has been run on a YugabyteDB server
(docs/distributed.md).
"""

from __future__ import annotations

from typing import ClassVar

from sqla_ids.dialects.postgresql.variant import PostgreSQLVariant


class YugabyteDB(PostgreSQLVariant):
    """YugabyteDB's YSQL: PostgreSQL's SQL, sequences cached per connection."""

    names: ClassVar[tuple[str, ...]] = ("yugabytedb",)
    label: ClassVar[str] = "YugabyteDB"
    storage: ClassVar[str] = "LSM-tree tablets"
    ddl_in_transactions: ClassVar[str] = (
        "YugabyteDB runs each DDL statement as its own transaction unless transactional "
        "DDL (ysql_yb_ddl_transaction_block_enabled) is on"
    )
    function_ddl_lock: ClassVar[bool] = False
    """No advisory lock around the function's DDL: YugabyteDB's advisory locks are
    recent (its issue #3642) and older releases raise an error on them. Not run on a
    YugabyteDB server (docs/distributed.md)."""
    uuid7_serial_requires: ClassVar[str] = (
        "a sequence that hands out values in call order across connections; YugabyteDB "
        "caches sequence values per connection (ysql_sequence_cache_minval, 100 by default)"
    )
