"""Exception types shared by every layer of the package.

All of them derive from ``ValueError`` where they describe bad input, so
callers who only know the standard library can still catch them.
"""

from __future__ import annotations

__all__ = [
    "BenchmarkError",
    "CommandError",
    "LockTimeoutError",
    "MigrationRefusedError",
    "MigrationVerificationError",
    "SqlaIdsError",
]


class SqlaIdsError(Exception):
    """Base class of every error raised by sqla_ids."""


class CommandError(SqlaIdsError):
    """A command-line invocation that cannot proceed; the message is shown to the user."""


class MigrationRefusedError(SqlaIdsError, ValueError):
    """A key migration cannot be done safely; raised before anything is changed."""


class MigrationVerificationError(SqlaIdsError):
    """A key migration's verification found a lost row or relationship; work was stopped."""


class LockTimeoutError(SqlaIdsError):
    """An online migration step did not get its locks within ``lock_timeout`` in any
    of its attempts; it changed nothing, and running the migration again continues."""


class BenchmarkError(SqlaIdsError):
    """A benchmark run failed on the database (e.g. a writer process died)."""
