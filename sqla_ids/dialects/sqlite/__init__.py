"""SQLite support.

- ``ddl.py`` (DDL and column types)
- ``scanning.py`` (UUID tools)
- ``bench.py`` (insert benchmark)

The key migration: :mod:`sqla_ids.migration.backends`.
"""

from sqla_ids.dialects.sqlite.ddl import SQLite

__all__ = ["SQLite"]
