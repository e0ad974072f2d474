"""What the databases that speak PostgreSQL's SQL on storage of their own share.

CockroachDB and YugabyteDB take PostgreSQL's SQL (each refusing more or
less of it) but not its storage: rows live in LSM trees split over nodes,
DDL does not roll back with the transaction, and sequences do not hand out
values in call order across connections. So each refuses, by name and with
its own reason: the insert benchmark (PostgreSQL's pages and WAL), the key
migration (one transaction that rolls back on failure) and the serial
UUIDv7 function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from sqla_ids.dialects.postgresql.ddl import PostgreSQL

if TYPE_CHECKING:
    from sqla_ids.dialects.bench import Bench


class PostgreSQLVariant(PostgreSQL):
    """A database speaking PostgreSQL's SQL on distributed storage (not registered)."""

    names: ClassVar[tuple[str, ...]] = ()
    storage: ClassVar[str] = "its own storage"
    """How it stores rows, in the insert benchmark's refusal."""
    ddl_in_transactions: ClassVar[str] = "its DDL does not roll back with the transaction"
    """Why the key migration is refused: what its DDL does in a transaction
    (the migration engine's PostgreSQL backend refuses each variant with it)."""

    def bench(self) -> Bench:
        """Refused: the benchmark measures PostgreSQL's B-tree pages and WAL."""
        self.unsupported(
            "the insert benchmark",
            f"it measures PostgreSQL's B-tree pages and WAL; {self.label} stores rows in "
            f"{self.storage}",
        )

    def uuid7_native_function(self, dialect: Any) -> str | None:
        """None: no ``uuidv7()`` (whatever PostgreSQL version the server reports)."""
        return None

    def uuid7_serial_supported(self, dialect: Any) -> bool:
        """False: see :attr:`~sqla_ids.dialects.Database.uuid7_serial_requires`."""
        return False

    def uuid7_serial_reserve_sql(self, sequence: str) -> tuple[str, str] | None:
        """None: there is no serial function."""
        return None

    def uuid7_serial_function_create_sql(
        self, name: str, sequence: str, schema: str | None = None
    ) -> list[str]:
        """Refused: see :attr:`~sqla_ids.dialects.Database.uuid7_serial_requires`."""
        self.unsupported("the serial UUIDv7 function", f"it needs {self.uuid7_serial_requires}")

    def uuid7_serial_function_drop_sql(
        self, name: str, sequence: str, schema: str | None = None
    ) -> list[str]:
        """Refused: see :attr:`~sqla_ids.dialects.Database.uuid7_serial_requires`."""
        self.unsupported("the serial UUIDv7 function", f"it needs {self.uuid7_serial_requires}")
