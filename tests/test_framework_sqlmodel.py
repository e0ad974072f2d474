"""Issue 32, item 3: SQLModel + FastAPI (tests/projects/sqlmodel_shop).

``uuid7_field()`` / ``uuid7_field(server_default=...)`` and ``order_number_field()``
make real columns: Alembic autogenerate writes them with their import, the
upgrade creates them (sequence, server default, MariaDB trigger), FastAPI
answers with the key and number, ``check`` finds nothing, the downgrade
removes everything -- on SQLite, PostgreSQL and MariaDB. Also why the
``uuid7_pk()`` of plain SQLAlchemy fails in a SQLModel model.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy.engine import Engine

import sqla_ids.alembic
from sqla_ids import OrderNumberCodec, install_uuid7_function, register_uuid7_function, uuid7_pk
from sqla_ids.order_numbers import default_keyring, register_key
from tests.alembic_project import project, revision_text

# SQLModel, FastAPI and the shop (a third of a second of imports) are imported
# in the tests, not here: every pytest-xdist worker's collection would pay them.


@pytest.fixture(autouse=True)
def _key() -> Iterator[None]:
    register_key("sqlmodel_shop", "2DE79D232DF5585D68CE47882AE256D6", "CBD09280979564")
    yield
    default_keyring.forget("sqlmodel_shop")


def test_uuid7_pk_is_not_a_sqlmodel_field() -> None:
    """SQLModel takes a ``mapped_column`` for a default value: no primary key."""
    from sqlmodel import SQLModel

    with pytest.raises(sa.exc.ArgumentError, match="could not assemble any primary key"):

        class Broken(SQLModel, table=True):
            __tablename__ = "sqlmodel_broken"
            id: uuid.UUID = uuid7_pk()

    SQLModel.metadata.remove(SQLModel.metadata.tables["sqlmodel_broken"])


def test_fields_keep_uuid7_storage() -> None:
    from sqla_ids import UUIDv7, UUIDv7ServerDefault
    from tests.projects.sqlmodel_shop import Event, Order

    assert isinstance(Order.__table__.c.id.type, UUIDv7)
    assert isinstance(Order.__table__.c.id.server_default, UUIDv7ServerDefault)
    assert Order.__table__.c.id.primary_key and not Order.__table__.c.number.nullable
    assert isinstance(Order().id, uuid.UUID) and Order().id.version == 7  # made at construction
    assert Event(order_id=uuid.uuid4(), text="x").id is None  # serial: from the database


def test_sqlmodel_fastapi_alembic(private_engine: Engine, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient
    from sqlmodel import Session, SQLModel, select

    from tests.projects.sqlmodel_shop import Event, create_app

    engine = private_engine
    register_uuid7_function(engine)
    with engine.begin() as conn:
        install_uuid7_function(conn, serial=True)
    tables = {"sqlmodel_orders", "sqlmodel_events"}
    with engine.connect() as conn:
        config = project(
            tmp_path,
            conn,
            SQLModel.metadata,
            compare_type=True,
            # Only this project's tables (docs/sqlmodel.md adds its own to SQLModel.metadata).
            **sqla_ids.alembic.hooks.chain(
                include_object=lambda obj, name, type_, reflected, compare_to: (
                    type_ != "table" or name in tables
                )
            ),
        )
        mako = tmp_path / "migrations" / "script.py.mako"  # SQLModel's str columns
        mako.write_text(
            mako.read_text().replace(
                "import sqlalchemy as sa\n", "import sqlalchemy as sa\nimport sqlmodel\n"
            )
        )
        text = revision_text(config, "0001")
        assert "sqla_ids.UUIDv7()" in text and "import sqla_ids\n" in text
        assert "server_default=sqla_ids.UUIDv7ServerDefault()" in text
        assert "sqla_ids.UUIDv7ServerDefault(serial=True)" in text
        command.upgrade(config, "head")
        conn.commit()
    client = TestClient(create_app(engine))
    created = client.post("/orders", json={"item": "tea"})
    assert created.status_code == 201, created.text
    body = created.json()
    assert uuid.UUID(body["id"]).version == 7
    assert OrderNumberCodec("sqlmodel_shop").decode(body["number"]) == 1
    typed = body["number"].replace("-", " ")
    assert client.get(f"/orders/{typed}").json() == body
    with Session(engine) as session:
        events = session.exec(select(Event).order_by(Event.id)).all()
        assert [e.text for e in events] == ["created", "paid"]
        assert all(e.id is not None and e.id.version == 7 for e in events)
    with engine.connect() as conn:
        config.attributes["connection"] = conn
        command.check(config)
        command.downgrade(config, "base")
        conn.commit()
        assert not tables & set(sa.inspect(conn).get_table_names())
