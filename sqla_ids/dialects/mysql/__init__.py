"""MySQL and MariaDB support.

- ``ddl.py`` (DDL and column types)
- ``scanning.py`` (UUID tools)
- ``bench.py`` (insert benchmark)

The key migration: :mod:`sqla_ids.migration.backends`.
"""

from sqla_ids.dialects.mysql.ddl import MariaDB, MySQL

__all__ = ["MariaDB", "MySQL"]
