"""One-line SQLModel fields: a UUIDv7 primary key and an order number.

SQLModel builds each column from its own ``Field(...)``; it never reads
SQLAlchemy's ``mapped_column()``. So ``id: uuid.UUID = uuid7_pk()`` (a
``mapped_column``) is taken as the field's *default value*: the column is
made from the annotation alone, without ``primary_key``, and the mapping
fails with "could not assemble any primary key columns". The fields here are
``sqlmodel.Field``\\ s with ``sa_type=UUIDv7()`` (or the order-number type),
so the column keeps ``UUIDv7``'s storage on every database -- an annotation
such as ``pydantic.UUID7`` alone gives SQLModel's generic ``Uuid`` column::

    class Order(SQLModel, table=True):
        id: uuid.UUID = uuid7_field()
        number: str | None = order_number_field(
            FormattedOrderNumber("shop", sequence="orders_number_seq")
        )

Needs ``sqlmodel`` (``pip install "sqla-ids[sqlmodel]"``); only this module
imports it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Literal

try:
    from sqlmodel import Field
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        'sqla_ids.integrations.sqlmodel needs SQLModel: pip install "sqla-ids[sqlmodel]"'
    ) from error

from sqla_ids.identifiers import UUIDv7Generator, uuid7
from sqla_ids.types.defaults import uuid7_default
from sqla_ids.types.order_number import FormattedOrderNumber
from sqla_ids.types.server_functions import UUIDv7ServerDefault
from sqla_ids.types.uuid7 import UUIDv7

__all__ = ["order_number_field", "uuid7_field"]


def uuid7_field(
    *,
    server_default: bool | Literal["serial"] = False,
    generator: UUIDv7Generator | None = None,
    type_: UUIDv7[Any] | None = None,
    sa_column_kwargs: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Any:
    """A UUIDv7 primary key field: ``id: uuid.UUID = uuid7_field()``.

    The key is made when the object is built (pydantic's ``default_factory``,
    so a response can carry it before the flush) and by the column's
    ``default`` for Core inserts (:func:`~sqla_ids.types.uuid7_default`, so
    :func:`~sqla_ids.types.last_uuid7` knows it). ``server_default=True``
    adds ``sqla_ids_uuid7()`` as the column's server default for rows other
    clients insert; ``"serial"`` leaves every key to the database's
    ``sqla_ids_uuid7_serial()`` (annotate ``uuid.UUID | None``: the key is
    ``None`` until the flush). ``type_``: the column type (``UUIDv7()`` by
    default, e.g. ``UUIDv7(mysql_storage="binary")``). Other keyword
    arguments go to ``sqlmodel.Field``.
    """
    if server_default not in (True, False, "serial"):
        raise ValueError(f'server_default must be True, False or "serial", got {server_default!r}')
    column = dict(sa_column_kwargs or {})
    if server_default == "serial":
        if generator is not None:
            raise ValueError('server_default="serial" takes every key from the database')
        column["server_default"] = UUIDv7ServerDefault(serial=True)
        return Field(
            default=None,
            primary_key=True,
            sa_type=type_ or UUIDv7(),
            sa_column_kwargs=column,
            **kwargs,
        )
    if server_default:
        column["server_default"] = UUIDv7ServerDefault()
    column.setdefault("default", uuid7_default(generator))
    factory: Callable[[], uuid.UUID] = uuid7 if generator is None else generator
    return Field(
        default_factory=factory,
        primary_key=True,
        sa_type=type_ or UUIDv7(),
        sa_column_kwargs=column,
        **kwargs,
    )


def order_number_field(
    type_: FormattedOrderNumber, *, nullable: bool = False, **kwargs: Any
) -> Any:
    """An order-number field numbered by the database when the row is inserted.

    ``number: str | None = order_number_field(FormattedOrderNumber("shop",
    sequence="orders_number_seq"))``: ``None`` until the flush, then the
    number drawn from the sequence (the type's column default). The column is
    ``NOT NULL`` unless ``nullable=True``; other keyword arguments go to
    ``sqlmodel.Field`` (``unique=True``, ``index=True``…).
    """
    if not isinstance(type_, FormattedOrderNumber):
        raise TypeError(f"order_number_field needs a FormattedOrderNumber, got {type_!r}")
    return Field(default=None, sa_type=type_, nullable=nullable, **kwargs)
