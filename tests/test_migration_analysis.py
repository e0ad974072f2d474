"""The planner's reading of view and routine SQL (``sqla_ids.migration.core.analysis``)."""

from __future__ import annotations

import pytest

from sqla_ids.migration.core.analysis import mentions, routine_uses


@pytest.mark.parametrize(
    ("sql", "names", "found"),
    [
        ("SELECT id FROM shop", ["id", "shop"], ["id", "shop"]),
        ("SELECT ID FROM Shop", ["id", "shop"], ["id", "shop"]),  # case-insensitively
        ("SELECT shop_id, idx FROM shops", ["id", "shop"], []),  # part of a longer name
        ('SELECT "id" FROM "my shop"', ["id", "my shop"], ["id", "my shop"]),  # quoted
        ('SELECT "a""b" FROM t', ['a"b'], ['a"b']),  # a quote inside, doubled
        ("SELECT $id, idé, éid FROM t", ["id"], []),  # $ and letters beyond ASCII join names
        ("SELECT t.id+1, (id) FROM t", ["id"], ["id"]),  # punctuation ends a name
        ("id", ["id"], ["id"]),  # at both ends of the text
        ("SELECT `key` FROM `or``der`", ["key", "or`der"], ["key", "or`der"]),
    ],
)
def test_mentions(sql: str, names: list[str], found: list[str]) -> None:
    quote = "`" if "`" in sql else '"'
    assert mentions(sql, names, quote) == found


def test_routine_uses_the_first_migrated_column() -> None:
    affected = {"shop": {"id"}, "item": {"shop_id"}}
    assert routine_uses("UPDATE item SET shop_id = 1", None, affected) == "item.shop_id"
    assert routine_uses("NEW.id := 1", "shop", affected) == "shop.id"  # its own table
    assert routine_uses("UPDATE items SET shop_ids = 1", None, affected) is None
