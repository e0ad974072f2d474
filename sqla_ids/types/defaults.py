"""Client-side UUIDv7 defaults and the SERIAL-like ``uuid7_pk()`` shorthand.

``uuid7_pk()`` is one declaration for a primary key that fills itself with
monotonic UUIDv7 values: in classic and dataclass ORM mappings, Core
``insert()`` and ``insertmanyvalues`` batches. Because the key is made in
the client, the ORM can batch ``INSERT … RETURNING`` and the id can even
exist right after the object is constructed (``assign_on_init=True``).

``last_uuid7(bind, table)`` is the analogue of PostgreSQL's ``currval``: the
last UUIDv7 that our default generated (or, for a session, that was flushed)
for ``table`` on this connection or session.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy import event, orm
from sqlalchemy.engine import Connection
from sqlalchemy.engine.default import DefaultExecutionContext

from sqla_ids.identifiers import UUIDv7Generator, parse_uuid, uuid7
from sqla_ids.types.server_functions import UUIDv7ServerDefault
from sqla_ids.types.uuid7 import UUIDv7

_LAST_KEY = "sqla_ids.last_uuid7"
_ASSIGN_ON_INIT = "sqla_ids.assign_on_init"


def uuid7_default(
    generator: UUIDv7Generator | None = None,
) -> Callable[[DefaultExecutionContext], uuid.UUID]:
    """A column ``default``/``insert_default`` giving the next UUIDv7 of ``generator``.

    It also records the value as the table's last UUIDv7 on the connection
    (see :func:`last_uuid7`).
    """
    generate: Callable[[], uuid.UUID] = uuid7 if generator is None else generator

    def next_uuid7(context: DefaultExecutionContext) -> uuid.UUID:
        value = generate()
        column = context.current_column
        if column is not None and column.table is not None:
            # ``info`` belongs to the DBAPI connection, like a database session.
            info = context.root_connection.info
            info.setdefault(_LAST_KEY, {})[column.table.fullname] = value
        return value

    return next_uuid7


def uuid7_pk(
    *,
    generator: UUIDv7Generator | None = None,
    type_: UUIDv7 | None = None,
    dataclass: bool = False,
    assign_on_init: bool = False,
    server_default: bool | Literal["serial"] = False,
    **kwargs: Any,
) -> orm.MappedColumn[Any]:
    """A self-filling UUIDv7 primary key, in the spirit of ``SERIAL``.

    ``dataclass=True`` for ``MappedAsDataclass`` models: the key comes from
    ``default_factory`` (so it exists once the object is built) and
    ``insert_default`` (for Core inserts). ``assign_on_init=True`` gives
    classic mappings the same: the id is set when the object is constructed,
    before any flush. ``server_default=True`` adds ``sqla_ids_uuid7()`` as
    the server-side default for rows inserted by other clients; this
    application keeps making its keys itself. Other keyword arguments go to
    :func:`sqlalchemy.orm.mapped_column`.

    ``server_default="serial"``: every key comes from the database's
    ``sqla_ids_uuid7_serial()``, ordered across connections, so there is no
    client-side default (the ORM reads the key back with ``RETURNING``);
    ``generator`` and ``assign_on_init`` do not apply, and with
    ``dataclass=True`` the key is left out of ``__init__``.
    """
    if server_default not in (True, False, "serial"):
        raise ValueError(f'server_default must be True, False or "serial", got {server_default!r}')
    column_type = UUIDv7() if type_ is None else type_
    if server_default == "serial":
        if generator is not None or assign_on_init:
            raise ValueError(
                'server_default="serial" takes every key from the database: '
                "generator and assign_on_init do not apply"
            )
        serial: dict[str, Any] = {"primary_key": True, "server_default": UUIDv7ServerDefault(True)}
        if dataclass:
            serial["init"] = False
        return orm.mapped_column(column_type, **{**serial, **kwargs})
    options: dict[str, Any] = {"primary_key": True, "insert_default": uuid7_default(generator)}
    if server_default:
        options["server_default"] = UUIDv7ServerDefault()
    if dataclass:
        options["default_factory"] = uuid7 if generator is None else generator
    if assign_on_init:
        options["info"] = {**kwargs.pop("info", {}), _ASSIGN_ON_INIT: generator or uuid7}
    options.update(kwargs)
    return orm.mapped_column(column_type, **options)


def last_uuid7(
    bind: Connection | orm.Session, table: sa.Table | type[Any] | str
) -> uuid.UUID | None:
    """The last UUIDv7 generated for ``table`` on this connection or session, or ``None``.

    For a ``Connection``: the last value our client-side default produced on
    its DBAPI connection. For a ``Session``: the greatest key of the objects
    of that table flushed by this session (ids assigned at construction
    included).
    """
    name = _table_name(table)
    if isinstance(bind, orm.Session):
        value: uuid.UUID | None = bind.info.get(_LAST_KEY, {}).get(name)
        return value
    return bind.info.get(_LAST_KEY, {}).get(name)  # type: ignore[no-any-return]


def _table_name(table: sa.Table | type[Any] | str) -> str:
    if isinstance(table, str):
        return table
    if isinstance(table, sa.Table):
        return table.fullname
    local_table = sa.inspect(table).local_table
    if not isinstance(local_table, sa.Table):
        raise ValueError(f"{table!r} is not mapped to a table")
    return local_table.fullname


def _uuid7_columns(mapper: orm.Mapper[Any]) -> list[tuple[str, sa.Column[Any]]]:
    """(attribute key, column) of every ``UUIDv7`` column the mapper maps."""
    found = []
    for prop in mapper.column_attrs:
        for column in prop.columns:
            if isinstance(column, sa.Column) and isinstance(column.type, UUIDv7):
                found.append((prop.key, column))
    return found


# ORM wiring: installed once, for every mapper, when this module is imported.
# Only mappers with UUIDv7 columns get listeners, so other models pay nothing.


@event.listens_for(orm.Mapper, "mapper_configured")
def _configure_mapper(mapper: orm.Mapper[Any], class_: type[Any]) -> None:
    columns = _uuid7_columns(mapper)
    if not columns:
        return
    for key, column in columns:
        attribute = getattr(class_, key)
        # Parse strings when the attribute is set, not when binding: the ORM
        # matches RETURNING rows to objects by these values (insertmanyvalues).
        event.listen(attribute, "set", _coerce_on_set, retval=True)
        generator = column.info.get(_ASSIGN_ON_INIT)
        if generator is not None and column.primary_key:
            _INIT_ASSIGN.setdefault(mapper, []).append((key, generator))
    keys = [(key, column.table.fullname) for key, column in columns if column.primary_key]
    if keys:
        event.listen(mapper, "after_insert", _remember_last(keys))


def _coerce_on_set(target: Any, value: Any, oldvalue: Any, initiator: Any) -> Any:
    if value is None or isinstance(value, uuid.UUID):
        return value
    return parse_uuid(value)


# Mapper -> [(attribute key, generator)] of keys set when an object is built.
# One ``init`` listener for all mappers: adding per-class listeners from
# ``mapper_configured`` would mutate the ``init`` dispatch while it runs.
_INIT_ASSIGN: dict[orm.Mapper[Any], list[tuple[str, Callable[[], uuid.UUID]]]] = {}


@event.listens_for(orm.Mapper, "init")
def _assign_on_init(target: Any, args: Any, kwargs: dict[str, Any]) -> None:
    mapper = sa.inspect(target).mapper
    if not mapper.configured:
        # The first object of a class triggers mapper configuration, which
        # may not have run yet when this listener is called.
        orm.configure_mappers()
    assignments = _INIT_ASSIGN.get(mapper)
    if assignments:
        for key, generator in assignments:
            if kwargs.get(key) is None:
                kwargs[key] = generator()


def _remember_last(keys: list[tuple[str, str]]) -> Callable[..., None]:
    def remember(mapper: orm.Mapper[Any], connection: Connection, target: Any) -> None:
        session = orm.object_session(target)
        if session is None:
            return
        last: dict[str, uuid.UUID] = session.info.setdefault(_LAST_KEY, {})
        for key, name in keys:
            value = getattr(target, key)
            if value is not None and (name not in last or value > last[name]):
                last[name] = value

    return remember
