"""Migrating integer/text primary keys to UUIDv7, keeping every reference and old key.

``plan_pk_migration`` reflects and validates (``plan.describe()``), ``preflight``
adds each phase's statements, the estimates and the risks (a dry run, see
:mod:`sqla_ids.migration.dry_run`),
``migrate_pk_to_uuid7`` carries the plan out and ``restore_pk_from_uuid7``
undoes it. The Alembic operations in :mod:`sqla_ids.alembic.migrate_pk` wrap
these for migration scripts. ``merge_uuids`` makes several ids of one object
one id everywhere. ``add_uuid7_key`` gives a table without a primary key a
UUIDv7 one (``drop_uuid7_key`` takes it away again). ``version_connect_args``,
``version_search_path`` and ``migration_phase`` point an application at one of
the two versions an online migration with ``versions=True`` serves, and tell a
readiness check where the migration stands (:mod:`sqla_ids.migration.versions`).
"""

from sqla_ids.migration.add_key import add_uuid7_key, drop_uuid7_key, plan_add_uuid7_key
from sqla_ids.migration.core.added_key import AddKeyOptions, AddKeyPlan
from sqla_ids.migration.core.options import PkMigrationOptions
from sqla_ids.migration.dry_run import PreflightReport, TablePreflight, preflight, preflight_many
from sqla_ids.migration.merge import merge_uuids
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
from sqla_ids.migration.versions import (
    migration_phase,
    version_connect_args,
    version_search_path,
)

__all__ = [
    "DEFAULT_OLD_SUFFIX",
    "MAPPING_SUFFIX",
    "AddKeyOptions",
    "AddKeyPlan",
    "Dependent",
    "PkMigrationOptions",
    "PkMigrationPlan",
    "PreflightReport",
    "Reference",
    "TablePreflight",
    "View",
    "add_uuid7_key",
    "drop_uuid7_key",
    "merge_uuids",
    "migrate_pk_to_uuid7",
    "migrate_pks_to_uuid7",
    "migration_phase",
    "plan_add_uuid7_key",
    "plan_pk_migration",
    "preflight",
    "preflight_many",
    "restore_pk_from_uuid7",
    "version_connect_args",
    "version_search_path",
]
