"""The names of the two versions an online migration serves (``versions=`` option).

From the expand until the contract, an online migration with ``versions``
serves the affected tables in two shapes: *before* (the old keys and
references under their original names) and *after* (the UUIDs under them).
On PostgreSQL one of them is the base tables, the other a schema of views;
a connection picks its version with ``search_path``. On MariaDB both are
databases of views (:func:`version_database`), selected by the
connection's database. The names are stable: an application is configured
with them once, for the whole migration.
"""

from __future__ import annotations

from typing import Literal

from sqla_ids.migration.core.model import PkMigrationPlan

Version = Literal["before", "after"]
VERSIONS: tuple[Version, ...] = ("before", "after")

DEFAULT_PREFIX = "sqla_ids"
"""``versions=True``: the schemas ``sqla_ids_after`` and ``sqla_ids_before``."""


def prefix_of(versions: bool | str) -> str | None:
    """The schemas' prefix an option value names (``None``: no versions served)."""
    if versions is True:
        return DEFAULT_PREFIX
    if isinstance(versions, str) and versions:
        return versions
    return None


def version_schema(prefix: str, version: Version) -> str:
    """The schema of views presenting ``version`` (``<prefix>_after``/``_before``)."""
    if version not in VERSIONS:
        raise ValueError(f"version must be 'before' or 'after', got {version!r}")
    return f"{prefix}_{version}"


MAX_DATABASE_NAME = 64
"""MariaDB's limit on a database's name, in characters."""


def version_database(prefix: str, version: Version, database: str) -> str:
    """MariaDB: the database of views presenting ``version`` of the tables in the
    application's ``database`` (``<prefix>_<version>_<database>``).

    MariaDB's databases are server-wide, so the application's database is in
    the name: two applications (or two test databases) migrating at once on
    one server do not share one.

    >>> version_database("sqla_ids", "after", "shop")
    'sqla_ids_after_shop'
    """
    return f"{version_schema(prefix, version)}_{database}"


def plan_schemas(plan: PkMigrationPlan) -> dict[Version, str] | None:
    """The plan's version schemas, or ``None`` when it serves no versions."""
    prefix = prefix_of(plan.options.versions)
    if prefix is None:
        return None
    return {version: version_schema(prefix, version) for version in VERSIONS}
