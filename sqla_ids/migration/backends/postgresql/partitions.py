"""PostgreSQL online: a partitioned child's indexes and foreign keys, built
partition by partition without blocking writes.

PostgreSQL builds neither an index ``CONCURRENTLY`` nor a foreign key ``NOT
VALID`` on a partitioned table (the latter until 18). Each is built where
it can be, then joined to the partitioned table by the catalog alone:

* an index: an invalid shell ``ON ONLY`` the partitioned table (and each
  partitioned partition), one ``CREATE INDEX CONCURRENTLY`` per leaf
  partition, then ``ALTER INDEX ... ATTACH PARTITION`` from the leaves up --
  the shell turns valid when its last partition is attached (PostgreSQL's
  own recipe for partitioned indexes, "CREATE INDEX ... ON ONLY");
* a foreign key: ``NOT VALID`` then ``VALIDATE`` on each leaf partition
  (neither blocks the application's writes); the swap adds it to the
  partitioned table, which adopts each leaf's validated constraint instead
  of checking the rows again (a catalog change, under the swap's lock).

The pieces are named after the object and the partition's oid
(:func:`piece`): a step killed half-way finds what it built. The swap gives
them the names the old column's pieces had (:func:`index_pieces`,
:func:`foreign_key_pieces`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import quote_name, quoter
from sqla_ids.migration.core.sql import Statement


@dataclass(frozen=True)
class Partition:
    """One partition below a partitioned table (any depth)."""

    oid: int
    name: str
    """Quoted (schema-qualified where the search path needs it) by the server."""
    parent_oid: int
    leaf: bool
    level: int


def _regclass(connection: Connection, table: str) -> str:
    return quote_name(connection.dialect, table)


def is_partitioned(connection: Connection, table: str) -> bool:
    """Whether ``table`` is a partitioned table (``relkind = 'p'``)."""
    return bool(
        connection.execute(
            sa.text("SELECT relkind = 'p' FROM pg_class WHERE oid = to_regclass(:t)"),
            {"t": _regclass(connection, table)},
        ).scalar()
    )


def tree(connection: Connection, table: str) -> list[Partition]:
    """The partitions below ``table``, level by level (none for a plain table)."""
    rows = connection.execute(
        sa.text(
            "SELECT p.relid::oid::bigint, p.relid::regclass::text, p.parentrelid::oid::bigint,"
            " p.isleaf, p.level FROM pg_partition_tree(to_regclass(:t)) p"
            " WHERE p.level > 0 ORDER BY p.level, 2"
        ),
        {"t": _regclass(connection, table)},
    ).all()
    return [Partition(int(o), str(n), int(po), bool(leaf), int(lv)) for o, n, po, leaf, lv in rows]


def inheriting(connection: Connection, table: str) -> list[str]:
    """The tables below ``table`` by plain inheritance (``INHERITS``, any depth;
    partitions are not), quoted by the server: they share its columns, but not
    its triggers, which each needs of its own."""
    rows = connection.execute(
        sa.text(
            "WITH RECURSIVE below(oid) AS ("
            " SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass(:t)"
            " UNION SELECT i.inhrelid FROM pg_inherits i JOIN below b ON i.inhparent = b.oid)"
            " SELECT c.oid::regclass::text FROM below b JOIN pg_class c ON c.oid = b.oid"
            " WHERE NOT c.relispartition ORDER BY 1"
        ),
        {"t": _regclass(connection, table)},
    ).scalars()
    return [str(name) for name in rows]


def piece(name: str, oid: int) -> str:
    """The name of ``name``'s piece on partition ``oid`` (within 63 bytes:
    ``name`` is one of the migration's own, at most 30)."""
    return f"{name}_p{oid}"


def _root_oid(connection: Connection, table: str) -> int:
    return int(
        connection.execute(
            sa.text("SELECT to_regclass(:t)::oid::bigint"), {"t": _regclass(connection, table)}
        ).scalar_one()
    )


def existing_indexes(connection: Connection, names: list[str]) -> set[str]:
    """Those of ``names`` that are indexes here."""
    return set(_index_state(connection, names))


def _index_state(connection: Connection, names: list[str]) -> dict[str, tuple[bool, bool]]:
    """Index name -> (valid, attached to a parent index), for those that exist."""
    rows = connection.execute(
        sa.text(
            "SELECT c.relname, i.indisvalid,"
            " EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = c.oid)"
            " FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
            " WHERE c.relname = ANY(:n)"
            " AND c.relnamespace = quote_ident(current_schema())::regnamespace"
        ),
        {"n": names},
    ).all()
    return {str(n): (bool(v), bool(a)) for n, v, a in rows}


def index_shells(
    connection: Connection, table: str, columns: list[str], name: str, unique: bool
) -> list[Statement]:
    """The invalid shells ``ON ONLY`` the partitioned table and each partitioned
    partition (catalog only: a moment's ``SHARE`` lock each, under the step's
    lock timeout)."""
    q = quoter(connection.dialect)
    cols = ", ".join(q(c) for c in columns)
    kind = "UNIQUE INDEX" if unique else "INDEX"
    shells = [(name, q(table))] + [
        (piece(name, p.oid), p.name) for p in tree(connection, table) if not p.leaf
    ]
    return [
        Statement(f"CREATE {kind} IF NOT EXISTS {q(n)} ON ONLY {on} ({cols})") for n, on in shells
    ]


def index_leaves(
    connection: Connection, table: str, columns: list[str], name: str, unique: bool
) -> list[Statement]:
    """One ``CREATE INDEX CONCURRENTLY`` per leaf partition still without its
    piece (an interrupted build, left invalid, is dropped and built again)."""
    q = quoter(connection.dialect)
    cols = ", ".join(q(c) for c in columns)
    kind = "UNIQUE INDEX" if unique else "INDEX"
    leaves = [p for p in tree(connection, table) if p.leaf]
    state = _index_state(connection, [piece(name, p.oid) for p in leaves])
    statements: list[Statement] = []
    for p in leaves:
        n = piece(name, p.oid)
        valid = state.get(n, (None, False))[0]
        if valid:
            continue
        if valid is False:
            statements.append(Statement(f"DROP INDEX CONCURRENTLY IF EXISTS {q(n)}"))
        statements.append(Statement(f"CREATE {kind} CONCURRENTLY {q(n)} ON {p.name} ({cols})"))
    return statements


def index_attach(connection: Connection, table: str, name: str) -> list[Statement]:
    """Each piece attached to its parent's, deepest first: the shells turn valid."""
    q = quoter(connection.dialect)
    root = _root_oid(connection, table)
    parts = tree(connection, table)
    state = _index_state(connection, [piece(name, p.oid) for p in parts])
    statements = []
    for p in sorted(parts, key=lambda p: -p.level):
        n = piece(name, p.oid)
        if n in state and not state[n][1]:
            parent = name if p.parent_oid == root else piece(name, p.parent_oid)
            statements.append(Statement(f"ALTER INDEX {q(parent)} ATTACH PARTITION {q(n)}"))
    return statements


def index_pieces(connection: Connection, index: str) -> list[tuple[int, str]]:
    """``(partition oid, index name)`` of every index attached below ``index``."""
    rows = connection.execute(
        sa.text(
            "WITH RECURSIVE below(oid) AS ("
            " SELECT h.inhrelid FROM pg_inherits h WHERE h.inhparent = to_regclass(:i)"
            " UNION ALL SELECT h.inhrelid FROM pg_inherits h JOIN below b ON h.inhparent = b.oid)"
            " SELECT i.indrelid::bigint, c.relname FROM below b JOIN pg_index i"
            " ON i.indexrelid = b.oid JOIN pg_class c ON c.oid = b.oid ORDER BY 1"
        ),
        {"i": _regclass(connection, index)},
    ).all()
    return [(int(o), str(n)) for o, n in rows]


def foreign_key_leaves(
    connection: Connection, table: str, name: str, definition: str
) -> list[tuple[str, Statement]]:
    """``(partition, statement)``: the foreign key ``NOT VALID`` on each leaf
    partition still without it (``definition``: ``FOREIGN KEY (...) REFERENCES
    ... <actions>``)."""
    q = quoter(connection.dialect)
    leaves = [p for p in tree(connection, table) if p.leaf]
    have = existing_constraints(connection, [piece(name, p.oid) for p in leaves])
    return [
        (
            p.name,
            Statement(
                f"ALTER TABLE {p.name} ADD CONSTRAINT {q(piece(name, p.oid))}"
                f" {definition} NOT VALID"
            ),
        )
        for p in leaves
        if piece(name, p.oid) not in have
    ]


def foreign_key_validations(connection: Connection, table: str, name: str) -> list[Statement]:
    """``VALIDATE`` of each leaf's piece not validated yet (a scan of that leaf
    alone, under a lock that lets writes through)."""
    q = quoter(connection.dialect)
    leaves = [p for p in tree(connection, table) if p.leaf]
    have = existing_constraints(connection, [piece(name, p.oid) for p in leaves])
    return [
        Statement(f"ALTER TABLE {p.name} VALIDATE CONSTRAINT {q(piece(name, p.oid))}")
        for p in leaves
        if have.get(piece(name, p.oid)) is False
    ]


def existing_constraints(connection: Connection, names: list[str]) -> dict[str, bool]:
    """Constraint name -> validated, for those of ``names`` that exist here."""
    rows = connection.execute(
        sa.text(
            "SELECT conname, convalidated FROM pg_constraint WHERE conname = ANY(:n)"
            " AND connamespace = quote_ident(current_schema())::regnamespace"
        ),
        {"n": names},
    ).all()
    return {str(n): bool(v) for n, v in rows}


def foreign_key_pieces(
    connection: Connection, table: str, constraint: str
) -> list[tuple[int, str, str]]:
    """``(partition oid, partition, constraint name)`` of each leaf partition's
    piece of ``table``'s foreign key ``constraint``."""
    rows = connection.execute(
        sa.text(
            "WITH RECURSIVE below(oid) AS ("
            " SELECT k.oid FROM pg_constraint k WHERE k.conrelid = to_regclass(:t)"
            " AND k.conname = :c"
            " UNION ALL SELECT k.oid FROM pg_constraint k JOIN below b ON k.conparentid = b.oid)"
            " SELECT k.conrelid::bigint, k.conrelid::regclass::text, k.conname"
            " FROM below b JOIN pg_constraint k ON k.oid = b.oid"
            " JOIN pg_class r ON r.oid = k.conrelid WHERE r.relkind = 'r' ORDER BY 1"
        ),
        {"t": _regclass(connection, table), "c": constraint},
    ).all()
    return [(int(o), str(t), str(n)) for o, t, n in rows]
