"""PostgreSQL: what the key migration reads from the catalog.

Everything the planner asks of PostgreSQL (the key, its references, the
objects on the affected columns, the key's default), read from ``pg_catalog``:
SQLAlchemy's reflection parses constraint text and mispairs columns whose
names hold quotes. Names reach SQL only through ``quote`` (identifiers) or as
bound parameters (``to_regclass(:t)``).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

# (re-exported: the planner asks for privileges with the rest of the catalog)
from sqla_ids.dialects.sql import query_sql, quote_name, quoter, text_sql
from sqla_ids.migration.backends.postgresql.privileges import (
    missing_privileges as missing_privileges,
)
from sqla_ids.migration.core import analysis
from sqla_ids.migration.core import reflected as _reflected
from sqla_ids.migration.core.model import (
    Blockers,
    ColumnDefinition,
    Dependent,
    NewKeyDefault,
    OldKeyDefault,
    ParkedTrigger,
    PkMigrationPlan,
    Reference,
    Routine,
    View,
    refuse,
)
from sqla_ids.migration.core.reflected import Inspector
from sqla_ids.migration.core.sql import literal

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
    return quote_name(connection.dialect, name)


def _params(connection: Connection, table: str, cols: set[str] | None = None) -> dict[str, Any]:
    """Bound parameters naming a table (as ``to_regclass`` reads it) and columns."""
    params: dict[str, Any] = {"t": _quote(connection, table)}
    if cols is not None:
        params["cols"] = sorted(cols)
    return params


#: Read through SQLAlchemy's inspector (see :mod:`._reflected`).
primary_key = _reflected.primary_key
columns = _reflected.columns


def foreign_keys(connection: Connection, inspector: Inspector) -> list[dict[str, Any]]:
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
            " AND cl.relnamespace = quote_ident(current_schema())::regnamespace"
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
    connection: Connection, inspector: Inspector, table: str, column: str
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
# would mix parent and child rows in one mapping. ``root`` is the top of a
# partition tree (pg_partition_root: partitions of partitions too).
_SHAPE = sa.text(
    """
    SELECT c.relkind, c.relispartition,
           (SELECT string_agg(p.relname, ', ' ORDER BY p.relname) FROM pg_inherits i
              JOIN pg_class p ON p.oid = i.inhparent WHERE i.inhrelid = c.oid) AS parents,
           (SELECT string_agg(ch.relname, ', ' ORDER BY ch.relname) FROM pg_inherits i
              JOIN pg_class ch ON ch.oid = i.inhrelid WHERE i.inhparent = c.oid) AS children,
           (SELECT array_agg(a.attname) FROM pg_partitioned_table pt
              JOIN pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = ANY(pt.partattrs)
              WHERE pt.partrelid = c.oid) AS partition_key,
           r.relname AS root, r.relnamespace = c.relnamespace AS root_here,
           top.relname AS top, top.relnamespace = c.relnamespace AS top_here, up.widest
    FROM pg_class c
    LEFT JOIN pg_class r ON c.relispartition AND r.oid = pg_partition_root(c.oid)
    -- Plain inheritance: the topmost ancestor, and the most parents any table
    -- on the way up has (a column inherited from two parents has two roots).
    LEFT JOIN LATERAL (
        WITH RECURSIVE chain(oid, depth) AS (
            SELECT c.oid, 0
            UNION ALL SELECT i.inhparent, chain.depth + 1 FROM pg_inherits i
            JOIN chain ON i.inhrelid = chain.oid WHERE chain.depth < 100)
        SELECT (SELECT oid FROM chain ORDER BY depth DESC LIMIT 1) AS top_oid,
               (SELECT max((SELECT count(*) FROM pg_inherits i WHERE i.inhrelid = chain.oid))
                FROM chain) AS widest
    ) up ON NOT c.relispartition
    LEFT JOIN pg_class top ON top.oid = up.top_oid AND top.oid <> c.oid
    WHERE c.oid = to_regclass(:t)
    """
)


def resolve_inheritance(
    connection: Connection, table: str, references: list[Reference], blockers: Blockers
) -> None:
    """Carry the foreign keys declared on partitions, refuse the partition and
    inheritance layouts an in-place conversion cannot handle.

    A foreign key declared on a partition (pagila's ``payment_p2007_01`` ...
    each referencing ``customer``), not on its partitioned table: the column
    can only change type through the partitioned table (the root of the
    tree), which converts it on every partition. So the root's column becomes
    the converted reference (added when no foreign key of the root declares
    it), and each partition's foreign key a reference ``via`` the root --
    dropped before the conversion and added back exactly as it was declared.
    """
    shapes: dict[str, Any] = {}

    def shape_of(t: str) -> Any:
        if t not in shapes:
            shapes[t] = connection.execute(_SHAPE, _params(connection, t)).mappings().one()
        return shapes[t]

    q = quoter(connection.dialect)
    blocked: set[str] = set()
    key_shape = shape_of(table)
    if key_shape["relispartition"]:
        blockers.add(
            f"table {qualified(connection, table)} is a partition of"
            f" {key_shape['parents']}: a partition's key is its partitioned table's"
            " (the same column on every partition) and cannot change type alone; migrate"
            f" {qualified(connection, key_shape['root'])}'s key instead"
        )
    for ref in list(references):
        shape = shape_of(ref.table)
        if ref.via is not None:
            continue
        if shape["relispartition"]:
            root, here, what = shape["root"], shape["root_here"], "partitioned table"
        elif shape["top"] is not None and shape["widest"] == 1:
            # Plain inheritance (Sakila's PostgreSQL port: payment_p2007_01 ...
            # INHERITS (payment)): the column is the topmost parent's, as a
            # partition's is its partitioned table's; ALTER COLUMN TYPE on the
            # parent recurses into every child.
            root, here, what = shape["top"], shape["top_here"], "topmost parent"
        else:
            continue
        if not here or root == table:
            # (A tree spanning schemas, or a child referring to its own tree's
            # key: the conversion cannot be carried through a root.)
            blockers.add(
                f"table {qualified(connection, ref.table)} inherits from {shape['parents']},"
                f" whose {what} {root} the migration cannot convert; drop foreign key"
                f" {q(ref.constraint or '')} first (ALTER TABLE {qualified(connection, ref.table)}"
                f" DROP CONSTRAINT {q(ref.constraint or '')})"
            )
            blocked.add(ref.table)
            continue
        ref.via = root
        if not any(r.table == root and r.column == ref.column for r in references):
            root_columns = columns(connection, _reflected.inspect(connection), root)
            references.append(
                Reference(
                    table=root,
                    column=ref.column,
                    nullable=bool(root_columns[ref.column]["nullable"]),
                    type_sql=column_type_sql(connection, root, ref.column),
                )
            )
    tables: dict[str, set[str]] = {table: set()}
    for ref in references:
        if ref.via is None:
            tables.setdefault(ref.table, set()).add(ref.column)
    for t, cols in sorted(tables.items()):
        shape = shape_of(t)
        name = qualified(connection, t)
        if t in blocked:
            continue
        if t != table and shape["relispartition"]:
            root = shape["root"]
            blockers.add(
                f"column {name}.{', '.join(sorted(cols))} is on a partition of"
                f" {shape['parents']}: it changes type through its partitioned table; name"
                f" it as extra_references=[({root!r}, {sorted(cols)[0]!r})] instead"
            )
        elif shape["parents"] and not shape["relispartition"]:
            parents = shape["parents"]
            blockers.add(
                f"table {name} inherits from {parents}: the inherited column"
                f" {', '.join(map(q, sorted(cols)))} cannot change type alone"
                + (
                    f"; name it on {shape['top']} (extra_references) or detach the table first"
                    if shape["widest"] == 1 and t != table
                    else "; detach the table first"
                )
                + f" (ALTER TABLE {name} NO INHERIT {q(parents.split(', ')[0])})"
            )
        if shape["relkind"] == "p":
            converted = cols | ({_key_column(connection, t)} if t == table else set())
            in_key = set(shape["partition_key"] or []) & converted
            if in_key:
                blockers.add(
                    f"table {name} is partitioned by {', '.join(sorted(in_key))}, which would"
                    " change type; PostgreSQL cannot change a partition key's type (partition"
                    " it by another column first)"
                )
        elif shape["children"] and t == table:
            # The key's column is its children's too (ALTER COLUMN TYPE recurses,
            # and a SELECT of the parent reads their rows): the tree's keys are
            # numbered as one table's -- if they are one set, which the parent's
            # primary key (its own rows only) does not promise.
            key = _key_column(connection, t)
            twice = query_sql(
                connection,
                f"SELECT {q(key)} FROM {q(t)} GROUP BY 1 HAVING count(*) > 1 ORDER BY 1 LIMIT 3",
            ).scalars()
            if repeated := [str(k) for k in twice]:
                blockers.add(
                    f"table {name} has inheritance children ({shape['children']}), whose rows"
                    f" share its key column but not its primary key, and some keys are"
                    f" there twice in the tree ({', '.join(repeated)}): the migration maps"
                    " each old key to one new key; give those rows keys of their own, or"
                    f" detach the children (ALTER TABLE <child> NO INHERIT {q(t)})"
                )


def qualified(connection: Connection, table: str) -> str:
    """``schema.table`` of a table of the current schema, each part quoted when it
    needs to be: messages name objects the way SQL would."""
    schema = query_sql(connection, "SELECT current_schema()").scalar_one()
    return f"{_quote(connection, schema)}.{_quote(connection, table)}"


def schema_of(connection: Connection, table: str) -> str:
    """The schema ``table`` is found in (on the search path), quoted as SQL needs
    it: where its indexes are too, which are named ``schema.index``."""
    return str(
        connection.execute(
            sa.text(
                "SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = to_regclass(:t)"
            ),
            _params(connection, table),
        ).scalar_one()
    )


def index_valid(connection: Connection, index: str) -> bool | None:
    """Whether ``index`` (as SQL names it) is valid; ``None`` when there is none.
    A ``CONCURRENTLY`` build that stopped leaves its index there, invalid."""
    valid = connection.execute(
        sa.text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:i)"),
        {"i": index},
    ).scalar()
    return None if valid is None else bool(valid)


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


# The generated columns of table :t that read one of the columns :cols, as
# (generated column, column read). PostgreSQL 15+ records the read as the
# generated column's expression (its pg_attrdef) depending normally on the
# column read; 12-14 record it as the generated column itself (pg_class with
# the column's number) depending automatically on it. Both shapes are matched:
# reading only one of them missed every generated column on 14.
GENERATED_READERS = (
    "SELECT DISTINCT g.attname, a.attname FROM pg_depend d"
    " JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid"
    " LEFT JOIN pg_attrdef ad ON d.classid = 'pg_attrdef'::regclass AND ad.oid = d.objid"
    " JOIN pg_attribute g ON g.attrelid = d.refobjid AND g.attnum ="
    " CASE WHEN d.classid = 'pg_attrdef'::regclass THEN ad.adnum"
    " WHEN d.classid = 'pg_class'::regclass AND d.objid = d.refobjid THEN d.objsubid END"
    " WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = to_regclass(:t)"
    # (a column's own default or expression depends on the column itself)
    " AND g.attgenerated <> '' AND g.attnum <> a.attnum AND a.attname = ANY(:cols)"
)

# Objects that stop ALTER COLUMN TYPE or would be broken by it, per affected
# table: (what, SQL returning (name, the schema-qualified relation it is on
# when not the table), the SQL that removes it). Every one is reported.
_BLOCKING_OBJECTS: list[tuple[str, str, str]] = [
    (
        "check/exclusion constraint",
        "SELECT DISTINCT c.conname, '' FROM pg_constraint c JOIN pg_attribute a"
        " ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey)"
        " WHERE c.conrelid = to_regclass(:t) AND c.contype IN ('c', 'x')"
        " AND a.attname = ANY(:cols) ORDER BY 1",
        "ALTER TABLE {on} DROP CONSTRAINT {name}",
    ),
    (
        # An UPDATE rule of an affected table rewrites the migration's own
        # UPDATEs (the online backfill's). Other rules over the columns are
        # recreated as views are (find_views).
        "rule",
        "SELECT DISTINCT r.rulename, quote_ident(n.nspname) || '.' || quote_ident(c.relname)"
        " FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE r.rulename <> '_RETURN'"
        " AND r.ev_class = to_regclass(:t) AND r.ev_type = '2' ORDER BY 1",
        "DROP RULE {name} ON {on}",
    ),
    (
        # UPDATE OF <column> and WHEN (...) conditions pin the column.
        "trigger with a column list or WHEN condition",
        "SELECT DISTINCT g.tgname, '' FROM pg_depend d"
        " JOIN pg_trigger g ON d.classid = 'pg_trigger'::regclass AND d.objid = g.oid"
        " JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid"
        " WHERE d.refobjid = to_regclass(:t) AND a.attname = ANY(:cols) ORDER BY 1",
        "DROP TRIGGER {name} ON {on}",
    ),
    (
        "row-level security policy",
        "SELECT DISTINCT p.polname, '' FROM pg_depend d"
        " JOIN pg_policy p ON d.classid = 'pg_policy'::regclass AND d.objid = p.oid"
        " JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid"
        " WHERE d.refobjid = to_regclass(:t) AND a.attname = ANY(:cols) ORDER BY 1",
        "DROP POLICY {name} ON {on}",
    ),
    (
        "generated column",
        f"SELECT DISTINCT r.g, '' FROM ({GENERATED_READERS}) AS r(g, a) ORDER BY 1",
        "ALTER TABLE {on} DROP COLUMN {name}",
    ),
]


def find_blockers(
    connection: Connection, inspector: Inspector, table: str, affected: dict[str, set[str]]
) -> list[str]:
    """Constraints, rules, triggers, policies, generated columns and indexes that
    pin an affected column's type (views: :func:`find_views`)."""
    problems: list[str] = []
    for t, cols in sorted(_with_below(connection, affected).items()):
        params = _params(connection, t, cols)
        here, listed = qualified(connection, t), _columns_list(connection, cols)
        for what, sql, removal in _BLOCKING_OBJECTS:
            for name, on in connection.execute(text_sql(connection.dialect, sql), params).all():
                drop = removal.format(name=_quote(connection, name), on=on or here)
                problems.append(
                    f"{what} {_quote(connection, name)} on {on or here} uses {listed} of"
                    f" {here}; drop it first ({drop}) and recreate it for the UUID column"
                    " after"
                )
        problems += _blocking_indexes(connection, t, cols)
        problems += _filtered_publications(connection, t)
    return problems


def _columns_list(connection: Connection, cols: set[str]) -> str:
    return ", ".join(_quote(connection, c) for c in sorted(cols))


def _filtered_publications(connection: Connection, table: str) -> list[str]:
    """Publications with a column list or a row filter on ``table`` (PostgreSQL 15+):
    their list names columns by number, and the converted key is another
    column -- after the change every UPDATE and DELETE of the table would fail
    ("publication does not publish the replica identity")."""
    if (connection.dialect.server_version_info or (0,)) < (15,):
        return []
    rows = connection.execute(
        sa.text(
            "SELECT p.pubname, r.prattrs IS NOT NULL FROM pg_publication_rel r"
            " JOIN pg_publication p ON p.oid = r.prpubid WHERE r.prrelid = to_regclass(:t)"
            " AND (r.prattrs IS NOT NULL OR r.prqual IS NOT NULL) ORDER BY 1"
        ),
        _params(connection, table),
    ).all()
    q = quoter(connection.dialect)
    here = qualified(connection, table)
    return [
        f"publication {q(name)} publishes {here} with a"
        f" {'column list' if columns else 'row filter'}, which pins the key column; run"
        f" ALTER PUBLICATION {q(name)} DROP TABLE {here} before the migration and add"
        " the table back after it"
        for name, columns in rows
    ]


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
    here = qualified(connection, table)
    schema = here[: -len(_quote(connection, table)) - 1]
    for row in connection.execute(_INDEXES, _params(connection, table, cols)).mappings():
        text = " ".join(str(row[k]) for k in ("exprs", "pred") if row[k])
        used = analysis.mentions(text, sorted(cols), IDENTIFIER_QUOTE) if text else []
        if used or row["explicit_opclass"]:
            why = "an expression or predicate over" if used else "an explicit operator class on"
            index = _quote(connection, row["relname"])
            problems.append(
                f"index {index} on {here} has {why}"
                f" {_columns_list(connection, set(used or cols))}; drop it first"
                f" (DROP INDEX {schema}.{index}) and recreate it for the UUID column after"
            )
    return problems


# Views over the columns (pg_depend from their _RETURN rule to a column), then
# views over those views, recursively: a view can only be dropped once the
# views built on it are gone, so they are dropped deepest first and recreated
# in the opposite order. Only view rules count here: a table's own RULEs are
# _RULES'.
_VIEWS = sa.text(
    """
    WITH RECURSIVE deps(oid, level, depends_on) AS (
        SELECT DISTINCT r.ev_class, 1, :t_name || '.' || quote_ident(a.attname)
        FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
        JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
        WHERE d.classid = 'pg_rewrite'::regclass AND d.refobjid = to_regclass(:t)
          AND r.rulename = '_RETURN' AND r.ev_class <> d.refobjid AND a.attname = ANY(:cols)
        UNION
        SELECT r.ev_class, deps.level + 1, 'view ' || quote_ident(vn.nspname) || '.'
               || quote_ident(v.relname)
        FROM deps JOIN pg_class v ON v.oid = deps.oid
        JOIN pg_namespace vn ON vn.oid = v.relnamespace
        JOIN pg_depend d ON d.refobjid = deps.oid AND d.classid = 'pg_rewrite'::regclass
        JOIN pg_rewrite r ON r.oid = d.objid
        WHERE r.ev_class <> deps.oid AND r.rulename = '_RETURN'
    )
    SELECT c.relname, quote_ident(n.nspname) || '.' || quote_ident(c.relname) AS label,
           c.oid::regclass::text AS qualified, c.relkind, c.relispopulated, deps.level,
           deps.depends_on, pg_get_viewdef(c.oid) AS definition, c.reloptions,
           CASE WHEN c.relowner <> (SELECT oid FROM pg_roles WHERE rolname = current_user)
                THEN quote_ident(pg_get_userbyid(c.relowner)) END AS owner,
           obj_description(c.oid, 'pg_class') AS comment,
           ARRAY(SELECT 'GRANT ' || a.privilege_type || ' ON ' || c.oid::regclass::text
                        || ' TO ' || CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                                          ELSE quote_ident(pg_get_userbyid(a.grantee)) END
                        || CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END
                 FROM aclexplode(c.relacl) a WHERE a.grantee <> c.relowner
                 ORDER BY 1) AS grants,
           ARRAY(SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i
                 WHERE i.indrelid = c.oid ORDER BY i.indexrelid) AS indexes
    FROM deps JOIN pg_class c ON c.oid = deps.oid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('v', 'm')
    ORDER BY deps.level, c.oid, deps.depends_on
    """
)


def find_views(
    connection: Connection,
    inspector: Inspector,
    affected: dict[str, set[str]],
    blockers: Blockers | None = None,
    *,
    refresh_populated: bool = False,
) -> list[View]:
    """Views over affected columns (and views over those), in the order to recreate
    them, named ``schema.view`` (a view of another schema may share a table's
    name). A materialized view left unpopulated (``WITH NO DATA``) is recreated
    so, with its indexes; a populated one is added to ``blockers`` (its rows may
    be older than its tables', and recreating it would recompute them) -- unless
    ``refresh_populated`` (the online swap, which recreates it in the swap's
    transaction: its old rows hold the old keys' type, which it cannot keep, so
    it is created ``WITH NO DATA`` and refreshed once its indexes are back)."""
    found: dict[str, tuple[int, View]] = {}
    # (A view or rule over a partition's or an inheriting table's column pins
    # it as one over the table's does: the conversion recurses into them.)
    affected = _with_below(connection, affected)
    for t, cols in sorted(affected.items()):
        params = {**_params(connection, t, cols), "t_name": qualified(connection, t)}
        for r in connection.execute(_VIEWS, params).mappings():
            materialized = r["relkind"] == "m"
            refresh = materialized and bool(r["relispopulated"]) and refresh_populated
            if materialized and r["relispopulated"] and not refresh:
                if blockers is not None:
                    blockers.add(
                        f"materialized view {r['label']} depends on {r['depends_on']} and"
                        " holds rows, which recreating it would recompute; drop it first"
                        f" (DROP MATERIALIZED VIEW {r['label']}) and create it again after"
                        " the migration"
                    )
                continue
            options = f" WITH ({', '.join(r['reloptions'])})" if r["reloptions"] else ""
            kind = "MATERIALIZED VIEW" if materialized else "VIEW"
            view = View(
                name=r["relname"],
                label=r["label"],
                depends_on=r["depends_on"],
                create_sql=f"CREATE {kind} {r['qualified']}{options} AS"
                f" {str(r['definition']).strip().rstrip(';')}"
                + (" WITH NO DATA" if materialized else ""),
                drop_sql=f"DROP {kind} IF EXISTS {r['qualified']}",
                after_sql=_view_extras(connection, r, kind, refresh),
            )
            level = int(r["level"])
            if r["qualified"] not in found or found[r["qualified"]][0] < level:
                found[r["qualified"]] = (level, view)
    views = [view for _level, view in sorted(found.values(), key=lambda lv: lv[0])]
    return views + _rules(connection, affected)


# Rules over the columns that are not a view's (_RETURN) and rewrite no UPDATE
# of an affected table (those are refused: find_blockers): Sakila's port
# redirects each INSERT into payment to its month's child with one. A rule
# pins the columns' types as a view does and follows a renamed column, so it
# goes and comes back as the views do, after them (nothing is built on a
# rule).
_RULES = sa.text(
    """
    SELECT DISTINCT r.oid, r.rulename, quote_ident(n.nspname) || '.' || quote_ident(c.relname)
           AS on_table, :t_name || '.' || quote_ident(a.attname) AS depends_on,
           pg_get_ruledef(r.oid) AS definition, obj_description(r.oid, 'pg_rewrite') AS comment
    FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
    JOIN pg_class c ON c.oid = r.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
    WHERE d.classid = 'pg_rewrite'::regclass AND d.refobjid = to_regclass(:t)
      AND r.rulename <> '_RETURN' AND a.attname = ANY(:cols)
      AND NOT (r.ev_type = '2' AND r.ev_class = ANY(CAST(:affected AS regclass[])))
    ORDER BY 1
    """
)


def _rules(connection: Connection, affected: dict[str, set[str]]) -> list[View]:
    tables = [_quote(connection, t) for t in sorted(affected)]
    rules: dict[int, View] = {}
    for t, cols in sorted(affected.items()):
        params = {**_params(connection, t, cols), "t_name": qualified(connection, t)}
        for r in connection.execute(_RULES, {**params, "affected": tables}).mappings():
            if r["oid"] in rules:
                continue
            name = f"{_quote(connection, r['rulename'])} ON {r['on_table']}"
            comment = (
                [f"COMMENT ON RULE {name} IS {literal(connection, r['comment'])}"]
                if r["comment"] is not None
                else []
            )
            rules[r["oid"]] = View(
                name=str(r["rulename"]),
                label=f"{_quote(connection, r['rulename'])} on {r['on_table']}",
                depends_on=str(r["depends_on"]),
                create_sql=str(r["definition"]).strip().rstrip(";"),
                drop_sql=f"DROP RULE IF EXISTS {name}",
                after_sql=comment,
                kind="rule",
            )
    return list(rules.values())


def _view_extras(connection: Connection, row: Any, kind: str, refresh: bool = False) -> list[str]:
    """What ``CREATE VIEW`` does not carry over: owner, comment and grants (and a
    materialized view's indexes, then its rows when ``refresh``: built once, with
    the indexes in place, as ``REFRESH`` would rebuild them anyway)."""
    q = row["qualified"]
    sql = [f"ALTER {kind} {q} OWNER TO {row['owner']}"] if row["owner"] else []
    if row["comment"] is not None:
        sql.append(f"COMMENT ON {kind} {q} IS {literal(connection, row['comment'])}")
    if kind != "VIEW":
        sql += list(row["indexes"] or [])
    if refresh:
        sql.append(f"REFRESH MATERIALIZED VIEW {q}")
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


def _below(connection: Connection, table: str) -> list[str]:
    """The tables below ``table`` (partitions, tables that inherit from it, any
    depth) in the current schema: they have its columns, converted with it."""
    rows = connection.execute(
        sa.text(
            "WITH RECURSIVE below(oid) AS ("
            " SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass(:t)"
            " UNION SELECT i.inhrelid FROM pg_inherits i JOIN below b ON i.inhparent = b.oid)"
            " SELECT c.relname FROM below b JOIN pg_class c ON c.oid = b.oid"
            " WHERE c.relnamespace = quote_ident(current_schema())::regnamespace ORDER BY 1"
        ),
        _params(connection, table),
    ).scalars()
    return [str(name) for name in rows]


def _with_below(connection: Connection, affected: dict[str, set[str]]) -> dict[str, set[str]]:
    """``affected`` and the tables below each, with the same columns."""
    found = {t: set(cols) for t, cols in affected.items()}
    for t, cols in sorted(affected.items()):
        for below in _below(connection, t):
            found.setdefault(below, set()).update(cols)
    return found


def find_dependents(
    connection: Connection,
    inspector: Inspector,
    table: str,
    column: str,
    affected: dict[str, set[str]],
) -> list[Dependent]:
    """PK/unique constraints and indexes over affected columns (for the dry run:
    PostgreSQL rebuilds them itself when the column changes type; the online
    mode builds each again).

    A partitioned table's index stands for the pieces attached to it on each
    partition (not listed); a partition's own index (pagila declares one per
    partition), or an inheriting table's (Sakila's port), is listed, ``via``
    the topmost table of the tree, whose column it is."""
    deps: list[Dependent] = []
    for t, cols in sorted(_with_below(connection, affected).items()):
        params = _params(connection, t, cols)
        via = connection.execute(
            sa.text(
                "WITH RECURSIVE up(oid, depth) AS (SELECT to_regclass(:t)::oid, 0"
                " UNION ALL SELECT i.inhparent, up.depth + 1 FROM pg_inherits i"
                " JOIN up ON i.inhrelid = up.oid WHERE up.depth < 100)"
                " SELECT c.relname FROM up JOIN pg_class c ON c.oid = up.oid"
                " WHERE up.depth > 0 ORDER BY up.depth DESC LIMIT 1"
            ),
            params,
        ).scalar()
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
                "  AND a.attname = ANY(:cols))"
                " AND NOT EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = i.indexrelid)"
                " ORDER BY 1"
            ),
            params,
        ).all()
        for name, kind, definition, ix_cols in rows:
            if t == table and kind == "primary":
                continue
            deps.append(
                Dependent(t, name, kind, list(ix_cols or []), definition, str(via) if via else None)
            )
    return deps


def _sequence(connection: Connection, regclass: str) -> dict[str, Any]:
    """A sequence's schema, name and options, to recreate it exactly; refused by
    name when the role may not read where it stands (``SELECT`` or ``USAGE``):
    recreated without it, the sequence would start over."""
    row = dict(
        connection.execute(
            sa.text(
                "SELECT n.nspname, c.relname, format_type(s.seqtypid, NULL) AS type,"
                " s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle,"
                " has_sequence_privilege(c.oid, 'SELECT,USAGE') AS readable,"
                # (pg_sequence_last_value fails without the privilege: asked only with it)
                " CASE WHEN has_sequence_privilege(c.oid, 'SELECT,USAGE')"
                " THEN pg_sequence_last_value(c.oid) END AS last_value"
                " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " JOIN pg_sequence s ON s.seqrelid = c.oid WHERE c.oid = CAST(:s AS regclass)"
            ),
            {"s": regclass},
        )
        .mappings()
        .one()
    )
    if not row.pop("readable"):
        raise refuse(
            f"the role may not read the sequence {regclass} (SELECT or USAGE), whose"
            " position the migration keeps: grant it, or run the migration as its owner"
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


# The constraints and indexes with a comment over the columns of one table (an
# index of a constraint named for itself too: the online mode builds both anew).
_COMMENTS = sa.text(
    """
    SELECT 'CONSTRAINT' AS kind, c.conname AS name, d.description
    FROM pg_constraint c JOIN pg_description d ON d.objoid = c.oid
      AND d.classoid = 'pg_constraint'::regclass AND d.objsubid = 0
    WHERE c.conrelid = to_regclass(:t) AND EXISTS (SELECT FROM pg_attribute a
      WHERE a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey) AND a.attname = ANY(:cols))
    UNION ALL
    SELECT 'INDEX', ic.relname, d.description
    FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
    JOIN pg_description d ON d.objoid = i.indexrelid
      AND d.classoid = 'pg_class'::regclass AND d.objsubid = 0
    WHERE i.indrelid = to_regclass(:t) AND EXISTS (SELECT FROM pg_attribute a
      WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) AND a.attname = ANY(:cols))
    ORDER BY 1, 2
    """
)


def comment_sql(connection: Connection, plan: PkMigrationPlan) -> list[str]:
    """``COMMENT ON CONSTRAINT``/``INDEX`` for each constraint and index with a
    comment over a converted column (the key, each reference; partitions' and
    inheriting tables' own too), by name: the conversion keeps the names, and
    its foreign keys dropped and added back, the online mode's new indexes and
    constraints, lose the comments."""
    affected: dict[str, set[str]] = {}
    for table, column in plan.targets():
        affected.setdefault(table, set()).add(column)
    for ref in plan.references:
        affected.setdefault(ref.table, set()).add(ref.column)
    sql = []
    for table, cols in sorted(_with_below(connection, affected).items()):
        schema = schema_of(connection, table)
        for kind, name, description in connection.execute(
            _COMMENTS, _params(connection, table, cols)
        ).all():
            target = (
                f"{_quote(connection, name)} ON {_quote(connection, table)}"
                if kind == "CONSTRAINT"
                else f"{schema}.{_quote(connection, name)}"
            )
            sql.append(f"COMMENT ON {kind} {target} IS {literal(connection, description)}")
    return sql


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


def update_triggers(connection: Connection, affected: dict[str, set[str]]) -> list[ParkedTrigger]:
    """None set aside: the offline rewrite disables the user triggers meanwhile (``quiet``)."""
    return []
