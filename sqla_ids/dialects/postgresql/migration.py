"""PostgreSQL: reflection from the catalog; columns change type in place.

DDL is transactional, so the whole migration (mapping, fill, conversion,
checks) runs in the migration's transaction and any failed check rolls all
of it back. Each column is converted with ``ALTER COLUMN ... TYPE ... USING
<temporary column>``: it keeps its position, comment, grants and nullability,
and PostgreSQL rebuilds its primary key, unique constraints and indexes under
their own names -- on every partition too, when the table is partitioned.
Only the foreign keys to the key (a type mismatch while the columns change)
and the views over the columns are dropped meanwhile and recreated from their
own definitions (``pg_get_constraintdef``/``pg_get_viewdef``). User triggers
on the affected tables are disabled while the values are rewritten (the
rewrite is not an application update) and re-enabled as they were.

Names reach SQL only through ``quote`` (identifiers) or as bound parameters
(``to_regclass(:t)``, ``setval(CAST(:s AS regclass), ...)``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.postgresql.online import PostgreSQLOnline
from sqla_ids.migration import analysis, strategies
from sqla_ids.migration import reflected as _reflected
from sqla_ids.migration.dialect import MigrationDialect
from sqla_ids.migration.model import (
    OLD_COLUMN_COMMENT,
    Blockers,
    ColumnDefinition,
    Dependent,
    NewKeyDefault,
    OldKeyDefault,
    PkMigrationPlan,
    Reference,
    Routine,
    View,
)
from sqla_ids.migration.strategies import Fill, execute_sql, literal

IDENTIFIER_QUOTE = '"'
#: PostgreSQL silently truncates longer identifiers (NAMEDATALEN - 1 bytes).
MAX_IDENTIFIER_BYTES = 63

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


def _params(connection: Connection, table: str, cols: set[str] | None = None) -> dict[str, Any]:
    """Bound parameters naming a table (as ``to_regclass`` reads it) and columns."""
    params: dict[str, Any] = {"t": _quote(connection, table)}
    if cols is not None:
        params["cols"] = sorted(cols)
    return params


#: Read through SQLAlchemy's inspector (see :mod:`._reflected`).
primary_key = _reflected.primary_key
columns = _reflected.columns


def foreign_keys(connection: Connection, inspector: sa.Inspector) -> list[dict[str, Any]]:
    """Every foreign key of the current schema's tables, columns paired in order
    (read from the catalog: SQLAlchemy's reflection parses the constraint's text
    and mispairs columns whose names hold quotes)."""
    rows = connection.execute(
        sa.text(
            "SELECT c.conname, cl.relname, rc.relname,"
            " ARRAY(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, i)"
            "  JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i),"
            " ARRAY(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(n, i)"
            "  JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.i)"
            " FROM pg_constraint c JOIN pg_class cl ON cl.oid = c.conrelid"
            " JOIN pg_class rc ON rc.oid = c.confrelid"
            " WHERE c.contype = 'f' AND c.conparentid = 0"
            " AND cl.relnamespace = current_schema()::regnamespace"
            " ORDER BY cl.relname, c.conname"
        )
    ).all()
    return [
        {
            "name": name,
            "table": table,
            "constrained_columns": list(local),
            "referred_table": referred,
            "referred_columns": list(remote),
        }
        for name, table, referred, local, remote in rows
    ]


def identifier_limit(name: str) -> int | None:
    """The byte limit ``name`` exceeds, if it does."""
    return MAX_IDENTIFIER_BYTES if len(name.encode()) > MAX_IDENTIFIER_BYTES else None


def column_type_sql(connection: Connection, table: str, column: str) -> str:
    """The column's exact type (``format_type``), e.g. ``character varying(20)``."""
    value = connection.execute(
        sa.text(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = to_regclass(:t) AND attname = :c"
        ),
        {**_params(connection, table), "c": column},
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


# Partitioning and inheritance of one table: ALTER COLUMN TYPE recurses from a
# partitioned table into its partitions (so a partitioned *referencing* table
# is converted through itself), but cannot change a partition key, cannot be
# run on a partition or an inheritance child alone, and plain inheritance
# would mix parent and child rows in one mapping.
_SHAPE = sa.text(
    """
    SELECT c.relkind, c.relispartition,
           (SELECT string_agg(p.relname, ', ' ORDER BY p.relname) FROM pg_inherits i
              JOIN pg_class p ON p.oid = i.inhparent WHERE i.inhrelid = c.oid) AS parents,
           (SELECT string_agg(ch.relname, ', ' ORDER BY ch.relname) FROM pg_inherits i
              JOIN pg_class ch ON ch.oid = i.inhrelid WHERE i.inhparent = c.oid) AS children,
           (SELECT array_agg(a.attname) FROM pg_partitioned_table pt
              JOIN pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = ANY(pt.partattrs)
              WHERE pt.partrelid = c.oid) AS partition_key
    FROM pg_class c WHERE c.oid = to_regclass(:t)
    """
)


def resolve_inheritance(
    connection: Connection, table: str, references: list[Reference], blockers: Blockers
) -> None:
    """Refuse the partition/inheritance layouts an in-place conversion cannot handle."""
    tables: dict[str, set[str]] = {table: set()}
    for ref in references:
        tables.setdefault(ref.table, set()).add(ref.column)
    for t, cols in sorted(tables.items()):
        shape = connection.execute(_SHAPE, _params(connection, t)).mappings().one()
        if shape["relispartition"]:
            blockers.add(
                f"table {t} is a partition of {shape['parents']}; migrate through the"
                " partitioned table"
            )
        elif shape["parents"]:
            blockers.add(
                f"table {t} inherits from {shape['parents']} (table inheritance is not supported)"
            )
        if shape["relkind"] == "p":
            converted = cols | ({_key_column(connection, t)} if t == table else set())
            in_key = set(shape["partition_key"] or []) & converted
            if in_key:
                blockers.add(
                    f"table {t} is partitioned by {', '.join(sorted(in_key))}, which would change"
                    " type; PostgreSQL cannot change a partition key's type"
                )
        elif shape["children"]:
            blockers.add(
                f"table {t} has inheritance children ({shape['children']}); table inheritance"
                " is not supported"
            )


def _key_column(connection: Connection, table: str) -> str:
    return str(
        connection.execute(
            sa.text(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
                " AND a.attnum = i.indkey[0] WHERE i.indrelid = to_regclass(:t)"
                " AND i.indisprimary"
            ),
            _params(connection, table),
        ).scalar_one()
    )


# Objects that stop ALTER COLUMN TYPE or would be broken by it, per affected
# table: (what, SQL returning (name, detail)). Every one is reported.
_BLOCKING_OBJECTS: list[tuple[str, str]] = [
    (
        "check/exclusion constraint",
        "SELECT DISTINCT c.conname, '' FROM pg_constraint c JOIN pg_attribute a"
        " ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey)"
        " WHERE c.conrelid = to_regclass(:t) AND c.contype IN ('c', 'x')"
        " AND a.attname = ANY(:cols) ORDER BY 1",
    ),
    (
        # A rule is a rewrite of the table's statements: it would rewrite the
        # migration's own UPDATEs, and its stored query pins the column type.
        "rule",
        "SELECT DISTINCT r.rulename, c.relname FROM pg_rewrite r"
        " JOIN pg_class c ON c.oid = r.ev_class WHERE r.rulename <> '_RETURN'"
        " AND (r.ev_class = to_regclass(:t) OR EXISTS (SELECT 1 FROM pg_depend d"
        "  JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid"
        "  WHERE d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid"
        "  AND d.refobjid = to_regclass(:t) AND a.attname = ANY(:cols))) ORDER BY 1",
    ),
    (
        # UPDATE OF <column> and WHEN (...) conditions pin the column.
        "trigger with a column list or WHEN condition",
        "SELECT DISTINCT g.tgname, '' FROM pg_depend d"
        " JOIN pg_trigger g ON d.classid = 'pg_trigger'::regclass AND d.objid = g.oid"
        " JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid"
        " WHERE d.refobjid = to_regclass(:t) AND a.attname = ANY(:cols) ORDER BY 1",
    ),
    (
        "row-level security policy",
        "SELECT DISTINCT p.polname, '' FROM pg_depend d"
        " JOIN pg_policy p ON d.classid = 'pg_policy'::regclass AND d.objid = p.oid"
        " JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid"
        " WHERE d.refobjid = to_regclass(:t) AND a.attname = ANY(:cols) ORDER BY 1",
    ),
    (
        "generated column",
        "SELECT DISTINCT g.attname, '' FROM pg_depend d"
        " JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid"
        " JOIN pg_attribute g ON g.attrelid = d.objid AND g.attnum = d.objsubid"
        " WHERE d.classid = 'pg_class'::regclass AND d.objid = to_regclass(:t)"
        " AND d.refobjid = to_regclass(:t) AND d.objsubid > 0 AND g.attgenerated <> ''"
        " AND a.attname = ANY(:cols) ORDER BY 1",
    ),
]


def find_blockers(
    connection: Connection, inspector: sa.Inspector, table: str, affected: dict[str, set[str]]
) -> list[str]:
    """Constraints, rules, triggers, policies, generated columns and indexes that
    pin an affected column's type (views: :func:`find_views`)."""
    problems: list[str] = []
    for t, cols in sorted(affected.items()):
        params = _params(connection, t, cols)
        for what, sql in _BLOCKING_OBJECTS:
            for name, on in connection.execute(sa.text(sql), params).all():
                where = on or t
                problems.append(
                    f"{what} {name} on {where} uses {', '.join(sorted(cols))} of {t};"
                    " drop it first and recreate it for the UUID column after"
                )
        problems += _blocking_indexes(connection, t, cols)
    return problems


# Indexes over an affected table with their expressions, predicate and whether
# an affected key column has an explicit (non-default) operator class.
_INDEXES = sa.text(
    """
    SELECT ic.relname, pg_get_expr(i.indexprs, i.indrelid) AS exprs,
           pg_get_expr(i.indpred, i.indrelid) AS pred,
           EXISTS (SELECT 1 FROM unnest(i.indkey::int2[], i.indclass::oid[]) AS k(n, opc)
                   JOIN pg_opclass o ON o.oid = k.opc
                   JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n
                   WHERE a.attname = ANY(:cols) AND NOT o.opcdefault) AS explicit_opclass
    FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
    WHERE i.indrelid = to_regclass(:t) ORDER BY 1
    """
)


def _blocking_indexes(connection: Connection, table: str, cols: set[str]) -> list[str]:
    """Indexes whose expression or predicate uses an affected column, or that give
    it an explicit operator class: written for the old type, PostgreSQL cannot
    rebuild them on a uuid column."""
    problems = []
    for row in connection.execute(_INDEXES, _params(connection, table, cols)).mappings():
        text = " ".join(str(row[k]) for k in ("exprs", "pred") if row[k])
        used = analysis.mentions(text, sorted(cols), IDENTIFIER_QUOTE) if text else []
        if used or row["explicit_opclass"]:
            why = "an expression or predicate over" if used else "an explicit operator class on"
            problems.append(
                f"index {row['relname']} on {table} has {why} {', '.join(used or sorted(cols))};"
                " drop it first and recreate it for the UUID column after"
            )
    return problems


# Views over the columns (pg_depend from their _RETURN rule to a column), then
# views over those views, recursively: a view can only be dropped once the
# views built on it are gone, so they are dropped deepest first and recreated
# in the opposite order. Only view rules count: a table's own RULEs are
# refused by find_blockers.
_VIEWS = sa.text(
    """
    WITH RECURSIVE deps(oid, level, depends_on) AS (
        SELECT DISTINCT r.ev_class, 1, :t_name || '.' || a.attname
        FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
        JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
        WHERE d.classid = 'pg_rewrite'::regclass AND d.refobjid = to_regclass(:t)
          AND r.rulename = '_RETURN' AND r.ev_class <> d.refobjid AND a.attname = ANY(:cols)
        UNION
        SELECT r.ev_class, deps.level + 1, 'view ' || v.relname
        FROM deps JOIN pg_class v ON v.oid = deps.oid
        JOIN pg_depend d ON d.refobjid = deps.oid AND d.classid = 'pg_rewrite'::regclass
        JOIN pg_rewrite r ON r.oid = d.objid
        WHERE r.ev_class <> deps.oid AND r.rulename = '_RETURN'
    )
    SELECT c.relname, c.oid::regclass::text AS qualified, c.relkind, deps.level,
           deps.depends_on, pg_get_viewdef(c.oid) AS definition, c.reloptions,
           CASE WHEN c.relowner <> (SELECT oid FROM pg_roles WHERE rolname = current_user)
                THEN quote_ident(pg_get_userbyid(c.relowner)) END AS owner,
           obj_description(c.oid, 'pg_class') AS comment,
           ARRAY(SELECT 'GRANT ' || a.privilege_type || ' ON ' || c.oid::regclass::text
                        || ' TO ' || CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                                          ELSE quote_ident(pg_get_userbyid(a.grantee)) END
                        || CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END
                 FROM aclexplode(c.relacl) a WHERE a.grantee <> c.relowner
                 ORDER BY 1) AS grants
    FROM deps JOIN pg_class c ON c.oid = deps.oid
    WHERE c.relkind IN ('v', 'm')
    ORDER BY deps.level, c.oid, deps.depends_on
    """
)


def find_views(
    connection: Connection,
    inspector: sa.Inspector,
    affected: dict[str, set[str]],
    blockers: Blockers | None = None,
) -> list[View]:
    """Views over affected columns (and views over those), in the order to recreate
    them; materialized views are added to ``blockers`` (their data would be lost)."""
    found: dict[str, tuple[int, View]] = {}
    for t, cols in sorted(affected.items()):
        rows = connection.execute(_VIEWS, {**_params(connection, t, cols), "t_name": t}).mappings()
        for r in rows:
            if r["relkind"] == "m":
                if blockers is not None:
                    blockers.add(
                        f"materialized view {r['relname']} depends on {r['depends_on']}; drop it"
                        " first and recreate it after (its data is not recreated automatically)"
                    )
                continue
            options = f" WITH ({', '.join(r['reloptions'])})" if r["reloptions"] else ""
            view = View(
                name=r["relname"],
                depends_on=r["depends_on"],
                create_sql=f"CREATE VIEW {r['qualified']}{options} AS"
                f" {str(r['definition']).strip().rstrip(';')}",
                drop_sql=f"DROP VIEW IF EXISTS {r['qualified']}",
                after_sql=_view_extras(connection, r),
            )
            level = int(r["level"])
            if r["qualified"] not in found or found[r["qualified"]][0] < level:
                found[r["qualified"]] = (level, view)
    return [view for _level, view in sorted(found.values(), key=lambda lv: lv[0])]


def _view_extras(connection: Connection, row: Any) -> list[str]:
    """What ``CREATE VIEW`` does not carry over: owner, comment and grants."""
    q = row["qualified"]
    sql = [f"ALTER VIEW {q} OWNER TO {row['owner']}"] if row["owner"] else []
    if row["comment"] is not None:
        sql.append(f"COMMENT ON VIEW {q} IS {literal(connection, row['comment'])}")
    return sql + list(row["grants"] or [])


# Functions and procedures of the schemas on the search path (not those of
# extensions, not sqla_ids' own), with the tables whose triggers call them.
_ROUTINES = sa.text(
    """
    SELECT p.proname, p.prokind, p.prosrc,
           p.prorettype = 'trigger'::regtype AS is_trigger,
           ARRAY(SELECT c.relname FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
                 WHERE g.tgfoid = p.oid AND NOT g.tgisinternal ORDER BY 1) AS tables
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = ANY(current_schemas(false)) AND p.proname NOT LIKE 'sqla\\_ids\\_%'
      AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                      AND d.objid = p.oid AND d.deptype = 'e')
    ORDER BY p.proname, p.oid
    """
)


def find_routines(connection: Connection, affected: dict[str, set[str]]) -> list[Routine]:
    """Functions and procedures whose bodies use a migrated column (trigger
    functions through ``NEW``/``OLD`` of the tables they are attached to)."""
    found = []
    for r in connection.execute(_ROUTINES).mappings():
        body = str(r["prosrc"] or "")
        attached = [t for t in r["tables"] if t in affected] or [None]
        uses = None
        for table in attached:
            uses = analysis.routine_uses(body, table, affected, IDENTIFIER_QUOTE)
            if uses:
                break
        if uses:
            kind = (
                "trigger function"
                if r["is_trigger"]
                else ("procedure" if r["prokind"] == "p" else "function")
            )
            found.append(Routine(kind, r["proname"], uses, body))
    return found


def uuid7_key_default(connection: Connection, plan: PkMigrationPlan) -> NewKeyDefault:
    """The new key's default: ``sqla_ids_uuid7()`` (installed before the conversion),
    or on PostgreSQL 18+ the native ``uuidv7()`` the column default calls directly."""
    from sqla_ids.types.server_functions import UUID7_FUNCTION, uuid7_column_default_sql

    sql = uuid7_column_default_sql(connection.dialect)
    function = "uuidv7" if sql.startswith("uuidv7(") else UUID7_FUNCTION
    return NewKeyDefault("uuid7_function", function=function, sql=sql)


def find_dependents(
    connection: Connection,
    inspector: sa.Inspector,
    table: str,
    column: str,
    affected: dict[str, set[str]],
) -> list[Dependent]:
    """PK/unique constraints and indexes over affected columns (for the dry run:
    PostgreSQL rebuilds them itself when the column changes type)."""
    deps: list[Dependent] = []
    for t, cols in sorted(affected.items()):
        params = _params(connection, t, cols)
        rows = connection.execute(
            sa.text(
                "SELECT ic.relname, CASE WHEN c.contype = 'p' THEN 'primary'"
                " WHEN c.contype = 'u' OR i.indisunique THEN 'unique' ELSE 'index' END,"
                " pg_get_indexdef(i.indexrelid),"
                " (SELECT array_agg(a.attname ORDER BY k.n) FROM unnest(i.indkey::int2[])"
                "  WITH ORDINALITY AS k(attnum, n) JOIN pg_attribute a"
                "  ON a.attrelid = i.indrelid AND a.attnum = k.attnum)"
                " FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid"
                " LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid"
                " AND c.conrelid = i.indrelid"
                " WHERE i.indrelid = to_regclass(:t) AND EXISTS (SELECT 1 FROM pg_attribute a"
                "  WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
                "  AND a.attname = ANY(:cols)) ORDER BY 1"
            ),
            params,
        ).all()
        for name, kind, definition, ix_cols in rows:
            if t == table and kind == "primary":
                continue
            deps.append(Dependent(t, name, kind, list(ix_cols or []), definition))
    return deps


def _sequence(connection: Connection, regclass: str) -> dict[str, Any]:
    """A sequence's schema, name and options, to recreate it exactly."""
    row = (
        connection.execute(
            sa.text(
                "SELECT n.nspname, c.relname, format_type(s.seqtypid, NULL) AS type,"
                " s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle,"
                " pg_sequence_last_value(c.oid) AS last_value"
                " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " JOIN pg_sequence s ON s.seqrelid = c.oid WHERE c.oid = CAST(:s AS regclass)"
            ),
            {"s": regclass},
        )
        .mappings()
        .one()
    )
    return {
        k: (int(v) if isinstance(v, int) and not isinstance(v, bool) else v) for k, v in row.items()
    }


def key_default(connection: Connection, plan: PkMigrationPlan) -> OldKeyDefault:
    """The key's identity or owned sequence (with its options), or its default."""
    row = connection.execute(
        sa.text(
            "SELECT a.attidentity, pg_get_serial_sequence(:t, :c),"
            " pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a"
            " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
            " WHERE a.attrelid = to_regclass(:t) AND a.attname = :c"
        ),
        {**_params(connection, plan.table), "c": plan.column},
    ).one()
    identity, sequence, expression = row
    if identity:
        return OldKeyDefault(
            "identity", always=identity == "a", sequence=_sequence(connection, sequence)
        )
    if sequence and expression and "nextval" in expression:
        return OldKeyDefault(
            "sequence", sequence=_sequence(connection, sequence), expression=expression
        )
    if expression:
        return OldKeyDefault("expression", expression=expression)
    return OldKeyDefault()


def table_sql(connection: Connection, plan: PkMigrationPlan) -> dict[str, list[str]]:
    """Not needed on PostgreSQL: the conversion keeps every object."""
    return {}


def column_definitions(connection: Connection, plan: PkMigrationPlan) -> list[ColumnDefinition]:
    """Not needed on PostgreSQL: the columns keep their definitions."""
    return []


def preserved_columns(connection: Connection, table: str) -> tuple[str, ...]:
    """No column changes by itself on update here (triggers are disabled meanwhile)."""
    return ()


def _sequence_name(connection: Connection, seq: dict[str, Any]) -> str:
    return f"{_quote(connection, seq['nspname'])}.{_quote(connection, seq['relname'])}"


def _sequence_options(seq: dict[str, Any], with_type: bool) -> str:
    """The options of a recorded sequence (integers from the catalog, re-checked);
    an identity's sequence takes its type from the column."""
    cycle = "CYCLE" if seq["seqcycle"] else "NO CYCLE"
    kind = seq["type"] if seq["type"] in ("smallint", "integer", "bigint") else "bigint"
    return (
        (f"AS {kind} " if with_type else "")
        + f"INCREMENT BY {int(seq['seqincrement'])} MINVALUE {int(seq['seqmin'])}"
        f" MAXVALUE {int(seq['seqmax'])} START WITH {int(seq['seqstart'])}"
        f" CACHE {int(seq['seqcache'])} {cycle}"
    )


def next_old_key(connection: Connection, plan: PkMigrationPlan) -> Any:
    """A fresh old-style key from the kept sequence, or ``None`` (number after the max)."""
    seq = plan.default.sequence
    if plan.default.kind == "sequence" and seq and not plan.drop_sequence:
        return connection.execute(
            sa.text("SELECT nextval(CAST(:s AS regclass))"),
            {"s": _sequence_name(connection, seq)},
        ).scalar_one()
    return None


class AlterType(strategies.Strategy):
    """Convert every affected column in place (see the module docstring)."""

    transactional = True

    def _enabled_triggers(
        self, connection: Connection, plan: PkMigrationPlan
    ) -> list[tuple[str, str, str]]:
        """``(table, trigger, tgenabled)`` of the user triggers that fire now."""
        found = []
        for t in plan.affected_tables:
            for name, enabled in connection.execute(
                sa.text(
                    "SELECT g.tgname, g.tgenabled FROM pg_trigger g"
                    " WHERE g.tgrelid = to_regclass(:t) AND NOT g.tgisinternal"
                    " AND g.tgparentid = 0 AND g.tgenabled <> 'D' ORDER BY 1"
                ),
                _params(connection, t),
            ).all():
                found.append((t, name, enabled))
        return found

    @contextmanager
    def quiet(self, connection: Connection, plan: PkMigrationPlan) -> Iterator[None]:
        """User triggers on the affected tables disabled meanwhile (the rewrite is not
        an application update), then enabled again exactly as they were."""
        q = connection.dialect.identifier_preparer.quote
        triggers = self._enabled_triggers(connection, plan)
        for t, name, _enabled in triggers:
            execute_sql(connection, f"ALTER TABLE {q(t)} DISABLE TRIGGER {q(name)}")
        yield
        how = {"O": "", "A": "ALWAYS ", "R": "REPLICA "}
        for t, name, enabled in triggers:
            execute_sql(connection, f"ALTER TABLE {q(t)} ENABLE {how[enabled]}TRIGGER {q(name)}")

    def _around(self, connection: Connection, plan: PkMigrationPlan, work: Any) -> None:
        """Run ``work()`` quietly with the FKs to the key and the views dropped; put
        them back as they were afterwards."""
        with self.quiet(connection, plan):
            self._without_dependents(connection, plan, work)

    def _without_dependents(self, connection: Connection, plan: PkMigrationPlan, work: Any) -> None:
        q = connection.dialect.identifier_preparer.quote
        strategies.drop_views(connection, plan)
        for ref in plan.references:
            if ref.constraint:
                execute_sql(
                    connection, f"ALTER TABLE {q(ref.table)} DROP CONSTRAINT {q(ref.constraint)}"
                )
        work()
        for ref in plan.references:
            if ref.constraint:
                execute_sql(
                    connection,
                    f"ALTER TABLE {q(ref.table)} ADD CONSTRAINT {q(ref.constraint)}"
                    f" {ref.definition}",
                )
        strategies.recreate_views(connection, plan)

    def _convert(
        self,
        connection: Connection,
        plan: PkMigrationPlan,
        columns: list[tuple[str, str, str, str]],
    ) -> None:
        """``ALTER COLUMN column TYPE type USING source``, then drop the source column."""
        q = connection.dialect.identifier_preparer.quote
        for table, column, type_sql, source in columns:
            execute_sql(
                connection,
                f"ALTER TABLE {q(table)} ALTER COLUMN {q(column)} TYPE {type_sql}"
                f" USING {q(source)}",
            )
            execute_sql(connection, f"ALTER TABLE {q(table)} DROP COLUMN {q(source)}")

    def upgrade(self, connection: Connection, plan: PkMigrationPlan, step: str) -> None:
        """Fill temporary UUID columns, then convert each column from its temporary one."""
        q = connection.dialect.identifier_preparer.quote
        t, c = q(plan.table), q(plan.column)
        uuid_sql = "uuid"

        def work() -> None:
            kind = plan.default.kind
            if kind == "identity":
                execute_sql(connection, f"ALTER TABLE {t} ALTER COLUMN {c} DROP IDENTITY")
            elif kind:
                execute_sql(connection, f"ALTER TABLE {t} ALTER COLUMN {c} DROP DEFAULT")
            if kind == "sequence" and plan.drop_sequence:
                execute_sql(
                    connection,
                    f"DROP SEQUENCE {_sequence_name(connection, plan.default.sequence or {})}",
                )
            old = q(plan.old_column)
            execute_sql(connection, f"ALTER TABLE {t} ADD COLUMN {old} {plan.key_type_sql}")
            comment = OLD_COLUMN_COMMENT.format(table=plan.table, column=plan.column)
            execute_sql(
                connection, f"COMMENT ON COLUMN {t}.{old} IS {literal(connection, comment)}"
            )
            fills = []
            for table, column in plan.targets():
                temp = plan.temp_column(table, column)
                execute_sql(connection, f"ALTER TABLE {q(table)} ADD COLUMN {q(temp)} {uuid_sql}")
                copy: tuple[tuple[str, str], ...] = ()
                if (table, column) == (plan.table, plan.column):
                    copy = ((plan.old_column, column),)
                elif plan.keep_child_old_columns:
                    kept = column + "_old"
                    ref_type = next(
                        r.type_sql
                        for r in plan.references
                        if (r.table, r.column) == (table, column)
                    )
                    execute_sql(
                        connection, f"ALTER TABLE {q(table)} ADD COLUMN {q(kept)} {ref_type}"
                    )
                    copy = ((kept, column),)
                fills.append(Fill(table, column, temp, copy))
            strategies.fill(connection, plan, fills, "old_key", "new_key")
            strategies.verify_filled(connection, plan, fills, "old_key", "new_key")
            self._convert(
                connection,
                plan,
                [
                    (table, column, uuid_sql, f.target)
                    for (table, column), f in zip(plan.targets(), fills, strict=True)
                ],
            )
            if plan.new_default_sql:
                execute_sql(
                    connection,
                    f"ALTER TABLE {t} ALTER COLUMN {c} SET DEFAULT {plan.new_default_sql}",
                )

        self._around(connection, plan, work)

    def downgrade(self, connection: Connection, plan: PkMigrationPlan, step: str) -> None:
        """Fill temporary old-type columns of the references through the mapping, convert
        them and the key (from its old-key column) back, and restore the key's default."""
        q = connection.dialect.identifier_preparer.quote
        t, c = q(plan.table), q(plan.column)

        def work() -> None:
            if plan.new_default_sql:
                execute_sql(connection, f"ALTER TABLE {t} ALTER COLUMN {c} DROP DEFAULT")
            fills, conversions = [], []
            for table, column in plan.targets()[1:]:
                ref = next(r for r in plan.references if (r.table, r.column) == (table, column))
                temp = plan.temp_column(table, column)
                execute_sql(
                    connection, f"ALTER TABLE {q(table)} ADD COLUMN {q(temp)} {ref.type_sql}"
                )
                fills.append(Fill(table, column, temp))
                conversions.append((table, column, ref.type_sql, temp))
            strategies.fill(connection, plan, fills, "new_key", "old_key")
            strategies.verify_filled(connection, plan, fills, "new_key", "old_key")
            conversions.append((plan.table, plan.column, plan.key_type_sql, plan.old_column))
            self._convert(connection, plan, conversions)
            if plan.keep_child_old_columns:
                for table, column in plan.targets()[1:]:
                    execute_sql(
                        connection, f"ALTER TABLE {q(table)} DROP COLUMN {q(column + '_old')}"
                    )
            _restore_default(connection, plan)

        self._around(connection, plan, work)


def _restore_default(connection: Connection, plan: PkMigrationPlan) -> None:
    """The key's identity, sequence or default as it was, continuing after the
    largest key (rows created since the upgrade were numbered past it)."""
    q = connection.dialect.identifier_preparer.quote
    t, c = q(plan.table), q(plan.column)
    kind = plan.default.kind
    seq: dict[str, Any] = plan.default.sequence or {}
    if kind == "identity":
        how = "ALWAYS" if plan.default.always else "BY DEFAULT"
        execute_sql(
            connection,
            f"ALTER TABLE {t} ALTER COLUMN {c} ADD GENERATED {how} AS IDENTITY"
            f" (SEQUENCE NAME {_sequence_name(connection, seq)} {_sequence_options(seq, False)})",
        )
    elif kind == "sequence":
        if plan.drop_sequence:
            execute_sql(
                connection,
                f"CREATE SEQUENCE {_sequence_name(connection, seq)} {_sequence_options(seq, True)}"
                f" OWNED BY {t}.{c}",
            )
        execute_sql(
            connection, f"ALTER TABLE {t} ALTER COLUMN {c} SET DEFAULT {plan.default.expression}"
        )
    elif kind == "expression":
        execute_sql(
            connection, f"ALTER TABLE {t} ALTER COLUMN {c} SET DEFAULT {plan.default.expression}"
        )
    # The sequence continues exactly where it stood -- or after the keys given to
    # rows created since the upgrade. A kept sequence already advanced for those.
    recreated = kind == "identity" or (kind == "sequence" and plan.drop_sequence)
    if recreated:
        value = max(int(seq.get("last_value") or 0), int(plan.default.numbered_up_to or 0))
        if value:
            connection.execute(
                sa.text("SELECT setval(CAST(:s AS regclass), :v)"),
                {"s": _sequence_name(connection, seq), "v": value},
            )


class PostgreSQLMigration(MigrationDialect):
    """PostgreSQL: every affected column converted in place, in one transaction."""

    identifier_quote: ClassVar[str] = IDENTIFIER_QUOTE
    strategy: ClassVar[strategies.Strategy] = AlterType()
    online: ClassVar[strategies.OnlineStrategy | None] = PostgreSQLOnline()
    primary_key = staticmethod(primary_key)
    columns = staticmethod(columns)
    foreign_keys = staticmethod(foreign_keys)
    find_references = staticmethod(find_references)
    resolve_inheritance = staticmethod(resolve_inheritance)
    identifier_limit = staticmethod(identifier_limit)
    column_type_sql = staticmethod(column_type_sql)
    find_blockers = staticmethod(find_blockers)
    find_views = staticmethod(find_views)
    find_routines = staticmethod(find_routines)
    find_dependents = staticmethod(find_dependents)
    key_default = staticmethod(key_default)
    uuid7_key_default = staticmethod(uuid7_key_default)
    table_sql = staticmethod(table_sql)
    column_definitions = staticmethod(column_definitions)
    preserved_columns = staticmethod(preserved_columns)
    next_old_key = staticmethod(next_old_key)
