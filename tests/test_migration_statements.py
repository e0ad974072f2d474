"""The online steps' statements, built from a plan and a catalog, without a server.

The swap, the contract and the undos return the statements they will run
(sqla_ids.migration.backends.*.online): these tests check those lists as a
dry run would print them -- every name quoted, every value a literal, the
order that keeps each relationship enforced, and (MariaDB, whose DDL commits
statement by statement) what a step killed half-way still has to do.
"""

from __future__ import annotations

import re

from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.engine import Dialect

from sqla_ids.migration.backends.mysql import online as mariadb
from sqla_ids.migration.backends.postgresql import online as pg
from sqla_ids.migration.core.model import (
    ColumnDefinition,
    Dependent,
    OldKeyDefault,
    PkMigrationPlan,
    Reference,
    View,
)
from sqla_ids.migration.core.names import object_name
from sqla_ids.migration.core.options import PkMigrationOptions

PARENT = "shop \"s'"  # a double quote, a quote, a space
CHILD = "itém`x"  # unicode and a backtick


def _plan(self_reference: bool = False) -> PkMigrationPlan:
    references = [
        Reference(CHILD, "shop_id", False, "bigint", "item_shop_fk", ["shop_id"], ["id"]),
    ]
    dependents = [Dependent(CHILD, "ix_item_shop", "index", ["shop_id"])]
    columns = [
        ColumnDefinition(PARENT, "id", "`id` bigint(20) NOT NULL AUTO_INCREMENT", None),
        ColumnDefinition(CHILD, "shop_id", "`shop_id` bigint(20) NOT NULL", "id"),
    ]
    if self_reference:
        references.append(
            Reference(PARENT, "parent_id", True, "bigint", "shop_parent_fk", ["parent_id"], ["id"])
        )
        dependents.append(Dependent(PARENT, "ix_shop_parent", "index", ["parent_id"]))
        # An index on the key itself: renamed with the parent, not again with its
        # self-reference (same table, built from what the catalog shows by then).
        dependents.append(Dependent(PARENT, "uq_shop_id", "unique", ["id"]))
        columns.append(
            ColumnDefinition(PARENT, "parent_id", "`parent_id` bigint(20) DEFAULT NULL", "id")
        )
    return PkMigrationPlan(
        dialect="postgresql",
        table=PARENT,
        column="id",
        pk_name="shop_pkey",
        key_kind="integer",
        key_type_sql="bigint",
        old_column="id_old",
        mapping_table=f"{PARENT}_uuid7_map",
        row_count=3,
        references=references,
        dependents=dependents,
        default=OldKeyDefault("auto_increment", counter=4),
        columns=columns,
        options=PkMigrationOptions(online=True),
    )


def _postgresql(version: tuple[int, ...]) -> Dialect:
    dialect = postgresql.psycopg.dialect()
    dialect.server_version_info = version
    # What connecting to the server sets (standard_conforming_strings = on, every
    # supported version's default): a backslash in a literal stays one.
    # SQLAlchemy 2.0's dialect assumes the opposite until it connects.
    dialect._backslash_escapes = False  # type: ignore[attr-defined]
    return dialect


def _mariadb() -> Dialect:
    dialect = mysql.pymysql.dialect()
    dialect.is_mariadb = True
    dialect.server_version_info = (10, 11, 19)
    return dialect


def _sql(statements: list[object]) -> list[str]:
    return [str(s) for s in statements]


# --- PostgreSQL ---------------------------------------------------------------------


def test_postgresql_swap_renames_in_one_order_quoting_every_name() -> None:
    plan = _plan()
    tmp = plan.temp_column(PARENT, "id")
    catalog = pg.Catalog(
        tables={PARENT, CHILD},
        comments={(PARENT, "id"): "the key's \\ comment", (CHILD, "shop_id"): None},
        grants={(PARENT, "id"): [("reader", "SELECT", False)]},
    )
    dialect = _postgresql((15, 4))
    q = dialect.identifier_preparer.quote
    sql = _sql(pg.swap_statements(dialect, plan, catalog))
    parent = '"shop ""s\'"'
    assert q(PARENT) == parent
    assert sql[0] == f"GRANT SELECT ({q(tmp)}) ON {parent} TO reader"
    assert sql.index('ALTER TABLE "itém`x" DROP CONSTRAINT item_shop_fk') < sql.index(
        f"ALTER TABLE {parent} DROP CONSTRAINT shop_pkey"
    )
    assert f"ALTER TABLE {parent} RENAME COLUMN id TO id_old" in sql
    assert f"ALTER TABLE {parent} RENAME COLUMN {q(tmp)} TO id" in sql
    # Values are literals, escaped by SQLAlchemy (a quote doubled, a backslash kept).
    assert f"COMMENT ON COLUMN {parent}.id IS 'the key''s \\ comment'" in sql
    assert 'COMMENT ON COLUMN "itém`x".shop_id IS NULL' in sql
    # The foreign key built at the prepare takes the original's name.
    fk = object_name(plan, "fk", 1)
    assert f'ALTER TABLE "itém`x" RENAME CONSTRAINT {fk} TO item_shop_fk' in sql
    # Triggers turned round last: the old columns follow the new ones, in every
    # session (replicas' included).
    assert sql[-3].startswith("CREATE TRIGGER ") and "AFTER INSERT OR DELETE" in sql[-3]
    assert sql[-1].startswith(f"ALTER TABLE {parent} ENABLE ALWAYS TRIGGER ")
    assert [s for s in sql if "NEW.id_old" in s]
    assert not [s for s in sql if s.startswith("DO ")]  # before PostgreSQL 18


def _views() -> list[View]:
    """A view over the key, a view over that one, a materialized view: bases first."""
    base = View("v k", "id", 'CREATE VIEW s."v k" AS SELECT id', 'DROP VIEW IF EXISTS s."v k"')
    base.label, base.after_sql = 's."v k"', ["COMMENT ON VIEW s.\"v k\" IS 'c'"]
    over = View("w", "view", 'CREATE VIEW s.w AS SELECT id FROM s."v k"', "DROP VIEW IF EXISTS s.w")
    over.label = "s.w"
    mv = View(
        "m",
        "id",
        "CREATE MATERIALIZED VIEW s.m AS SELECT id WITH NO DATA",
        "DROP MATERIALIZED VIEW IF EXISTS s.m",
        ["CREATE UNIQUE INDEX i ON s.m (id)", "REFRESH MATERIALIZED VIEW s.m"],
        "s.m",
    )
    return [base, mv, over]


def test_postgresql_swap_and_its_undo_recreate_the_views_in_their_transaction() -> None:
    """The views go first (those over others before them) and come back last, over
    the columns that have the names then; the lock takes the plain views before
    the tables (their readers lock them in that order)."""
    plan = _plan()
    catalog = pg.Catalog(tables={PARENT, CHILD}, views=_views())
    dialect = _postgresql((15, 4))
    for sql in (
        _sql(pg.swap_statements(dialect, plan, catalog)),
        _sql(pg.unswap_statements(dialect, plan, catalog)),
    ):
        assert sql[:3] == [
            "DROP VIEW IF EXISTS s.w",
            "DROP MATERIALIZED VIEW IF EXISTS s.m",
            'DROP VIEW IF EXISTS s."v k"',
        ]
        assert sql[-6:] == [
            'CREATE VIEW s."v k" AS SELECT id',
            "COMMENT ON VIEW s.\"v k\" IS 'c'",
            "CREATE MATERIALIZED VIEW s.m AS SELECT id WITH NO DATA",
            "CREATE UNIQUE INDEX i ON s.m (id)",
            "REFRESH MATERIALIZED VIEW s.m",
            'CREATE VIEW s.w AS SELECT id FROM s."v k"',
        ]
    lock = str(pg.lock_statement(dialect, plan, catalog.views))
    # Views before the tables, bases after the views over them; names reach the
    # block as literals (one waited for at a time, the others taken NOWAIT).
    parent = dialect.identifier_preparer.quote(PARENT).replace("'", "''")
    assert lock.startswith("DO $")
    assert f"""ARRAY['s.w', 's."v k"', '"itém`x"', '{parent}']""" in lock
    assert "IN ACCESS EXCLUSIVE MODE NOWAIT" in lock
    assert "WHEN lock_not_available" in lock


def test_postgresql_18_swap_hands_the_not_null_names_over_on_the_server() -> None:
    plan = _plan()
    catalog = pg.Catalog(tables={PARENT, CHILD})
    blocks = [
        s for s in _sql(pg.swap_statements(_postgresql((18, 0)), plan, catalog)) if s[:3] == "DO "
    ]
    assert len(blocks) == 2  # the key, and the NOT NULL reference
    # Names reach the block as literals, used through format('%I').
    assert "to_regclass('\"shop \"\"s''\"')" in blocks[0]
    assert "a.attname = 'id_old'" in blocks[0]
    assert "%I" in blocks[0] and "EXECUTE format(" in blocks[0]


def test_postgresql_undo_of_the_swap_drops_what_the_migration_added() -> None:
    plan = _plan()
    sql = _sql(pg.unswap_statements(_postgresql((15, 4)), plan, pg.Catalog(tables={PARENT, CHILD})))
    q = _postgresql((15, 4)).identifier_preparer.quote
    key_tmp, tmp_child = plan.temp_column(PARENT, "id"), plan.temp_column(CHILD, "shop_id")
    assert f"ALTER TABLE {q(PARENT)} RENAME COLUMN id TO {q(key_tmp)}" in sql
    assert f'ALTER TABLE "itém`x" DROP COLUMN {q(tmp_child)}' in sql
    assert sql[-1] == 'DROP TABLE IF EXISTS "shop ""s\'_uuid7_map"'


def test_postgresql_abort_skips_the_triggers_of_a_table_that_is_gone() -> None:
    plan = _plan()
    sql = _sql(pg.abort_statements(_postgresql((15, 4)), plan, pg.Catalog(tables={PARENT})))
    assert not [s for s in sql if "DROP TRIGGER" in s and "itém" in s]
    assert [s for s in sql if "DROP TRIGGER" in s and "shop" in s]


# --- MariaDB ------------------------------------------------------------------------


def _prepared(plan: PkMigrationPlan) -> mariadb.Catalog:
    """The catalog at the end of the prepare: new columns, indexes and foreign keys."""
    catalog = mariadb.Catalog(mapping=True)
    key_tmp = plan.temp_column(PARENT, "id")
    catalog.columns[PARENT] = {"id": False, key_tmp: False}
    catalog.indexes[PARENT] = {"PRIMARY": [key_tmp], "id_old": ["id"]}
    catalog.foreign_keys[PARENT] = set()
    catalog.columns.setdefault(CHILD, {})
    catalog.indexes.setdefault(CHILD, {})
    catalog.foreign_keys.setdefault(CHILD, set())
    for number, ref in enumerate(plan.references, start=1):
        tmp = plan.temp_column(ref.table, ref.column)
        catalog.columns[ref.table].update({ref.column: ref.nullable, tmp: ref.nullable})
        catalog.foreign_keys[ref.table] |= {ref.constraint or "", object_name(plan, "fk", number)}
    for number, dep in enumerate(plan.dependents):
        catalog.indexes[dep.table][dep.name] = list(dep.columns)
        new = [plan.temp_column(dep.table, c) for c in dep.columns]
        catalog.indexes[dep.table][object_name(plan, "ix", number)] = new
    return catalog


def test_mariadb_swap_keeps_every_relationship_enforced_between_statements() -> None:
    plan = _plan()
    sql = _sql(mariadb.swap_statements(_mariadb(), plan, _prepared(plan)))
    parent, child = sql[0], sql[1]
    assert parent.startswith("ALTER TABLE `shop \"s'` CHANGE COLUMN id id_old")
    assert parent.endswith("ALGORITHM=NOCOPY")
    # The child: the original foreign key goes with its column; ours holds the new one
    # until the next statement gives the original name back on it.
    assert child.startswith("ALTER TABLE `itém``x` DROP FOREIGN KEY IF EXISTS item_shop_fk")
    assert "RENAME INDEX ix_item_shop TO sqla_ids_ixo_" in child  # parked, not dropped
    assert sql[2].startswith("SET STATEMENT foreign_key_checks = 0 FOR ALTER TABLE `itém``x`")
    assert "ADD CONSTRAINT item_shop_fk" in sql[2]
    assert f"DROP FOREIGN KEY {object_name(plan, 'fk', 1)}" in sql[2]


def test_mariadb_swap_of_a_self_reference_renames_each_index_once() -> None:
    plan = _plan(self_reference=True)
    sql = _sql(mariadb.swap_statements(_mariadb(), plan, _prepared(plan)))
    renames = [name for s in sql for name in re.findall(r"RENAME INDEX (\S+ TO \S+?),", s)]
    assert len(renames) == len(set(renames)) == 6  # three parked, three taking their names


def test_mariadb_swap_killed_half_way_continues_where_it_stopped() -> None:
    plan = _plan()
    catalog = _prepared(plan)
    # The parent's statement committed before the kill: its columns have their new names.
    key_tmp = plan.temp_column(PARENT, "id")
    catalog.columns[PARENT] = {"id_old": False, "id": False}
    catalog.indexes[PARENT] = {"PRIMARY": ["id"], key_tmp: ["id_old"]}
    sql = _sql(mariadb.swap_statements(_mariadb(), plan, catalog))
    assert not [s for s in sql if s.startswith("ALTER TABLE `shop \"s'`")]
    assert sql[0].startswith("ALTER TABLE `itém``x` DROP FOREIGN KEY IF EXISTS")


def test_mariadb_abort_drops_each_added_index_once() -> None:
    plan = _plan()
    plan.references.append(
        Reference(
            CHILD, "other_shop_id", True, "bigint", "item_other_fk", ["other_shop_id"], ["id"]
        )
    )
    plan.dependents.append(Dependent(CHILD, "ix_both", "index", ["shop_id", "other_shop_id"]))
    sql = _sql(mariadb.abort_statements(_mariadb(), plan, _prepared(plan)))
    drops = [name for s in sql for name in re.findall(r"DROP INDEX (\S+?),", s)]
    assert len(drops) == len(set(drops)) == 3  # two built at the prepare, the old key's unique
    assert sql[-1] == "DROP TABLE IF EXISTS `shop \"s'_uuid7_map`"


def test_mariadb_contract_drops_the_parked_indexes_and_old_columns() -> None:
    plan = _plan()
    catalog = _prepared(plan)
    swapped = mariadb.swap_statements(_mariadb(), plan, catalog)  # the catalog follows them
    assert swapped
    sql = _sql(mariadb.contract_statements(_mariadb(), plan, catalog))
    child = [s for s in sql if s.startswith("ALTER TABLE `itém``x` DROP")]
    assert len(child) == 1
    assert "DROP INDEX sqla_ids_ixo_" in child[0]
    assert f"DROP COLUMN {object_name(plan, 'old', 1)}" in child[0]
