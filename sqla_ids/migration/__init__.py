"""Migrating integer/text primary keys to UUIDv7, keeping every reference and old key.

``plan_pk_migration`` reflects and validates (dry run: ``plan.describe()``),
``migrate_pk_to_uuid7`` carries the plan out and ``restore_pk_from_uuid7``
undoes it. The Alembic operations in :mod:`sqla_ids.alembic.migrate_pk` wrap
these for migration scripts. ``merge_uuids`` makes several ids of one object
one id everywhere.
"""

from sqla_ids.migration.merge import merge_uuids
from sqla_ids.migration.options import PkMigrationOptions
from sqla_ids.migration.plan import (
    DEFAULT_OLD_SUFFIX,
    MAPPING_SUFFIX,
    Dependent,
    PkMigrationPlan,
    Reference,
    View,
    plan_pk_migration,
)
from sqla_ids.migration.runner import (
    migrate_pk_to_uuid7,
    migrate_pks_to_uuid7,
    restore_pk_from_uuid7,
)

__all__ = [
    "DEFAULT_OLD_SUFFIX",
    "MAPPING_SUFFIX",
    "Dependent",
    "PkMigrationOptions",
    "PkMigrationPlan",
    "Reference",
    "View",
    "merge_uuids",
    "migrate_pk_to_uuid7",
    "migrate_pks_to_uuid7",
    "plan_pk_migration",
    "restore_pk_from_uuid7",
]
