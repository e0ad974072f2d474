"""YugabyteDB support (the ``yugabytedb`` dialect of ``sqlalchemy-yugabytedb``).

- ``ddl.py`` (DDL and column types; what is refused, and why)
"""

from sqla_ids.dialects.yugabytedb.ddl import YugabyteDB

__all__ = ["YugabyteDB"]
