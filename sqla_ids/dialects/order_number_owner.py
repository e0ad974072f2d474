"""Which tables an order-number sequence numbers, recorded in the database itself.

The database does not link a ``FormattedOrderNumber``'s sequence to its table
(the column's default is drawn by the client), so once a model is gone
nothing would say which sequence to drop with its table. sqla_ids records
the owners -- each table and column the sequence was created for -- where
the database keeps them with the sequence:

* PostgreSQL: the sequence's comment (``COMMENT ON SEQUENCE``);
* MariaDB: the comment of the sequence, which is a table
  (``CREATE SEQUENCE … COMMENT``, ``ALTER TABLE … COMMENT``);
* SQLite: the ``owners`` column of the counter row.

The record reads ``sqla_ids order numbers for [{"table": "orders",
"column": "number"}]``: a recognizable prefix, then the owners as JSON
(ASCII only, so any name survives any character set). The sequence lives
in its tables' schema, so the schema is where the sequence is.

Every table created on a sequence is added to its owners, so a sequence
shared by several tables records all of them (created in offline ``--sql``
mode, only the first). A sequence created without an owner -- by an older
sqla_ids, or by ``op.create_order_number_sequence`` without ``table=`` --
records none until a later creation names one. A record that no longer
fits (MariaDB keeps 2048 characters of a comment) becomes
:data:`MANY_OWNERS`: owners unknown, the sequence is never dropped for one
of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import ExecutableDDLElement
from sqlalchemy.sql.compiler import DDLCompiler

__all__ = [
    "MANY_OWNERS",
    "OWNERS_PREFIX",
    "OrderNumberOwner",
    "OwnedSequence",
    "SequenceCommentStatement",
    "can_read",
    "owned_sequences",
    "owners_from_record",
    "owners_record",
    "with_owner",
]

OWNERS_PREFIX = "sqla_ids order numbers for "
"""How the record of a sequence's owners begins."""

MANY_OWNERS = OWNERS_PREFIX + "more tables than fit here"
"""The record of a sequence whose owners no longer fit: never dropped for one of them."""


class OrderNumberOwner(NamedTuple):
    """A table (and column) an order-number sequence was created for."""

    table: str
    column: str | None = None


class OwnedSequence(NamedTuple):
    """An order-number sequence of a schema and one table it was created for."""

    name: str
    table: str
    column: str | None


def owners_record(owners: Iterable[OrderNumberOwner], limit: int | None = None) -> str:
    """The text recording ``owners`` (:data:`MANY_OWNERS` if longer than ``limit``).

    >>> owners_record([OrderNumberOwner("orders", "number")])
    'sqla_ids order numbers for [{"table": "orders", "column": "number"}]'
    """
    data = [{"table": owner.table, "column": owner.column} for owner in owners]
    record = OWNERS_PREFIX + json.dumps(data)
    return MANY_OWNERS if limit is not None and len(record) > limit else record


def owners_from_record(record: str | None) -> list[OrderNumberOwner] | None:
    """The owners a record lists; ``None`` for any other text (not ours, or garbled)."""
    if not record or not record.startswith(OWNERS_PREFIX):
        return None
    try:
        data: Any = json.loads(record[len(OWNERS_PREFIX) :])
    except ValueError:
        return None
    if not isinstance(data, list):
        return None
    owners = []
    for item in data:
        table = item.get("table") if isinstance(item, dict) else None
        column = item.get("column") if isinstance(item, dict) else None
        if not isinstance(table, str) or not (column is None or isinstance(column, str)):
            return None
        owners.append(OrderNumberOwner(table, column))
    return owners


def with_owner(record: str | None, owner: OrderNumberOwner, limit: int | None = None) -> str | None:
    """The record after adding ``owner``; ``None`` when it is to stay as it is.

    An empty record gets ``owner``; a record of ours gains it (unless
    listed); any other text -- the user's own comment -- is left alone.
    """
    if not record:
        return owners_record([owner], limit)
    owners = owners_from_record(record)
    if owners is None or owner in owners:
        return None
    return owners_record([*owners, owner], limit)


def owned_sequences(records: dict[str, str | None]) -> list[OwnedSequence]:
    """(sequence, owner table, owner column) for each owner of each record, sorted."""
    found = []
    for name, record in sorted(records.items()):
        for owner in owners_from_record(record) or ():
            found.append(OwnedSequence(name, owner.table, owner.column))
    return found


def can_read(connection: Any) -> bool:
    """Whether queries give answers (not Alembic's offline ``--sql`` printer)."""
    return isinstance(connection, Connection)


class SequenceCommentStatement(ExecutableDDLElement):
    """A statement naming a sequence and a comment, each quoted by the dialect.

    ``template`` may hold ``{sequence}`` (the schema-qualified quoted name),
    ``{create}`` (``CREATE SEQUENCE IF NOT EXISTS … START WITH 1``) and, as
    string literals escaped as the dialect needs, ``{comment}``, ``{name}``
    (the sequence's name) and ``{schema}`` (``NULL`` for none), e.g.
    ``"COMMENT ON SEQUENCE {sequence} IS {comment}"``. ``do_block``: the
    statement is a PostgreSQL ``DO`` block with this body, dollar-quoted
    with a tag the body does not contain. No name or text is ever written
    into the SQL unquoted.
    """

    def __init__(
        self, template: str, sequence: sa.Sequence, comment: str, *, do_block: bool = False
    ) -> None:
        self.template = template
        self.sequence = sequence
        self.comment = comment
        self.do_block = do_block


@compiles(SequenceCommentStatement)
def _compile_sequence_comment(
    element: SequenceCommentStatement, compiler: DDLCompiler, **kw: Any
) -> str:
    sequence = element.sequence

    def literal(text: str | None) -> str:
        if text is None:
            return "NULL"
        rendered: str = compiler.sql_compiler.render_literal_value(text, sa.String())
        return rendered

    text = element.template.format(
        sequence=compiler.preparer.format_sequence(sequence),
        create=compiler.process(sa.schema.CreateSequence(sequence, if_not_exists=True)),
        comment=literal(element.comment),
        name=literal(sequence.name),
        schema=literal(sequence.schema),
    )
    if not element.do_block:
        return text
    tag, n = "sqla_ids", 0
    while f"${tag}" in text:
        n += 1
        tag = f"sqla_ids{n}"
    return f"DO ${tag}${text}${tag}$"
