"""The names of the two versions an online migration serves (``versions=`` option).

From the expand until the contract, an online migration with ``versions``
serves the affected tables in two shapes: *before* (the old keys and
references under their original names) and *after* (the UUIDs under them).
One of them is the base tables, the other a schema of views; a connection
picks its version with ``search_path``. The names are stable: an application
is configured with them once, for the whole migration.
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


def plan_schemas(plan: PkMigrationPlan) -> dict[Version, str] | None:
    """The plan's version schemas, or ``None`` when it serves no versions."""
    prefix = prefix_of(plan.options.versions)
    if prefix is None:
        return None
    return {version: version_schema(prefix, version) for version in VERSIONS}
