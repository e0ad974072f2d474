"""Reading SQL text the database keeps (view definitions, routine bodies).

Catalogs record which columns a view uses, but not what it does with them.
After a key migration, a view that compares the key with a column that is not
migrated (``store.manager_staff_id = staff.staff_id`` where no FK declares the
relationship) compares a UUID with an integer and cannot be recreated; a
routine that takes the key as an ``int`` parameter breaks at its next call.
These helpers find such places in the normalised text the database prints, so
the plan can name them instead of failing half-way. They are heuristics over
text -- they can miss a comparison written in a form they do not parse -- so
the migration also checks the result (recreating a view is verified).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


def _identifier(quote: str) -> str:
    """A regex for one identifier, bare or quoted with ``quote`` (doubled inside)."""
    q = re.escape(quote)
    return rf"(?:{q}(?:[^{q}]|{q}{q})+{q}|[A-Za-z_\u0080-\uffff][\w$\u0080-\uffff]*)"


def _unquote(name: str, quote: str) -> str:
    if len(name) >= 2 and name[0] == quote and name[-1] == quote:
        return name[1:-1].replace(quote * 2, quote)
    return name


@dataclass(frozen=True)
class Comparison:
    """``left = right`` between two columns, each resolved to ``(table, column)``."""

    left: tuple[str, str]
    right: tuple[str, str]


_KEYWORDS = frozenset(
    [
        "on",
        "where",
        "join",
        "left",
        "right",
        "inner",
        "outer",
        "full",
        "cross",
        "natural",
        "using",
        "lateral",
        "group",
        "order",
        "having",
        "limit",
        "union",
        "select",
        "from",
        "as",
        "and",
        "or",
        "not",
        "set",
        "values",
        "returning",
        "window",
    ]
)


def comparisons(sql: str, quote: str = '"') -> list[Comparison]:
    """Equality comparisons ``a.x = b.y`` in ``sql``, with aliases resolved to tables.

    ``quote`` is the identifier quote the text uses (``"`` on PostgreSQL and
    SQLite, a backtick on MariaDB/MySQL). Qualified names (``schema.table``
    or ``db.table.column``) keep their last parts.
    """
    ident = _identifier(quote)
    dotted = rf"{ident}(?:\s*\.\s*{ident})*"
    aliases: dict[str, str] = {}
    source = re.compile(
        rf"(?:\bfrom|\bjoin|,)\s*\(*\s*({dotted})(?:\s+(?:as\s+)?({ident}))?", re.IGNORECASE
    )
    for match in source.finditer(sql):
        table = _unquote(re.split(r"\s*\.\s*", match.group(1))[-1], quote)
        alias = match.group(2)
        aliases.setdefault(table.lower(), table)
        if alias and alias.lower() not in _KEYWORDS:
            aliases[_unquote(alias, quote).lower()] = table
    found = []
    column_ref = rf"({ident}(?:\s*\.\s*{ident})+)"
    for match in re.finditer(rf"{column_ref}\s*=\s*{column_ref}", sql):
        sides = []
        for text in (match.group(1), match.group(2)):
            parts = [_unquote(p, quote) for p in re.split(r"\s*\.\s*", text)]
            table = aliases.get(parts[-2].lower(), parts[-2])
            sides.append((table, parts[-1]))
        found.append(Comparison(sides[0], sides[1]))
    return found


def unmigrated_comparisons(
    sql: str, affected: dict[str, set[str]], quote: str = '"'
) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """``(migrated column, other column)`` pairs compared in ``sql`` where only one
    side becomes a UUID: after the migration that comparison mixes types."""

    def migrated(side: tuple[str, str]) -> bool:
        table, column = side
        for t, cols in affected.items():
            if t.lower() == table.lower() and column.lower() in {c.lower() for c in cols}:
                return True
        return False

    result = []
    for comparison in comparisons(sql, quote):
        left, right = migrated(comparison.left), migrated(comparison.right)
        if left != right:
            pair = (
                (comparison.left, comparison.right) if left else (comparison.right, comparison.left)
            )
            if pair not in result:
                result.append(pair)
    return result


#: A character that continues an identifier: a name found next to one is part of
#: a longer name.
_IDENTIFIER_CHAR = re.compile(r"[\w$\u0080-\uffff]")


def mentions(sql: str, names: Iterable[str], quote: str = '"') -> list[str]:
    """The ``names`` that ``sql`` mentions as a whole identifier (bare or quoted,
    case-insensitively), in the order given."""
    # Found by plain searches, not a regular expression per name: with the
    # identifier characters' class (all of Unicode above 0x80) and IGNORECASE
    # each such pattern took 2.4 ms to compile -- most of a plan's CPU time.
    text = sql.casefold()
    found = []
    for name in names:
        quoted = (quote + name.replace(quote, quote * 2) + quote).casefold()
        if quoted in text or _bare(text, name.casefold()):
            found.append(name)
    return found


def _bare(text: str, name: str) -> bool:
    """Whether ``name`` occurs in ``text`` with no identifier character either side."""
    at = text.find(name)
    while at >= 0 and name:
        before = text[at - 1] if at else ""
        end = at + len(name)
        after = text[end] if end < len(text) else ""
        if not _IDENTIFIER_CHAR.match(before or " ") and not _IDENTIFIER_CHAR.match(after or " "):
            return True
        at = text.find(name, at + 1)
    return False


def routine_uses(
    body: str, attached_table: str | None, affected: dict[str, set[str]], quote: str = '"'
) -> str | None:
    """``table.column`` of the first migrated column a routine body uses, if any.

    A trigger's body reaches its own table's columns through ``NEW``/``OLD``
    (so for a trigger on a migrated table its columns count on their own);
    any other body must name the table and the column.
    """
    for table, columns in sorted(affected.items()):
        if attached_table == table or mentions(body, [table], quote):
            used = mentions(body, sorted(columns), quote)
            if used:
                return f"{table}.{used[0]}"
    return None
