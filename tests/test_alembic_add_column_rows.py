"""Issue 32, item 1: a column sqla_ids fills per row, added to a table that has rows.

Alembic's batch mode (Flask-Migrate's default rendering) copied a SQLite table
with ``INSERT … SELECT`` and gave every existing row the same order number;
``op.add_column`` left them ``NULL`` with no sequence behind the column; on
MariaDB a ``UUIDv7ServerDefault`` column added with ``op.add_column`` kept
the nil placeholder in every row, old and new. Now: refused by name before
anything changes, or filled per row; and autogenerate (with the hooks) writes
``op.add_order_number_column``, which numbers the rows in key order.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.migration import MigrationContext
from alembic.operations import Operations
from audit_triggers import audited
from sqlalchemy.engine import Engine

import sqla_ids.alembic
from sqla_ids import (
    FormattedOrderNumber,
    OrderNumberCodec,
    UUIDv7,
    UUIDv7ServerDefault,
    install_uuid7_function,
    register_uuid7_function,
    uuid7_default,
)
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.order_numbers import default_keyring, register_key
from sqla_ids.types import remove_uuid7_function
from sqla_ids.types.per_row import OneValueForManyRowsError
from tests.alembic_project import project, revision_text

KEY = "rows"


@pytest.fixture(autouse=True)
def _key() -> Iterator[None]:
    register_key(KEY, "2DE79D232DF5585D68CE47882AE256D6", "CBD09280979564")
    yield
    default_keyring.forget(KEY)


@pytest.fixture
def table(engine: Engine) -> Iterator[str]:
    """A table with three rows, keys 30, 10, 20 inserted in that order."""
    name = f'rows {secrets.token_hex(2)}`"é'
    t = sa.Table(
        name, sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True, autoincrement=False)
    )
    t.create(engine)
    with engine.begin() as conn:
        conn.execute(t.insert(), [{"id": 30}, {"id": 10}, {"id": 20}])
    yield name
    with engine.begin() as conn:
        t.drop(conn)
        for seq in (f"{name}_seq",):
            FormattedOrderNumber(KEY, sequence=seq).number_sequence.drop(conn)  # type: ignore[union-attr]


def _columns(engine: Engine, table: str) -> set[str]:
    return {c["name"] for c in sa.inspect(engine).get_columns(table)}


@pytest.mark.parametrize("batch", [True, False], ids=["batch", "plain"])
def test_numbered_column_on_a_table_with_rows_is_refused_by_name(
    engine: Engine, table: str, batch: bool
) -> None:
    column = sa.Column("number", FormattedOrderNumber(KEY, sequence=f"{table}_seq"))
    with engine.connect() as conn:
        op = Operations(MigrationContext.configure(conn))
        with pytest.raises(MigrationRefusedError, match=r"op\.add_order_number_column") as error:
            if batch:
                with op.batch_alter_table(table) as batch_op:
                    batch_op.add_column(column)
            else:
                op.add_column(table, column)
        assert repr(table) in str(error.value) and "'number'" in str(error.value)
        conn.rollback()
    assert _columns(engine, table) == {"id"}  # nothing changed


def test_numbered_column_on_an_empty_table_in_batch_mode(engine: Engine) -> None:
    name = f"empty_{secrets.token_hex(2)}"
    t = sa.Table(name, sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True))
    t.create(engine)
    number = FormattedOrderNumber(KEY, sequence=f"{name}_seq")
    try:
        with engine.begin() as conn:
            op = Operations(MigrationContext.configure(conn))
            with op.batch_alter_table(name) as batch_op:
                batch_op.add_column(sa.Column("number", number))
        model = sa.Table(
            name,
            sa.MetaData(),
            sa.Column("id", sa.Integer, primary_key=True),
            sa.Column("number", number),
        )
        with engine.begin() as conn:  # the sequence exists and numbers new rows
            conn.execute(model.insert(), [{"id": i} for i in (1, 2, 3)])
            numbers = conn.execute(sa.select(model.c.number).order_by(model.c.id)).scalars().all()
        codec = OrderNumberCodec(KEY)
        assert [codec.decode(n) for n in numbers] == [1, 2, 3]
        if engine.dialect.name == "sqlite":  # the CHECK is named after the table, not the copy
            with engine.connect() as conn:
                sql = conn.exec_driver_sql(
                    "SELECT sql FROM sqlite_master WHERE name = ?", (name,)
                ).scalar_one()
            assert f"ck_{name}_number_format" in sql and "_alembic_tmp" not in sql
    finally:
        with engine.begin() as conn:
            t.drop(conn)
            number.number_sequence.drop(conn)  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", ["order number", "uuid7"])
def test_insert_from_select_refuses_a_per_row_default(engine: Engine, kind: str) -> None:
    name = f"copy_{secrets.token_hex(2)}"
    metadata = sa.MetaData()
    source = sa.Table(f"{name}_src", metadata, sa.Column("n", sa.Integer))
    if kind == "uuid7":
        column = sa.Column("value", UUIDv7(), default=uuid7_default())
    else:
        column = sa.Column("value", FormattedOrderNumber(KEY, sequence=f"{name}_seq"))
    target = sa.Table(name, metadata, sa.Column("n", sa.Integer), column)
    metadata.create_all(engine)
    try:
        with engine.begin() as conn:
            conn.execute(source.insert(), [{"n": 1}, {"n": 2}])
        with engine.connect() as conn, pytest.raises(sa.exc.StatementError) as error:
            conn.execute(target.insert().from_select(["n"], sa.select(source.c.n)))
        assert isinstance(error.value.orig, OneValueForManyRowsError)
        assert f"column {name}.value" in str(error.value)
    finally:
        metadata.drop_all(engine)


@pytest.mark.parametrize("batch", [True, False], ids=["batch", "plain"])
def test_server_keyed_column_gets_a_key_per_row(private_engine: Engine, batch: bool) -> None:
    engine = private_engine
    if engine.dialect.name == "sqlite" and not batch:
        pytest.skip("SQLite's ADD COLUMN refuses a non-constant DEFAULT (batch mode rebuilds)")
    register_uuid7_function(engine)
    name = f"keys_{secrets.token_hex(2)}"
    t = sa.Table(name, sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True))
    with engine.begin() as conn:
        install_uuid7_function(conn)
        t.create(conn)
        conn.execute(t.insert(), [{"id": i} for i in range(1, 6)])
    column = sa.Column("public_id", UUIDv7(), server_default=UUIDv7ServerDefault())
    with engine.begin() as conn:
        op = Operations(MigrationContext.configure(conn))
        if batch:
            with op.batch_alter_table(name) as batch_op:
                batch_op.add_column(column)
        else:
            op.add_column(name, column)
    model = sa.Table(
        name, sa.MetaData(), sa.Column("id", sa.Integer), sa.Column("public_id", UUIDv7())
    )
    with engine.begin() as conn:
        conn.execute(model.insert(), [{"id": 6}])
        keys = conn.execute(sa.select(model.c.public_id).order_by(model.c.id)).scalars().all()
        model.drop(conn)
        remove_uuid7_function(conn)
    assert len(set(keys)) == 6 and uuid.UUID(int=0) not in keys
    assert all(k.version == 7 for k in keys)


@pytest.mark.parametrize("render_as_batch", [True, False], ids=["batch", "plain"])
def test_autogenerate_numbers_existing_rows_in_key_order(
    engine: Engine, table: str, tmp_path: Path, render_as_batch: bool
) -> None:
    """With the hooks, the added column becomes ``op.add_order_number_column`` (outside
    any batch block): existing rows numbered in key order; check clean; downgrade."""
    number = FormattedOrderNumber(KEY, sequence=f"{table}_seq")
    model = sa.MetaData()
    sa.Table(
        table,
        model,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("number", number, nullable=False),
    )
    with engine.connect() as conn:
        config = project(
            tmp_path,
            conn,
            model,
            render_as_batch=render_as_batch,
            compare_type=True,
            **sqla_ids.alembic.hooks,
        )
        try:
            text = revision_text(config, "0001")
            assert "add_column" not in text and "batch_alter_table" not in text, text
            assert (
                f"op.add_order_number_column({table!r}, 'number', sqla_ids.FormattedOrderNumber("
                in text
            )
            assert "key_column='id'" not in text  # the default, id
            assert "nullable=False" in text
            assert "op.drop_order_number_column(" in text.split("def downgrade")[1]
            command.upgrade(config, "head")
            conn.commit()
            t = sa.table(table, sa.column("id"), sa.column("number"))
            rows = conn.execute(sa.select(t.c.id, t.c.number).order_by(t.c.id)).all()
            codec = OrderNumberCodec(KEY)
            assert [(i, codec.decode(n)) for i, n in rows] == [(10, 1), (20, 2), (30, 3)]
            command.check(config)  # the models match: nothing to propose
            command.downgrade(config, "base")
            conn.commit()
            assert _columns(engine, table) == {"id"}
        finally:
            conn.rollback()
            conn.exec_driver_sql("DROP TABLE IF EXISTS alembic_version")
            conn.commit()


def test_numbering_the_rows_is_no_application_update(private_engine: Engine) -> None:
    """``op.add_order_number_column`` writes every existing row: the table's
    UPDATE triggers do not fire on it (no audit row, ``updated`` untouched;
    MariaDB's ``ON UPDATE CURRENT_TIMESTAMP`` keeps its value), and they are
    there and fire for the application afterwards."""
    engine = private_engine
    name = 'or`ders "ü"'
    t = sa.Table(name, sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True))
    t.create(engine)
    with engine.begin() as conn:
        conn.execute(t.insert(), [{"id": 30}, {"id": 10}, {"id": 20}])
        audited(conn, name, "au'dit", "id")
    with engine.connect() as conn:
        context = MigrationContext.configure(conn)
        with context.begin_transaction():
            Operations(context).add_order_number_column(
                name, "number", FormattedOrderNumber(KEY, sequence="or_seq")
            )
        conn.commit()
    rows = sa.table(name, sa.column("id"), sa.column("number"), sa.column("updated"))
    audit = sa.select(sa.func.count()).select_from(sa.table("au'dit"))
    with engine.connect() as conn:
        assert conn.execute(audit).scalar() == 0
        found = conn.execute(sa.select(rows.c.updated, rows.c.number)).all()
        assert {str(when) for when, _ in found} == {"2001-01-01 00:00:00"}
        assert all(number for _, number in found)
    with engine.begin() as conn:
        conn.execute(sa.update(rows).where(rows.c.id == 10).values(id=11))
        assert conn.execute(audit).scalar() == 1
