"""CockroachDB support (the ``cockroachdb`` dialect of ``sqlalchemy-cockroachdb``).

- ``ddl.py`` (DDL and column types; what is refused, and why)
"""

from sqla_ids.dialects.cockroachdb.ddl import CockroachDB

__all__ = ["CockroachDB"]
