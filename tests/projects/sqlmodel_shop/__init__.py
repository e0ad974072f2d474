"""A SQLModel + FastAPI shop: UUIDv7 keys and order numbers (docs/sqlmodel.md)."""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from fastapi import FastAPI, HTTPException
from sqlmodel import Field, Session, SQLModel, select

from sqla_ids import FormattedOrderNumber
from sqla_ids.integrations.sqlmodel import order_number_field, uuid7_field


class OrderBase(SQLModel):
    item: str = Field(max_length=100)


class Order(OrderBase, table=True):
    __tablename__ = "sqlmodel_orders"
    id: uuid.UUID = uuid7_field(server_default=True)
    number: str | None = order_number_field(
        FormattedOrderNumber("sqlmodel_shop", sequence="sqlmodel_orders_number_seq"), unique=True
    )


class Event(SQLModel, table=True):
    __tablename__ = "sqlmodel_events"
    id: uuid.UUID | None = uuid7_field(server_default="serial")
    order_id: uuid.UUID = Field(foreign_key="sqlmodel_orders.id", sa_type=Order.__table__.c.id.type)
    text: str = Field(max_length=100)


class OrderPublic(OrderBase):
    id: uuid.UUID
    number: str


def create_app(engine: sa.Engine) -> FastAPI:
    """The API, on ``engine``."""
    app = FastAPI()

    @app.post("/orders", response_model=OrderPublic, status_code=201)
    def create_order(order: OrderBase) -> Order:
        with Session(engine) as session:
            row = Order.model_validate(order)
            session.add(row)
            session.flush()  # no relationship() tells the ORM to insert the order first
            session.add_all(
                [Event(order_id=row.id, text="created"), Event(order_id=row.id, text="paid")]
            )
            session.commit()
            session.refresh(row)
            return row

    @app.get("/orders/{number}", response_model=OrderPublic)
    def find_order(number: str) -> Order:
        with Session(engine) as session:
            row = session.exec(select(Order).where(Order.number == number)).first()
            if row is None:
                raise HTTPException(404)
            return row

    return app
