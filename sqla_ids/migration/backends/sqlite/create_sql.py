"""SQLite: editing a table's own ``CREATE TABLE`` text instead of regenerating it.

SQLite cannot alter a column's type, so the rebuild creates each affected
table anew. Regenerating that statement from reflection loses what
reflection does not carry (``ON DELETE CASCADE``, ``DEFERRABLE``, ``MATCH``,
constraint names, collations, comments, ``STRICT``...), so the rebuild edits
the text SQLite keeps in ``sqlite_master`` instead: only the converted
columns' type names change, the key gets ``NOT NULL`` and loses
``AUTOINCREMENT``, and the old-key columns are added where ``ALTER TABLE ...
ADD COLUMN`` would put them. Everything else stays byte for byte.

Pure text functions, no connection: a tokenizer that knows SQLite's quoting
(``"…"``, ```…```, ``[…]``, ``'…'``) and comments, and the splitting of the
table's body into column definitions and table constraints.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqla_ids.errors import MigrationRefusedError

# One token: a comment, a quoted name or string (quote doubled inside), a word
# or number, a single punctuation character. Whitespace is skipped.
_TOKEN = re.compile(
    r"""
    (?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))
    | (?P<quoted>"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\]|'(?:[^']|'')*')
    | (?P<word>[\w$\u0080-\U0010ffff]+)
    | (?P<space>\s+)
    | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)

#: Words that end a column's type name: the column constraints' first words.
_CONSTRAINT_WORDS = frozenset(
    [
        "CONSTRAINT",
        "PRIMARY",
        "NOT",
        "NULL",
        "UNIQUE",
        "CHECK",
        "DEFAULT",
        "COLLATE",
        "REFERENCES",
        "GENERATED",
        "AS",
    ]
)
#: First words of a table constraint (unquoted).
_TABLE_CONSTRAINT_WORDS = frozenset(["CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN"])


@dataclass(frozen=True)
class Token:
    """A significant token (not whitespace or comment) and its span in the text."""

    text: str
    start: int
    end: int

    @property
    def word(self) -> str:
        """The token upper-cased if it is a bare word, else ``""``."""
        return self.text.upper() if re.fullmatch(r"[\w$\u0080-\U0010ffff]+", self.text) else ""


def _tokens(sql: str) -> list[Token]:
    return [
        Token(m.group(), m.start(), m.end())
        for m in _TOKEN.finditer(sql)
        if m.lastgroup not in ("space", "comment")
    ]


def unquote(text: str) -> str:
    """An identifier's name: quotes removed, doubled quotes undone."""
    if text[:1] in "\"`'" and len(text) >= 2:
        return text[1:-1].replace(text[0] * 2, text[0])
    if text[:1] == "[":
        return text[1:-1]
    return text


@dataclass(frozen=True)
class Item:
    """One comma-separated entry of the table's body: a column or a table constraint."""

    tokens: tuple[Token, ...]
    stop: int
    """Offset of the comma or closing parenthesis after it."""

    @property
    def start(self) -> int:
        """Offset of its first token."""
        return self.tokens[0].start

    @property
    def end(self) -> int:
        """Offset just after its last token (comments and spaces after it excluded)."""
        return self.tokens[-1].end

    @property
    def column(self) -> str | None:
        """The column it defines, or ``None`` for a table constraint."""
        first = self.tokens[0]
        if first.word in _TABLE_CONSTRAINT_WORDS:
            return None
        return unquote(first.text)

    def type_span(self) -> tuple[int, int]:
        """Where the column's type name is (an empty span after the name: no type)."""
        tokens, i = self.tokens, 1
        while i < len(tokens) and tokens[i].word and tokens[i].word not in _CONSTRAINT_WORDS:
            i += 1
        if i == 1:
            return tokens[0].end, tokens[0].end
        start, end = tokens[1].start, tokens[i - 1].end
        if i < len(tokens) and tokens[i].text == "(":  # VARCHAR(20), DECIMAL(10, 2)
            depth = 0
            for tok in tokens[i:]:
                depth += {"(": 1, ")": -1}.get(tok.text, 0)
                if depth == 0:
                    end = tok.end
                    break
        return start, end

    def has_words(self, *words: str) -> bool:
        """Whether the bare words occur in sequence (``NOT``, ``NULL``)."""
        seq = [t.word for t in self.tokens]
        n = len(words)
        return any(tuple(seq[i : i + n]) == words for i in range(len(seq) - n + 1))


@dataclass(frozen=True)
class CreateTable:
    """A ``CREATE TABLE`` statement split into its body's items."""

    sql: str
    items: tuple[Item, ...]
    options: tuple[str, ...] = ()
    """The table options after the body, upper-cased (``STRICT``, ``WITHOUT ROWID``)."""

    @property
    def strict(self) -> bool:
        """A ``STRICT`` table accepts only ``INT``, ``INTEGER``, ``REAL``, ``TEXT``,
        ``BLOB`` and ``ANY`` as column types."""
        return "STRICT" in self.options

    def constraint_names(self) -> set[str]:
        """Every ``CONSTRAINT <name>`` of the table (columns' and the table's), lower-cased."""
        return {
            unquote(item.tokens[i + 1].text).lower()
            for item in self.items
            for i, tok in enumerate(item.tokens[:-1])
            if tok.word == "CONSTRAINT"
        }

    @classmethod
    def parse(cls, sql: str) -> CreateTable:
        """Split ``sql`` (as ``sqlite_master`` keeps it); refuses ``CREATE TABLE ... AS``."""
        tokens = _tokens(sql)
        opening = next((i for i, t in enumerate(tokens) if t.text == "("), None)
        if opening is None:
            raise MigrationRefusedError(
                f"cannot migrate: the table's CREATE statement has no column list ({sql[:80]!r});"
                " nothing was changed"
            )
        items: list[Item] = []
        current: list[Token] = []
        depth = 0
        options: tuple[str, ...] = ()
        for n, tok in enumerate(tokens[opening + 1 :], start=opening + 1):
            if tok.text == "(":
                depth += 1
            elif tok.text == ")":
                if depth == 0:
                    options = tuple(t.word for t in tokens[n + 1 :] if t.word)
                    if current:
                        items.append(Item(tuple(current), tok.start))
                    break
                depth -= 1
            elif tok.text == "," and depth == 0:
                items.append(Item(tuple(current), tok.start))
                current = []
                continue
            current.append(tok)
        return cls(sql, tuple(items), options)

    def columns(self) -> list[Item]:
        """The column definitions, in order."""
        return [item for item in self.items if item.column is not None]

    def column(self, name: str) -> Item:
        """The definition of column ``name`` (SQLite compares names case-insensitively)."""
        for item in self.columns():
            if (item.column or "").lower() == name.lower():
                return item
        raise MigrationRefusedError(
            f"cannot migrate: column {name!r} is not in the table's CREATE statement;"
            " nothing was changed"
        )

    def column_text(self, name: str) -> str:
        """Column ``name``'s definition as written."""
        item = self.column(name)
        return self.sql[item.start : item.end]

    def end_of_columns(self) -> int:
        """Where ``ALTER TABLE ... ADD COLUMN`` puts a new column (``, <definition>``):
        at the comma before the first table constraint, else at the closing
        parenthesis -- after any comment following the last column."""
        return self.columns()[-1].stop


Edit = tuple[int, int, str]


def _apply(sql: str, edits: Sequence[Edit]) -> str:
    # From the end backwards, so earlier offsets stay valid; of two insertions at
    # one place the one listed first ends up first.
    order = sorted(range(len(edits)), key=lambda n: (edits[n][0], edits[n][1], n), reverse=True)
    for start, end, text in (edits[n] for n in order):
        sql = sql[:start] + text + sql[end:]
    return sql


def upgraded(
    sql: str,
    converted: dict[str, bool],
    new_type: str,
    added: Sequence[str],
    *,
    drop_autoincrement: bool,
    default_sql: str | None = None,
    key: str | None = None,
) -> str:
    """``sql`` with each ``converted`` column's type replaced by ``new_type``.

    ``converted`` maps each column to whether it belongs to the primary key:
    those get ``NOT NULL`` (a non-``INTEGER`` primary key accepts ``NULL`` in
    SQLite). ``added`` (definitions) go after the last column;
    ``AUTOINCREMENT`` goes when ``drop_autoincrement`` (it needs an
    ``INTEGER`` key); ``key`` gets ``DEFAULT (default_sql)`` if given.
    """
    table = CreateTable.parse(sql)
    if table.strict:
        new_type = "TEXT"  # the UUIDs' hex text; CHAR(32) is refused in a STRICT table
    edits: list[Edit] = []
    for name, in_key in converted.items():
        item = table.column(name)
        start, end = item.type_span()
        edits.append((start, end, new_type if start != end else " " + new_type))
        tail = ""
        if in_key and not item.has_words("NOT", "NULL"):
            tail += " NOT NULL"
        if key is not None and name.lower() == key.lower() and default_sql:
            tail += f" DEFAULT ({default_sql})"
        if tail:
            edits.append((item.end, item.end, tail))
    if drop_autoincrement:
        for item in table.items:
            for tok in item.tokens:
                if tok.word == "AUTOINCREMENT":
                    # The space before it goes too: "PRIMARY KEY AUTOINCREMENT" -> "PRIMARY KEY".
                    before = sql[: tok.start].rstrip()
                    edits.append((len(before), tok.end, ""))
    end = table.end_of_columns()
    edits.append((end, end, "".join(f", {definition}" for definition in added)))
    return _apply(sql, edits)


def restored(original: str, current: str, omitted: Callable[[str], bool]) -> str:
    """``original`` with the columns added since the upgrade (those of ``current``
    it lacks, except ``omitted`` ones: the old-key columns) put back where ``ADD
    COLUMN`` would have put them, the columns dropped since left out, and the
    named table constraints added since (Alembic's batch mode adds them by
    rebuilding the table) put after the original ones."""
    before, now = CreateTable.parse(original), CreateTable.parse(current)
    now_names = {(i.column or "").lower() for i in now.columns()}
    before_names = {(i.column or "").lower() for i in before.columns()}
    edits: list[Edit] = []
    kept = [i for i in before.columns() if (i.column or "").lower() in now_names]
    if not kept:
        raise MigrationRefusedError(
            "cannot restore: none of the table's original columns is left; nothing was changed"
        )
    items = list(before.items)
    for index, item in enumerate(items):
        if item.column is None or item.column.lower() in now_names:
            continue
        # Dropped since: removed as DROP COLUMN does, from its first token to the
        # next entry's (the last one: from the comma before it).
        if index + 1 < len(items):
            edits.append((item.start, items[index + 1].start, ""))
        else:
            edits.append((items[index - 1].stop, item.stop, ""))
    new = [
        current[i.start : i.end]
        for i in now.columns()
        if (i.column or "").lower() not in before_names and not omitted(i.column or "")
    ]
    end = kept[-1].stop
    edits.append((end, end, "".join(f", {definition}" for definition in new)))
    known = before.constraint_names()
    constraints = [
        current[i.start : i.end]
        for i in now.items
        if i.column is None
        and i.tokens[0].word == "CONSTRAINT"
        and len(i.tokens) > 1
        and unquote(i.tokens[1].text).lower() not in known
    ]
    last = before.items[-1].stop
    edits.append((last, last, "".join(f", {definition}" for definition in constraints)))
    return _apply(original, edits)
