"""A Flask-SQLAlchemy + Flask-Migrate shop: UUIDv7 keys and order numbers (docs/flask.md)."""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from flask import Flask, jsonify
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from sqla_ids import FormattedOrderNumber, uuid7_pk
from sqla_ids.alembic import AlembicHooks


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)
# One object carries every sqla_ids hook; skip_empty_revisions keeps Flask-Migrate's
# "No changes in schema detected." guard, which it drops when hooks are given.
migrate = Migrate(db=db, **AlembicHooks(skip_empty_revisions=True))


class Order(db.Model):  # type: ignore[name-defined,misc]
    __tablename__ = "flask_orders"
    id: Mapped[uuid.UUID] = uuid7_pk()
    number: Mapped[str] = mapped_column(
        FormattedOrderNumber("flask_shop", sequence="flask_orders_number_seq")
    )
    item: Mapped[str] = mapped_column(sa.String(100))


def create_app(url: str, engine_options: dict[str, object] | None = None) -> Flask:
    """The application, on the database at ``url``."""
    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = url
    app.config["SQLALCHEMY_ENGINE_OPTIONS"] = engine_options or {}
    db.init_app(app)
    migrate.init_app(app, db)

    @app.post("/orders/<item>")
    def create_order(item: str) -> object:
        order = Order(item=item)
        db.session.add(order)
        db.session.commit()
        return jsonify(id=str(order.id), number=order.number, item=order.item), 201

    @app.get("/orders/<number>")
    def find_order(number: str) -> object:
        order = db.session.scalars(sa.select(Order).where(Order.number == number)).one()
        return jsonify(id=str(order.id), number=order.number, item=order.item)

    return app
