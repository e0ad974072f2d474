"""CockroachDB: what of PostgreSQL's SQL carries over, and what is refused by name.

CockroachDB speaks PostgreSQL's wire protocol and much of its SQL, but it is
its own database: no PL/pgSQL ``DO`` blocks or per-session settings behind
our UUIDv7 function, no ``COMMENT ON SEQUENCE``, its own ``PARTITION BY``,
and DDL that commits the transaction it runs in. What compiles to SQL it
documents -- a ``UUID`` key made by the client, the order number's
``VARCHAR`` and ``CHECK (… ~ '…')``, ``UUID192Type`` as bytes -- is kept; the
rest raises :class:`~sqla_ids.dialects.UnsupportedDialectError` naming
CockroachDB and the reason. None of it has been run on a CockroachDB server
(docs/distributed.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from sqlalchemy.engine import Connection

from sqla_ids.dialects.postgresql.variant import PostgreSQLVariant

if TYPE_CHECKING:
    from sqla_ids.dialects.order_number_owner import OrderNumberOwner, OwnedSequence


class CockroachDB(PostgreSQLVariant):
    """CockroachDB: native ``UUID`` and ``CHECK`` with ``~``; keys made by the client."""

    names: ClassVar[tuple[str, ...]] = ("cockroachdb",)
    label: ClassVar[str] = "CockroachDB"
    range_partitions: ClassVar[bool] = False
    function_in_default: ClassVar[bool] = False
    storage: ClassVar[str] = "an LSM tree split into ranges"
    ddl_in_transactions: ClassVar[str] = (
        "CockroachDB runs schema changes as background jobs and, from 25.1 on, commits "
        "the open transaction before DDL (autocommit_before_ddl)"
    )
    uuid7_serial_requires: ClassVar[str] = "a server-side UUIDv7 function, which CockroachDB lacks"

    # Why each refused feature is refused (shown in the error).
    _NO_FUNCTION = (
        "CockroachDB has no uuidv7() and sqla_ids' function is PL/pgSQL with per-session "
        "state (a DO block, set_config): let the client make keys, uuid7_pk()"
    )
    _NO_SEQUENCE = (
        "CockroachDB has no COMMENT ON SEQUENCE, where sqla_ids records the tables a "
        "sequence numbers: use FormattedOrderNumber without sequence= and assign "
        "numbers with OrderNumberCodec.encode"
    )

    def _no_function(self) -> NoReturn:
        self.unsupported("the server-side UUIDv7 function", self._NO_FUNCTION)

    def _no_sequence(self) -> NoReturn:
        self.unsupported("order-number sequences", self._NO_SEQUENCE)

    # --- UUIDv7 in SQL ----------------------------------------------------------------

    def uuid7_timestamp_ms_sql(self, inner: str) -> str:
        """Refused: PostgreSQL's ``bit(48)`` cast of hex text is not CockroachDB's."""
        self.unsupported(
            "reading a UUIDv7's timestamp in SQL",
            "the PostgreSQL expression casts hex text to bit(48); not run on CockroachDB",
        )

    def uuid7_month_partition_sql(
        self, table: str, schema: str | None, name: str, low: Any, high: Any
    ) -> str:
        """Refused: CockroachDB's ``PARTITION BY`` is its own syntax."""
        self.unsupported(
            "UUIDv7 range partitions",
            "CockroachDB has no PARTITION OF; its PARTITION BY places rows in regions",
        )

    # --- server-side UUIDv7 function -------------------------------------------------

    def uuid7_function_create_sql(self, name: str, schema: str | None = None) -> list[str]:
        """Refused: see :attr:`_NO_FUNCTION`."""
        self._no_function()

    def uuid7_function_drop_sql(self, name: str, schema: str | None = None) -> list[str]:
        """Refused: see :attr:`_NO_FUNCTION`."""
        self._no_function()

    def uuid7_column_default_sql(self, name: str) -> str:
        """Refused: see :attr:`_NO_FUNCTION`."""
        self._no_function()

    def uuid7_reserve_ticks_sql(self) -> str | None:
        """None: there is no function whose state could be reserved."""
        return None

    # --- order numbers ------------------------------------------------------------
    # The column and its CHECK (``~``, a regular expression CockroachDB's RE2
    # reads as PostgreSQL does) are PostgreSQL's; the sequence is refused.

    def order_number_create_sequence(
        self,
        connection: Connection,
        name: str,
        schema: str | None,
        owner: OrderNumberOwner | None = None,
    ) -> None:
        """Refused: see :attr:`_NO_SEQUENCE`."""
        self._no_sequence()

    def order_number_sequences(
        self, connection: Connection, schema: str | None
    ) -> list[OwnedSequence]:
        """Refused: see :attr:`_NO_SEQUENCE`."""
        self._no_sequence()

    def order_number_drop_sequence(
        self, connection: Connection, name: str, schema: str | None
    ) -> None:
        """Refused: see :attr:`_NO_SEQUENCE`."""
        self._no_sequence()

    def order_number_next_value(self, connection: Connection, name: str, schema: str | None) -> int:
        """Refused: see :attr:`_NO_SEQUENCE`."""
        self._no_sequence()
