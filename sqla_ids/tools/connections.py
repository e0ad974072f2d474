"""Connections for the read-only scanning tools."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Connection, Engine, RootTransaction
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
