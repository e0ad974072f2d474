"""PostgreSQL: reflection from the catalog, swap statements in one transaction.

DDL is transactional, so the whole migration (mapping, fill, swap, checks)
runs in the migration's transaction and any failed check rolls all of it
back. Foreign keys, constraints and indexes are recreated from their own
definitions (``pg_get_constraintdef``/``pg_get_indexdef``): column names are
the same after the swap, so ``MATCH``, actions, ``DEFERRABLE``, partial
indexes and opclasses survive verbatim.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.migration.plan import (
    NEW_SUFFIX,
    RESTORE_SUFFIX,
    Dependent,
    PkMigrationPlan,
    Reference,
    View,
    refuse,
)

STRATEGY = "swap"
TRANSACTIONAL = True

# FKs pointing at the key, columns paired by ordinal (conkey[i] <-> confkey[i]);
# per-partition clones of a partitioned table's FK (conparentid <> 0) are
# handled by PostgreSQL through their parent constraint, so they are skipped.
_REFERENCES = sa.text(
    """
    SELECT c.conname, cl.relname AS child, a.attname AS local_col,
           pg_get_constraintdef(c.oid) AS definition,
           (SELECT array_agg(la.attname ORDER BY k.n) FROM unnest(c.conkey) WITH ORDINALITY
                AS k(attnum, n) JOIN pg_attribute la
                ON la.attrelid = c.conrelid AND la.attnum = k.attnum) AS local_cols,
           (SELECT array_agg(ra.attname ORDER BY k.n) FROM unnest(c.confkey) WITH ORDINALITY
                AS k(attnum, n) JOIN pg_attribute ra
                ON ra.attrelid = c.confrelid AND ra.attnum = k.attnum) AS referred_cols,
           NOT a.attnotnull AS nullable,
           format_type(a.atttypid, a.atttypmod) AS type_sql
    FROM pg_constraint c
    JOIN pg_class cl ON cl.oid = c.conrelid
    JOIN pg_attribute pa ON pa.attrelid = c.confrelid AND pa.attname = :column
    JOIN LATERAL unnest(c.confkey) WITH ORDINALITY AS fk(attnum, n) ON fk.attnum = pa.attnum
    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[fk.n]
    WHERE c.contype = 'f' AND c.confrelid = to_regclass(:table) AND c.conparentid = 0
    ORDER BY cl.relname, c.conname
    """
)


def _quote(connection: Connection, name: str) -> str:
    return str(connection.dialect.identifier_preparer.quote(name))


def column_type_sql(connection: Connection, table: str, column: str) -> str:
    """The column's exact type (``format_type``), e.g. ``character varying(20)``."""
    value = connection.execute(
        sa.text(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = to_regclass(:t) AND attname = :c"
        ),
        {"t": _quote(connection, table), "c": column},
    ).scalar_one()
    return str(value)


def find_references(
    connection: Connection, inspector: sa.Inspector, table: str, column: str
) -> list[Reference]:
    """Every FK whose referred columns include the key, paired by ordinal."""
    rows = connection.execute(
        _REFERENCES, {"table": _quote(connection, table), "column": column}
    ).mappings()
    return [
        Reference(
            table=r["child"],
            column=r["local_col"],
            nullable=bool(r["nullable"]),
            type_sql=r["type_sql"],
            constraint=r["conname"],
            columns=list(r["local_cols"]),
            referred_columns=list(r["referred_cols"]),
            definition=r["definition"],
        )
        for r in rows
    ]


def find_blockers(
    connection: Connection, inspector: sa.Inspector, table: str, affected: dict[str, set[str]]
) -> list[str]:
    """Triggers, partitioning, CHECKs on the columns (views: :func:`find_views`)."""
    problems: list[str] = []
    for t, cols in sorted(affected.items()):
        params = {"t": _quote(connection, t), "cols": sorted(cols)}
        triggers = connection.execute(
            sa.text(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass(:t)"
                " AND NOT tgisinternal ORDER BY 1"
            ),
            {"t": params["t"]},
        ).scalars()
        problems += [f"trigger {g} on {t} would fire on every rewritten row" for g in triggers]
        kind = connection.execute(
            sa.text("SELECT relkind, relispartition FROM pg_class WHERE oid = to_regclass(:t)"),
            {"t": params["t"]},
        ).one()
        if t == table and (kind[0] == "p" or kind[1]):
            problems.append(f"table {t} is partitioned or a partition")
        checks = connection.execute(
            sa.text(
                "SELECT c.conname FROM pg_constraint c JOIN pg_attribute a"
                " ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey)"
                " WHERE c.conrelid = to_regclass(:t) AND c.contype IN ('c', 'x')"
                " AND a.attname = ANY(:cols) ORDER BY 1"
            ),
            params,
        ).scalars()
        problems += [f"check/exclusion constraint {n} on {t} uses the key" for n in checks]
    return problems


# Views over the columns (pg_depend from their rewrite rule to a column), then
# views over those views, recursively: a view can only be dropped once the
# views built on it are gone, so they are dropped deepest first and recreated
# in the opposite order.
_VIEWS = sa.text(
    """
    WITH RECURSIVE deps(oid, level, depends_on) AS (
        SELECT DISTINCT r.ev_class, 1, :t_name || '.' || a.attname
        FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
        JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
        WHERE d.classid = 'pg_rewrite'::regclass AND d.refobjid = to_regclass(:t)
          AND r.ev_class <> d.refobjid AND a.attname = ANY(:cols)
        UNION
        SELECT r.ev_class, deps.level + 1, 'view ' || v.relname
        FROM deps JOIN pg_class v ON v.oid = deps.oid
        JOIN pg_depend d ON d.refobjid = deps.oid AND d.classid = 'pg_rewrite'::regclass
        JOIN pg_rewrite r ON r.oid = d.objid
        WHERE r.ev_class <> deps.oid
    )
    SELECT c.relname, c.oid::regclass::text AS qualified, c.relkind, deps.level,
           deps.depends_on, pg_get_viewdef(c.oid) AS definition, c.reloptions,
           CASE WHEN c.relowner <> (SELECT oid FROM pg_roles WHERE rolname = current_user)
                THEN quote_ident(pg_get_userbyid(c.relowner)) END AS owner,
           quote_literal(obj_description(c.oid, 'pg_class')) AS comment,
           ARRAY(SELECT 'GRANT ' || a.privilege_type || ' ON ' || c.oid::regclass::text
                        || ' TO ' || CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                                          ELSE quote_ident(pg_get_userbyid(a.grantee)) END
                        || CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END
                 FROM aclexplode(c.relacl) a WHERE a.grantee <> c.relowner
                 ORDER BY 1) AS grants
    FROM deps JOIN pg_class c ON c.oid = deps.oid
    ORDER BY deps.level, c.oid, deps.depends_on
    """
)


def find_views(
    connection: Connection, inspector: sa.Inspector, affected: dict[str, set[str]]
) -> list[View]:
    """Views over affected columns (and views over those), in the order to recreate them."""
    found: dict[str, tuple[int, View]] = {}
    for t, cols in sorted(affected.items()):
        rows = connection.execute(
            _VIEWS, {"t": _quote(connection, t), "t_name": t, "cols": sorted(cols)}
        ).mappings()
        for r in rows:
            if r["relkind"] == "m":
                raise refuse(
                    f"materialized view {r['relname']} depends on {r['depends_on']}; drop it"
                    " first and recreate it after (its data is not recreated automatically)"
                )
            options = f" WITH ({', '.join(r['reloptions'])})" if r["reloptions"] else ""
            view = View(
                name=r["relname"],
                depends_on=r["depends_on"],
                create_sql=f"CREATE VIEW {r['qualified']}{options} AS"
                f" {str(r['definition']).strip().rstrip(';')}",
                drop_sql=f"DROP VIEW IF EXISTS {r['qualified']}",
                after_sql=_view_extras(r),
            )
            level = int(r["level"])
            if r["qualified"] not in found or found[r["qualified"]][0] < level:
                found[r["qualified"]] = (level, view)
    return [view for _level, view in sorted(found.values(), key=lambda lv: lv[0])]


def _view_extras(row: Any) -> list[str]:
    """What ``CREATE VIEW`` does not carry over: owner, comment and grants."""
    q = row["qualified"]
    sql = [f"ALTER VIEW {q} OWNER TO {row['owner']}"] if row["owner"] else []
    if row["comment"]:
        sql.append(f"COMMENT ON VIEW {q} IS {row['comment']}")
    return sql + list(row["grants"] or [])


def uuid7_key_default(connection: Connection, plan: PkMigrationPlan) -> dict[str, Any]:
    """The new key's default: ``sqla_ids_uuid7()``, installed before the swap."""
    from sqla_ids.types.server_functions import UUID7_FUNCTION, uuid7_column_default_sql

    return {
        "kind": "uuid7_function",
        "function": UUID7_FUNCTION,
        "sql": uuid7_column_default_sql(connection.dialect.name),
    }


def find_dependents(
    connection: Connection,
    inspector: sa.Inspector,
    table: str,
    column: str,
    affected: dict[str, set[str]],
) -> list[Dependent]:
    """PK/unique constraints and indexes over affected columns, with their definitions."""
    deps: list[Dependent] = []
    for t, cols in sorted(affected.items()):
        params = {"t": _quote(connection, t), "cols": sorted(cols)}
        constraints = connection.execute(
            sa.text(
                "SELECT c.conname, c.contype, pg_get_constraintdef(c.oid),"
                " (SELECT array_agg(a.attname ORDER BY k.n) FROM unnest(c.conkey)"
                "  WITH ORDINALITY AS k(attnum, n) JOIN pg_attribute a"
                "  ON a.attrelid = c.conrelid AND a.attnum = k.attnum)"
                " FROM pg_constraint c WHERE c.conrelid = to_regclass(:t)"
                " AND c.contype IN ('p', 'u') AND EXISTS (SELECT 1 FROM pg_attribute a"
                "  WHERE a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey)"
                "  AND a.attname = ANY(:cols)) ORDER BY 1"
            ),
            params,
        ).all()
        for name, contype, definition, con_cols in constraints:
            if t == table and contype == "p":
                continue  # the migrated key's own PK is handled by the swap itself
            kind = "primary" if contype == "p" else "unique"
            deps.append(Dependent(t, name, kind, list(con_cols), definition))
        indexes = connection.execute(
            sa.text(
                "SELECT ic.relname, pg_get_indexdef(i.indexrelid),"
                " (SELECT array_agg(a.attname) FROM pg_attribute a"
                "  WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey))"
                " FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid"
                " WHERE i.indrelid = to_regclass(:t)"
                " AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid"
                "  AND c.conrelid = i.indrelid)"
                " AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = i.indrelid"
                "  AND a.attnum = ANY(i.indkey) AND a.attname = ANY(:cols)) ORDER BY 1"
            ),
            params,
        ).all()
        for name, definition, ix_cols in indexes:
            deps.append(Dependent(t, name, "index", list(ix_cols or []), definition))
    return deps


def key_default(connection: Connection, plan: PkMigrationPlan) -> dict[str, Any]:
    """The key's identity or owned sequence, and where it stands."""
    row = connection.execute(
        sa.text(
            "SELECT a.attidentity, pg_get_serial_sequence(:t, :c),"
            " pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a"
            " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
            " WHERE a.attrelid = to_regclass(:t) AND a.attname = :c"
        ),
        {"t": _quote(connection, plan.table), "c": plan.column},
    ).one()
    identity, sequence, expression = row
    if identity:
        last = connection.execute(sa.text(f"SELECT last_value FROM {sequence}")).scalar()
        return {"kind": "identity", "always": identity == "a", "last_value": last}
    if sequence and expression and "nextval" in expression:
        return {"kind": "sequence", "sequence": sequence, "expression": expression}
    if expression:
        return {"kind": "expression", "expression": expression}
    return {}


def table_sql(connection: Connection, plan: PkMigrationPlan) -> dict[str, list[str]]:
    """Not needed on PostgreSQL: objects are recreated from their definitions."""
    return {}


def _recreate(q: Any, plan: PkMigrationPlan) -> list[str]:
    sql = []
    for dep in plan.dependents:
        if dep.kind == "index":
            sql.append(str(dep.definition))
        else:
            sql.append(f"ALTER TABLE {q(dep.table)} ADD CONSTRAINT {q(dep.name)} {dep.definition}")
    for ref in plan.references:
        if ref.constraint:
            sql.append(
                f"ALTER TABLE {q(ref.table)} ADD CONSTRAINT {q(ref.constraint)} {ref.definition}"
            )
    return sql


def _drop(q: Any, plan: PkMigrationPlan) -> list[str]:
    sql = [
        f"ALTER TABLE {q(r.table)} DROP CONSTRAINT {q(r.constraint)}"
        for r in plan.references
        if r.constraint
    ]
    for dep in plan.dependents:
        if dep.kind == "index":
            sql.append(f"DROP INDEX {q(dep.name)}")
        else:
            sql.append(f"ALTER TABLE {q(dep.table)} DROP CONSTRAINT {q(dep.name)}")
    if plan.pk_name:
        sql.append(f"ALTER TABLE {q(plan.table)} DROP CONSTRAINT {q(plan.pk_name)}")
    return sql


def upgrade_swap(connection: Connection, plan: PkMigrationPlan) -> list[str]:
    """Statements that swap the filled UUID columns in for the old keys."""

    def q(name: str) -> str:
        return _quote(connection, name)

    t, c = q(plan.table), q(plan.column)
    sql = _drop(q, plan)
    kind = plan.default.get("kind")
    if kind == "identity":
        sql.append(f"ALTER TABLE {t} ALTER COLUMN {c} DROP IDENTITY")
    elif kind:
        sql.append(f"ALTER TABLE {t} ALTER COLUMN {c} DROP DEFAULT")
    if kind == "sequence" and plan.drop_sequence:
        sql.append(f"DROP SEQUENCE {plan.default['sequence']}")
    sql += [
        f"ALTER TABLE {t} RENAME COLUMN {c} TO {q(plan.old_column)}",
        f"ALTER TABLE {t} ALTER COLUMN {q(plan.old_column)} DROP NOT NULL",
        f"ALTER TABLE {t} RENAME COLUMN {q(plan.column + NEW_SUFFIX)} TO {c}",
        f"ALTER TABLE {t} ALTER COLUMN {c} SET NOT NULL",
        f"ALTER TABLE {t} ADD CONSTRAINT {q(plan.pk_name or plan.table + '_pkey')}"
        f" PRIMARY KEY ({c})",
    ]
    if plan.new_default_sql:
        sql.append(f"ALTER TABLE {t} ALTER COLUMN {c} SET DEFAULT {plan.new_default_sql}")
    for ref in plan.references:
        rt, rc = q(ref.table), q(ref.column)
        if plan.keep_child_old_columns:
            sql.append(f"ALTER TABLE {rt} RENAME COLUMN {rc} TO {q(ref.column + '_old')}")
        else:
            sql.append(f"ALTER TABLE {rt} DROP COLUMN {rc}")
        sql.append(f"ALTER TABLE {rt} RENAME COLUMN {q(ref.column + NEW_SUFFIX)} TO {rc}")
        if not ref.nullable:
            sql.append(f"ALTER TABLE {rt} ALTER COLUMN {rc} SET NOT NULL")
    return sql + _recreate(q, plan)


def downgrade_swap(connection: Connection, plan: PkMigrationPlan) -> list[str]:
    """Statements that swap the restored old keys back in and drop the UUID columns."""

    def q(name: str) -> str:
        return _quote(connection, name)

    t, c = q(plan.table), q(plan.column)
    sql = _drop(q, plan)
    sql += [
        f"ALTER TABLE {t} DROP COLUMN {c}",
        f"ALTER TABLE {t} RENAME COLUMN {q(plan.old_column)} TO {c}",
        f"ALTER TABLE {t} ALTER COLUMN {c} SET NOT NULL",
    ]
    kind = plan.default.get("kind")
    pk_name = q(plan.pk_name or plan.table + "_pkey")
    if kind == "identity":
        how = "ALWAYS" if plan.default["always"] else "BY DEFAULT"
        sql.append(f"ALTER TABLE {t} ALTER COLUMN {c} ADD GENERATED {how} AS IDENTITY")
        # The identity's sequence went with DROP IDENTITY: continue where it stood.
        last = int(plan.default.get("last_value") or 0)
        sql.append(
            f"SELECT setval(pg_get_serial_sequence('{t}', '{plan.column}'),"
            f" GREATEST((SELECT max({c}) FROM {t}), {last}, 1))"
        )
    elif kind == "sequence":
        seq = plan.default["sequence"]
        if plan.drop_sequence:
            sql.append(f"CREATE SEQUENCE {seq}")
            sql.append(f"SELECT setval('{seq}', GREATEST((SELECT max({c}) FROM {t}), 1))")
        sql.append(f"ALTER SEQUENCE {seq} OWNED BY {t}.{c}")
        sql.append(f"ALTER TABLE {t} ALTER COLUMN {c} SET DEFAULT {plan.default['expression']}")
    elif kind == "expression":
        sql.append(f"ALTER TABLE {t} ALTER COLUMN {c} SET DEFAULT {plan.default['expression']}")
    sql.append(f"ALTER TABLE {t} ADD CONSTRAINT {pk_name} PRIMARY KEY ({c})")
    for ref in plan.references:
        rt, rc = q(ref.table), q(ref.column)
        sql.append(f"ALTER TABLE {rt} DROP COLUMN {rc}")
        if plan.keep_child_old_columns:
            sql.append(f"ALTER TABLE {rt} DROP COLUMN {q(ref.column + '_old')}")
        sql.append(f"ALTER TABLE {rt} RENAME COLUMN {q(ref.column + RESTORE_SUFFIX)} TO {rc}")
        if not ref.nullable:
            sql.append(f"ALTER TABLE {rt} ALTER COLUMN {rc} SET NOT NULL")
    return sql + _recreate(q, plan)


def next_old_keys_sql(plan: PkMigrationPlan) -> str | None:
    """SQL giving fresh old-style keys (for rows created after the migration)."""
    seq = plan.default.get("sequence")
    if seq and not plan.drop_sequence:
        return f"nextval('{seq}')"
    return None
