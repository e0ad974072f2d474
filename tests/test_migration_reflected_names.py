"""The migration engine's inspector returns names as the database has them.

SQLAlchemy's reflection of MariaDB/MySQL parses ``SHOW CREATE TABLE`` and
returns a backtick inside a column's, key's or index's name doubled, as quoted
there (SQLAlchemy 2.1.9: ``se``q`` for ``se`q``): ``merge_uuids`` then failed
on such a key (1054, unknown column) and its unique-key check passed over such
a reference. ``sqla_ids.migration.core.reflected.Inspector`` undoes it.
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids.migration.core.reflected import inspect

KEY = "i`d \"k'"
REF = "r``ef"
CODE = "co`de"


def test_names_with_backticks_come_back_as_they_are(engine: Engine, metadata: sa.MetaData) -> None:
    table = f"t{secrets.token_hex(2)} `x` 'q\""
    sa.Table(
        table,
        metadata,
        sa.Column(KEY, sa.Integer, primary_key=True),
        sa.Column(REF, sa.Integer, nullable=False),
        sa.Column(CODE, sa.String(10), nullable=False),
        sa.UniqueConstraint(REF, CODE, name="u`q"),
        sa.Index("i`x", CODE, REF),
    )
    metadata.create_all(engine)
    with engine.connect() as conn:
        inspector = inspect(conn)
        assert [c["name"] for c in inspector.get_columns(table)] == [KEY, REF, CODE]
        assert inspector.get_pk_constraint(table)["constrained_columns"] == [KEY]
        uniques = {u["name"]: u["column_names"] for u in inspector.get_unique_constraints(table)}
        assert uniques["u`q"] == [REF, CODE]
        indexes = {i["name"]: i["column_names"] for i in inspector.get_indexes(table)}
        assert indexes["i`x"] == [CODE, REF]
