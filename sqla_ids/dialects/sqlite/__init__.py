"""SQLite support.

- ``ddl.py`` (DDL and column types)
- ``scanning.py`` (UUID tools)
- ``bench.py`` (insert benchmark)
- ``migration.py`` (key migration)
"""

from sqla_ids.dialects.sqlite.ddl import SQLite

__all__ = ["SQLite"]
