"""SQL Server support.

- ``ddl.py`` (DDL and column types)
"""

from sqla_ids.dialects.mssql.ddl import SQLServer

__all__ = ["SQLServer"]
