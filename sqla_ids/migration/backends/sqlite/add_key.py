"""SQLite: adding a UUIDv7 primary key by rebuilding the table, in one transaction.

SQLite cannot add a primary key to a table, so the key column is added
(nullable) and filled by ``rowid`` -- every table without a primary key has
one, and it is the physical order -- then the table is recreated from its
own ``CREATE TABLE`` text, edited (:mod:`~sqla_ids.migration.backends.sqlite.create_sql`'s
tokenizer: the key made ``NOT NULL PRIMARY KEY``, a dropped unique constraint
taken out, everything else byte for byte -- SQLAlchemy's reflection would lose
comments, collations, ``ON CONFLICT``...), refilled, and its indexes and
triggers replayed from their original SQL. An unnamed ``UNIQUE`` is named by
its index, ``sqlite_autoindex_<table>_<n>``. The original
``CREATE`` statements are recorded: the downgrade replays them verbatim.
Foreign-key enforcement is off meanwhile (see
:func:`~sqla_ids.migration.backends.sqlite.offline.check_foreign_keys_off`)
and ``legacy_alter_table`` keeps other tables' ``REFERENCES`` on the name.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import query_sql
from sqla_ids.errors import MigrationVerificationError
from sqla_ids.migration.backends.add_key import KeyAdder
from sqla_ids.migration.backends.sqlite import writes
from sqla_ids.migration.backends.sqlite.create_sql import CreateTable, Token, unquote
from sqla_ids.migration.backends.sqlite.offline import _OLD_PREFIX, check_foreign_keys_off
from sqla_ids.migration.core.added_key import AddKeyPlan, UniqueKey, quoted
from sqla_ids.migration.core.reflected import Inspector

#: The names SQLite gives the row id; a column may take one of them.
_ROWID_NAMES = ("rowid", "_rowid_", "oid")


def _original_sql(connection: Connection, table: str) -> list[str]:
    """The table's ``CREATE TABLE``, then its indexes' and triggers' ``CREATE``."""
    return list(
        connection.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL"
            " ORDER BY type <> 'table', type = 'trigger', rowid",
            (table,),
        ).scalars()
    )


def _begin(connection: Connection) -> None:
    """Open the driver's transaction now if it has none: Python's ``sqlite3`` opens
    one only before DML, so the first ``ALTER TABLE`` would commit on its own and
    survive a rollback."""
    if not connection.connection.driver_connection.in_transaction:  # type: ignore[union-attr]
        query_sql(connection, "BEGIN")


def _unmangled(name: Any) -> Any:
    """A constraint name as SQLite has it, from SQLAlchemy's reflection, which
    leaves a quoted name's doubled quotes doubled (``a""b`` for ``a"b``)."""
    return name.replace('""', '"') if isinstance(name, str) else name


def _columns(connection: Connection, table: str) -> list[str]:
    return [r[1] for r in query_sql(connection, f"PRAGMA table_info({quoted(connection, table)})")]


class SQLiteKeyAdder(KeyAdder):
    """See the module docstring."""

    transactional = True

    def prepare(self, connection: Connection) -> None:
        """Foreign-key enforcement off before the transaction begins."""
        check_foreign_keys_off(connection)

    def unique_key(self, connection: Connection, table: str, name: str) -> UniqueKey | str | None:
        """A named ``CREATE UNIQUE INDEX`` or a named ``UNIQUE`` constraint."""
        q = quoted(connection, table)
        for _seq, index, unique, origin, partial in query_sql(
            connection, f"PRAGMA index_list({q})"
        ):
            if index != name or not unique:
                continue
            if partial:
                return f"unique index {name} is partial"
            columns = [
                r[2]
                for r in query_sql(connection, f"PRAGMA index_info({quoted(connection, index)})")
            ]
            if any(c is None for c in columns):
                return f"unique index {name} is on an expression"
            definition = connection.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", (index,)
            ).scalar()
            kind = "index" if origin == "c" else "constraint"
            return UniqueKey(name, columns, kind, definition or "")
        for constraint in sa.inspect(connection).get_unique_constraints(table):
            if _unmangled(constraint["name"]) == name:
                return UniqueKey(name, list(constraint["column_names"]), "constraint")
        return None

    def problems(self, connection: Connection, inspector: Inspector, plan: AddKeyPlan) -> list[str]:
        """A row id name left to read; the original SQL, recorded for the downgrade."""
        plan.original_sql = _original_sql(connection, plan.table)
        found = []
        names = {c.lower() for c in _columns(connection, plan.table)}
        if all(n in names for n in _ROWID_NAMES):
            found.append(
                "its columns hide the row id (rowid, _rowid_ and oid are all column names)"
            )
        unique = plan.unique_key
        dropped = unique is not None and unique.kind == "constraint"
        if dropped and not plan.options.keep_unique_key:
            assert unique is not None
            if not unique_spans(CreateTable.parse(plan.original_sql[0]), unique):
                found.append(
                    f"unique constraint {unique.name} ({', '.join(unique.columns)}) is not in"
                    " the table's CREATE TABLE text, so it cannot be dropped; pass"
                    " keep_unique_key=True"
                )
        return found

    @contextmanager
    def quiet(self, connection: Connection, plan: AddKeyPlan) -> Iterator[None]:
        r"""The table's triggers dropped while the fill writes (its ``UPDATE``\ s are
        not the application's), created again from their own SQL after -- in the
        run's transaction: a failure rolls it all back (:func:`.writes.quiet`)."""
        with writes.quiet(connection, plan.table):
            yield

    def start(self, connection: Connection, plan: AddKeyPlan) -> list[sa.ColumnElement[Any]]:
        """The nullable key column; rows are found by their row id."""
        _begin(connection)
        q = functools.partial(quoted, connection)
        query_sql(
            connection,
            f"ALTER TABLE {q(plan.table)} ADD COLUMN {q(plan.column)} {plan.key_type_sql}",
        )
        names = {c.lower() for c in _columns(connection, plan.table)}
        rowid = next(n for n in _ROWID_NAMES if n not in names)
        return [sa.literal_column(rowid, sa.Integer())]

    def finish(self, connection: Connection, plan: AddKeyPlan) -> None:
        """The table recreated from its own ``CREATE TABLE`` text, edited: the key
        column (``ADD COLUMN`` put it last) becomes ``NOT NULL PRIMARY KEY`` and
        the unique key goes when asked; everything else stays byte for byte."""
        current = connection.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (plan.table,)
        ).scalar_one()
        table = CreateTable.parse(current)
        key = table.column(plan.column)
        edits: list[tuple[int, int, str]] = [(key.end, key.end, " NOT NULL PRIMARY KEY")]
        unique = plan.unique_key
        dropped_index = None
        if unique is not None and not plan.options.keep_unique_key:
            if unique.kind == "index":
                dropped_index = unique.definition
            else:
                edits += unique_spans(table, unique)
        create = _edited(current, edits)
        replay = [sql for sql in plan.original_sql[1:] if sql != dropped_index]
        _rebuild(connection, plan.table, create, replay, _columns(connection, plan.table))

    def undo(self, connection: Connection, plan: AddKeyPlan) -> None:
        """The table recreated from its original SQL, every column but the key copied."""
        _begin(connection)
        columns = [c for c in _columns(connection, plan.table) if c != plan.column]
        _rebuild(connection, plan.table, plan.original_sql[0], plan.original_sql[1:], columns)


def _constraint_name(tokens: Sequence[Token], at: int) -> str | None:
    """The name of ``CONSTRAINT <name>`` just before ``tokens[at]``, if any."""
    if at >= 2 and tokens[at - 2].word == "CONSTRAINT":
        return unquote(tokens[at - 1].text)
    return None


def _conflict_end(tokens: Sequence[Token], at: int) -> int:
    """Index of a constraint's last token: ``tokens[at]`` or its ``ON CONFLICT <how>``."""
    if at + 3 < len(tokens) and [t.word for t in tokens[at + 1 : at + 3]] == ["ON", "CONFLICT"]:
        return at + 3
    return at


def _listed_columns(tokens: Sequence[Token]) -> list[str]:
    """The column names of ``( a COLLATE x, "b" DESC )``: each entry's first token."""
    names, depth, first = [], 0, True
    for tok in tokens:
        if tok.text == "(":
            depth += 1
            if depth == 1:
                continue
        elif tok.text == ")":
            depth -= 1
            if depth == 0:
                break
        if depth == 1 and tok.text == ",":
            first = True
        elif depth >= 1 and first:
            names.append(unquote(tok.text))
            first = False
    return names


def unique_spans(table: CreateTable, unique: UniqueKey) -> list[tuple[int, int, str]]:
    """The edits that remove ``unique`` from ``table``'s text: the ``UNIQUE``
    table constraints and column constraints (with their ``CONSTRAINT <name>``
    and ``ON CONFLICT``) named ``unique.name`` -- or, for a name SQLite gave
    (``sqlite_autoindex_<table>_<n>``, the only name an unnamed one has), on
    exactly ``unique.columns``: SQLite makes one index of identical ones, so
    they all go. Empty when none is found."""
    autoindex = unique.name.lower().startswith("sqlite_autoindex_")
    want = [c.lower() for c in unique.columns]

    def matches(name: str | None, columns: list[str]) -> bool:
        if autoindex:
            return [c.lower() for c in columns] == want
        return name is not None and name.lower() == unique.name.lower()

    edits: list[tuple[int, int, str]] = []
    items = table.items
    for n, item in enumerate(items):
        tokens = item.tokens
        if item.column is None:
            at = 2 if tokens[0].word == "CONSTRAINT" else 0
            is_unique = at < len(tokens) and tokens[at].word == "UNIQUE"
            if is_unique and matches(
                _constraint_name(tokens, at), _listed_columns(tokens[at + 1 :])
            ):
                # As DROP COLUMN removes an entry: up to the next one's start
                # (the last one: from the comma before it).
                if n + 1 < len(items):
                    edits.append((item.start, items[n + 1].start, ""))
                else:
                    edits.append((items[n - 1].stop, item.stop, ""))
            continue
        depth = 0
        for i, tok in enumerate(tokens):
            depth += {"(": 1, ")": -1}.get(tok.text, 0)
            if depth or tok.word != "UNIQUE" or i == 0:
                continue
            if matches(_constraint_name(tokens, i), [item.column]):
                first = i - 2 if _constraint_name(tokens, i) is not None else i
                edits.append((tokens[first - 1].end, tokens[_conflict_end(tokens, i)].end, ""))
    return edits


def _edited(sql: str, edits: Sequence[tuple[int, int, str]]) -> str:
    """``sql`` with ``edits`` (start, end, replacement) applied, from the end backwards."""
    for start, end, text in sorted(edits, reverse=True):
        sql = sql[:start] + text + sql[end:]
    return sql


def _rebuild(
    connection: Connection, table: str, create: str, replay: list[str], columns: list[str]
) -> None:
    """Rename ``table`` away, ``create`` it again, copy ``columns``, drop the old
    one, replay the indexes and triggers (after the copy: no trigger fires on it)."""
    q = functools.partial(quoted, connection)
    old = _OLD_PREFIX + table
    legacy = query_sql(connection, "PRAGMA legacy_alter_table").scalar()
    query_sql(connection, "PRAGMA legacy_alter_table=ON")
    try:
        query_sql(connection, f"ALTER TABLE {q(table)} RENAME TO {q(old)}")
        query_sql(connection, create)
        names = ", ".join(map(q, columns))
        query_sql(connection, f"INSERT INTO {q(table)} ({names}) SELECT {names} FROM {q(old)}")
        query_sql(connection, f"DROP TABLE {q(old)}")
        for sql in replay:
            query_sql(connection, sql)
        problems = query_sql(connection, "PRAGMA foreign_key_check").all()
        if problems:
            raise MigrationVerificationError(
                f"foreign key check failed after rebuilding {table}: {problems[:5]}"
            )
    finally:
        query_sql(connection, f"PRAGMA legacy_alter_table={'ON' if legacy else 'OFF'}")
