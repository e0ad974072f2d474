"""What a test database can do, asked of the code that knows (a test helper).

In the manner of SQLAlchemy's ``testing/requirements.py``, a test states the
capability its expectation rests on -- "has an online mode", "commits each DDL
statement on its own" -- and the answer comes from where the package keeps it:
the migration engine's backend (:func:`sqla_ids.migration.backends.backend_for`:
``online``, ``transactional_ddl``, ``strategy.transactional``,
``view_dependencies``) or the database registry
(:func:`sqla_ids.dialects.for_dialect`: ``function_in_default``), never from a
comparison with a dialect's name. So a backend that gains or loses a
capability moves the tests with it, and a test that needs a capability its
database lacks is skipped with a reason naming the database, the capability
and the attribute that said no::

    import requirements as requires

    requires.online.skip_unless(engine)     # skip: "needs an online mode, which ..."
    if requires.commits_each_ddl(engine):   # a bool, for expectations that differ
        ...

    @pytest.fixture(params=requires.online.databases())   # collection time
    def online_private_engine(request): ...

Choosing the SQL that builds a schema or reads a catalog is not a capability:
that stays a per-database table in the tests (``SCHEMAS`` and
``CURRENT_SCHEMA`` in tests/online_app.py), keyed by :func:`database_name`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from sqlalchemy.engine import URL, Connection, Dialect, Engine

from sqla_ids.dialects import Database, for_dialect
from sqla_ids.migration.backends import MigrationBackend, backend_for

DATABASES = ("sqlite", "postgresql", "mariadb")
"""The test databases (tests/conftest.py has an ``<name>_engine`` fixture for each)."""

Bind = Engine | Connection | Dialect | str
"""What the helpers take: a live engine, connection or dialect, or the name of a
test database (:data:`DATABASES`), for decisions made at collection time."""


def dialect_of(bind: Bind) -> Dialect:
    """``bind``'s dialect, knowing which server it talks to.

    A ``mysql+pymysql://`` engine learns that its server is MariaDB when it
    first connects, so an engine that has not yet connected does so here.
    """
    if isinstance(bind, str):
        if bind not in DATABASES:
            raise ValueError(f"no test database {bind!r} (there are: {', '.join(DATABASES)})")
        return URL.create(bind).get_dialect()()
    if isinstance(bind, Engine) and bind.dialect.server_version_info is None:
        with bind.connect():
            pass
    return bind if isinstance(bind, Dialect) else bind.dialect


def backend(bind: Bind) -> MigrationBackend:
    """The migration engine's backend for ``bind``'s database."""
    return backend_for(dialect_of(bind))


def database(bind: Bind) -> Database:
    """The registry's :class:`~sqla_ids.dialects.Database` for ``bind``'s database."""
    return for_dialect(dialect_of(bind))


def database_name(bind: Bind) -> str:
    """Which test database (:data:`DATABASES`) ``bind`` is on: the key of the
    per-database SQL tables (MariaDB's dialect may be called ``mysql``)."""
    found = database(bind)
    return next(name for name in DATABASES if for_dialect(name) is found)


@dataclass(frozen=True)
class Capability:
    """Something a database can do, as the package says.

    ``what`` names it in a skip's reason ("needs ``what``, which SQLite does not
    have"); ``source`` says where the answer came from, with ``{backend}`` or
    ``{database}`` standing for the class that gave it; ``says`` reads it.
    """

    what: str
    source: str
    says: Callable[[Dialect], bool]

    def __call__(self, bind: Bind) -> bool:
        """Whether ``bind``'s database has it."""
        return self.says(dialect_of(bind))

    def reason(self, bind: Bind) -> str:
        """Why a test needing it does not run on ``bind``'s database."""
        dialect = dialect_of(bind)
        source = self.source.format(
            backend=type(backend_for(dialect)).__name__,
            database=type(for_dialect(dialect)).__name__,
        )
        return f"needs {self.what}, which {for_dialect(dialect).label} does not have ({source})"

    def skip_unless(self, bind: Bind) -> None:
        """Skip the running test, with :meth:`reason`, unless ``bind``'s database has it."""
        if not self(bind):
            pytest.skip(self.reason(bind))

    def databases(self) -> list[str]:
        """The test databases that have it (parameters of a fixture, at collection)."""
        return [name for name in DATABASES if self(name)]


online = Capability(
    "an online mode (the application writes while the key changes)",
    "{backend}.online is None",
    lambda dialect: backend_for(dialect).online is not None,
)
"""The key migration runs online: ``PkMigrationOptions(online=True)``."""

commits_each_ddl = Capability(
    "DDL that commits statement by statement (a step killed half-way stays half done)",
    "{backend}.transactional_ddl is True: its DDL is rolled back with the transaction",
    lambda dialect: not backend_for(dialect).transactional_ddl,
)
"""Each DDL statement commits on its own: a step killed between two of them
leaves the first done (and the next run continues it from the catalog)."""

offline_in_one_transaction = Capability(
    "an offline migration that runs in one transaction",
    "{backend}.strategy.transactional is False: each step is durable and recorded",
    lambda dialect: backend_for(dialect).strategy.transactional,
)
"""An offline run killed part-way leaves nothing behind (no recorded state):
the whole attempt is rolled back."""

view_dependencies = Capability(
    "a catalog of views built on views",
    "{backend}.view_dependencies is False",
    lambda dialect: backend_for(dialect).view_dependencies,
)
"""The planner drops and recreates views over the affected views too."""

function_in_default = Capability(
    "column defaults that call a function",
    "{database}.function_in_default is False: a BEFORE INSERT trigger fills the key",
    lambda dialect: for_dialect(dialect).function_in_default,
)
"""The migrated key's server default calls ``sqla_ids_uuid7()`` itself;
otherwise a ``BEFORE INSERT`` trigger fills it."""
