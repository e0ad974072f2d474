"""Whole-database fingerprints for migration round trips (a test helper).

``schema(conn)`` describes every table, column (in order), index, constraint,
trigger, view, comment and grant as the database itself prints them;
``rows(conn)`` every row of every table, each value as text. A downgrade is
correct when both equal what they were before the upgrade. ``relations``
gives, per foreign key, the multiset of (child row's other columns, parent
row's other columns) joined through it: it must survive the upgrade too.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.migration.backends import backend_for
from sqla_ids.migration.core.state import STATE_TABLE


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return "0x" + bytes(value).hex()
    return repr(value)


def _quote(conn: Connection, name: str) -> str:
    """``name`` quoted as the server reads it (SQLAlchemy's preparer doubles ``%``
    for the drivers that read it as a placeholder -- on 2.0 mysql-connector's
    too, which does not with no parameters)."""
    p = conn.dialect.identifier_preparer
    return str(p.initial_quote + name.replace(p.escape_quote, p.escape_to_quote) + p.final_quote)


def _query(conn: Connection, sql: str) -> Any:
    """``sql`` sent as written: with no parameters no driver reads ``%`` in it."""
    return conn.exec_driver_sql(sql, execution_options={"no_parameters": True})


def tables(conn: Connection) -> list[str]:
    """User tables (not sqla_ids' own: the state table and mapping tables)."""
    names = sa.inspect(conn).get_table_names()
    return sorted(n for n in names if n != STATE_TABLE and not n.endswith("_uuid7_map"))


def rows(conn: Connection, only: list[str] | None = None) -> dict[str, list[tuple[str, ...]]]:
    """Every row of every table, values as text, sorted."""
    result = {}
    q = functools.partial(_quote, conn)
    for t in only or tables(conn):
        data = _query(conn, f"SELECT * FROM {q(t)}").all()
        result[t] = sorted(tuple(_text(v) for v in row) for row in data)
    return result


def view_rows(conn: Connection) -> dict[str, list[tuple[str, ...]]]:
    """Every row every view (and populated materialized view) returns, as :func:`rows`."""
    inspector = sa.inspect(conn)
    names = list(inspector.get_view_names())
    if conn.dialect.name == "postgresql":
        names += [
            str(m)
            for m in conn.exec_driver_sql(
                "SELECT matviewname FROM pg_matviews WHERE schemaname = current_schema()"
                " AND ispopulated"
            ).scalars()
        ]
    q = functools.partial(_quote, conn)
    return {
        v: sorted(tuple(_text(x) for x in row) for row in _query(conn, f"SELECT * FROM {q(v)}"))
        for v in sorted(names)
    }


def _pg_schema(conn: Connection) -> list[str]:
    queries = {
        "column": "SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),"
        " a.attnotnull, a.attidentity, pg_get_expr(d.adbin, d.adrelid),"
        " col_description(c.oid, a.attnum), a.attacl::text"
        " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
        " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
        " WHERE c.relnamespace = quote_ident(current_schema())::regnamespace AND a.attnum > 0"
        " AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'v', 'm')",
        "index": "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema()",
        "constraint": "SELECT c.relname, k.conname, pg_get_constraintdef(k.oid)"
        " FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid"
        " WHERE c.relnamespace = quote_ident(current_schema())::regnamespace",
        "trigger": "SELECT pg_get_triggerdef(g.oid), g.tgenabled FROM pg_trigger g"
        " JOIN pg_class c ON c.oid = g.tgrelid"
        " WHERE c.relnamespace = quote_ident(current_schema())::regnamespace"
        " AND NOT g.tgisinternal",
        "relation": "SELECT relname, relkind, relacl::text, obj_description(oid, 'pg_class')"
        " FROM pg_class WHERE relnamespace = quote_ident(current_schema())::regnamespace"
        " AND relkind IN ('r', 'p', 'v', 'm', 'S')",
        "view": "SELECT viewname, definition FROM pg_views WHERE schemaname = current_schema()",
        # (The relations' own are above; an index's and a constraint's here.)
        "comment": "SELECT c.relname, obj_description(c.oid, 'pg_class') FROM pg_class c"
        " WHERE c.relnamespace = quote_ident(current_schema())::regnamespace"
        " AND c.relkind IN ('i', 'I') AND obj_description(c.oid, 'pg_class') IS NOT NULL"
        " UNION ALL SELECT k.conname, obj_description(k.oid, 'pg_constraint')"
        " FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid"
        " WHERE c.relnamespace = quote_ident(current_schema())::regnamespace"
        " AND obj_description(k.oid, 'pg_constraint') IS NOT NULL",
        "rule": "SELECT tablename, rulename, definition FROM pg_rules"
        " WHERE schemaname = current_schema()",
        "sequence": "SELECT sequencename, data_type::text, start_value, increment_by,"
        " last_value FROM pg_sequences WHERE schemaname = current_schema()",
    }
    out = []
    for kind, sql in queries.items():
        for row in conn.exec_driver_sql(sql).all():
            out.append(f"{kind}: {tuple(_text(v) for v in row)}")
    return out


def _mariadb_schema(conn: Connection) -> list[str]:
    q = functools.partial(_quote, conn)
    out = []
    for t in tables(conn):
        create = str(_query(conn, f"SHOW CREATE TABLE {q(t)}").one()[1])
        lines = [ln.strip().rstrip(",") for ln in create.split("\n")]
        # Columns and keys in the order the server prints them: a positional
        # consumer (or a diff of two dumps) sees the order, so a round trip keeps it.
        columns = [ln for ln in lines if ln.startswith("`")]
        keys = [ln for ln in lines[1:-1] if not ln.startswith("`")]
        out += [f"table {t}: {lines[-1]}", *(f"{t} column: {c}" for c in columns)]
        out += [f"{t} key {n:03d}: {k}" for n, k in enumerate(keys)]
    for sql in (
        "SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE, ACTION_TIMING, EVENT_MANIPULATION,"
        " ACTION_STATEMENT FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()",
        "SELECT TABLE_NAME, VIEW_DEFINITION FROM information_schema.VIEWS"
        " WHERE TABLE_SCHEMA = DATABASE()",
        "SELECT ROUTINE_NAME, ROUTINE_TYPE, ROUTINE_DEFINITION FROM information_schema.ROUTINES"
        " WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME NOT LIKE 'sqla\\_ids\\_%'",
    ):
        out += [f"object: {tuple(_text(v) for v in row)}" for row in conn.execute(sa.text(sql))]
    return out


def _sqlite_schema(conn: Connection) -> list[str]:
    data = conn.exec_driver_sql(
        "SELECT type, name, tbl_name, sql FROM sqlite_master"
        " WHERE name NOT LIKE 'sqlite_%' AND name NOT LIKE '%\\_uuid7\\_map' ESCAPE '\\'"
        " AND name <> ?",
        (STATE_TABLE,),
    ).all()
    seq = []
    if conn.exec_driver_sql(
        "SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_sequence'"
    ).scalar():
        seq = conn.exec_driver_sql("SELECT name, seq FROM sqlite_sequence").all()
    return [f"{tuple(_text(v) for v in r)}" for r in data] + [f"seq {tuple(r)}" for r in seq]


def structure(conn: Connection) -> list[str]:
    """:func:`schema` without the counters an application's inserts move
    (sequences, ``AUTO_INCREMENT=``): what a round trip with an application
    writing meanwhile must give back."""
    return sorted(
        re.sub(r" AUTO_INCREMENT=\d+", "", line)
        for line in schema(conn)
        if not line.startswith("sequence:")
    )


def schema(conn: Connection) -> list[str]:
    """Every schema object of the current schema/database, as sorted text lines."""
    name = conn.dialect.name
    if name == "postgresql":
        lines = _pg_schema(conn)
    elif name in ("mysql", "mariadb"):
        lines = _mariadb_schema(conn)
    else:
        lines = _sqlite_schema(conn)
    return sorted(line for line in lines if "_uuid7_map" not in line and STATE_TABLE not in line)


def relations(conn: Connection) -> dict[str, Counter[tuple[str, ...]]]:
    """Per foreign key: the multiset of (child's other columns + parent's other
    columns) of every joined pair, keys themselves left out (they change)."""
    inspector = sa.inspect(conn)
    reflect = backend_for(conn).reflect  # reads names with backticks right
    q = functools.partial(_quote, conn)
    result: dict[str, Counter[tuple[str, ...]]] = {}
    fks = reflect.foreign_keys(conn, inspector)
    # Key columns (primary keys, every FK column, old keys) change: left out.
    keyish: dict[str, set[str]] = {}
    for fk in fks:
        keyish.setdefault(fk["table"], set()).update(fk["constrained_columns"])
        keyish.setdefault(fk["referred_table"], set()).update(fk["referred_columns"])
    for fk in fks:
        t = fk["table"]
        if t not in tables(conn):
            continue
        parent = fk["referred_table"]
        keys_c = set(fk["constrained_columns"])
        keys_p = set(fk["referred_columns"])
        cols_c = [
            c["name"]
            for c in reflect.columns(conn, inspector, t).values()
            if c["name"] not in keys_c | keyish.get(t, set()) and not _key_like(c)
        ]
        cols_p = [
            c["name"]
            for c in reflect.columns(conn, inspector, parent).values()
            if c["name"] not in keys_p | keyish.get(parent, set()) and not _key_like(c)
        ]
        on = " AND ".join(
            f"c.{q(a)} = p.{q(b)}"
            for a, b in zip(fk["constrained_columns"], fk["referred_columns"], strict=True)
        )
        select = ", ".join([f"c.{q(c)}" for c in cols_c] + [f"p.{q(c)}" for c in cols_p])
        data = _query(
            conn, f"SELECT {select or '1'} FROM {q(t)} c JOIN {q(parent)} p ON {on}"
        ).all()
        result[f"{t}({', '.join(fk['constrained_columns'])})->{parent}"] = Counter(
            tuple(_text(v) for v in row) for row in data
        )
    return result


def _key_like(column: dict[str, Any]) -> bool:
    """Columns whose values the migration changes or adds (ids, old keys, FKs to
    migrated keys): left out of the relation fingerprint."""
    name = str(column["name"]).lower()
    return name.endswith(("id", "_old")) or "uuid" in str(column["type"]).lower()
