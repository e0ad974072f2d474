"""Connections for the read-only scanning tools."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine, RootTransaction
from sqlalchemy.engine.base import NestedTransaction


@contextmanager
def connection_for(bind: Engine | Connection) -> Iterator[Connection]:
    """Use the caller's connection, or open (and close) one from an engine."""
    if isinstance(bind, Connection):
        yield bind
    else:
        with bind.connect() as connection:
            yield connection


def scan_transaction(connection: Connection) -> RootTransaction | NestedTransaction:
    """A transaction for one scanning statement, to be rolled back afterwards.

    Inside a caller's transaction this is a savepoint, so a statement cancelled
    by its time limit (which aborts the transaction on PostgreSQL) does not
    spoil theirs.
    """
    return connection.begin_nested() if connection.in_transaction() else connection.begin()


def require_sqlite_file(url: URL) -> None:
    """Refuse a SQLite URL whose database file does not exist.

    SQLite creates a missing file on connect, so a typo in the path would
    otherwise scan a new, empty database and report that nothing is there.
    In-memory databases and ``uri=true`` URLs (where the caller chooses the
    open mode) are left alone.
    """
    if url.get_backend_name() != "sqlite":
        return
    database = url.database or ""
    if database in ("", ":memory:") or str(url.query.get("uri", "")).lower() in ("true", "1"):
        return
    path = Path(database)
    if not path.exists():
        raise FileNotFoundError(
            f"SQLite database file {database!r} does not exist (nothing was created);"
            " check the path in the URL: sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    if not path.is_file():
        raise FileNotFoundError(f"SQLite database {database!r} is not a file")


def require_schema(bind: Engine | Connection, schema: str | None) -> None:
    """Refuse a ``schema`` (a database on MariaDB/MySQL) that does not exist.

    Reflecting a missing schema finds no tables, which would read as "nothing
    found" rather than as the typo it is.
    """
    if schema is None:
        return
    with connection_for(bind) as connection:
        inspector = sa.inspect(connection)
        if inspector.has_schema(schema):
            return
        names = sorted(inspector.get_schema_names())
    shown = ", ".join(names[:20]) + (f", … ({len(names)} in all)" if len(names) > 20 else "")
    raise LookupError(f"schema {schema!r} does not exist; the database has: {shown or 'none'}")
