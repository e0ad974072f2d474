"""Client-side UUIDv7 defaults and the SERIAL-like ``uuid7_pk()`` shorthand.

``uuid7_pk()`` is one declaration for a primary key that fills itself with
monotonic UUIDv7 values: in classic and dataclass ORM mappings, Core
``insert()`` and ``insertmanyvalues`` batches. Because the key is made in
the client, the ORM can batch ``INSERT … RETURNING`` and the id can even
exist right after the object is constructed (``assign_on_init=True``).

``uuid7_pk(server_default="serial")`` (and any mapped primary key whose only
default is :class:`~sqla_ids.types.server_functions.UUIDv7ServerDefault`)
takes its keys from the database. The ORM could then only insert one row per
``INSERT … RETURNING``, so before each flush the keys of all pending objects
of such a table are fetched from the database function, 1,000 per
``SELECT``, and the ORM batches the inserts as for client-made keys. See
:func:`prefetch_server_keys`.

``last_uuid7(bind, table)`` is the analogue of PostgreSQL's ``currval``: the
last UUIDv7 that our default generated (or, for a session, that was flushed)
for ``table`` on this connection or session.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Literal, TypeVar

import sqlalchemy as sa
from sqlalchemy import event, orm
from sqlalchemy.engine import Connection
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.orm.attributes import instance_state

from sqla_ids.dialects import for_dialect
from sqla_ids.identifiers import UUIDv7Generator, parse_uuid, uuid7
from sqla_ids.identifiers.server_layouts import uuid7s_from_serial, uuid7s_from_ticks
from sqla_ids.types.per_row import refuse_insert_from_select
from sqla_ids.types.server_functions import (
    UUID7_FUNCTION,
    UUID7_SERIAL_FUNCTION,
    UUID7_SERIAL_SEQUENCE,
    UUIDv7ServerDefault,
)
from sqla_ids.types.uuid7 import UUIDv7

_LAST_KEY = "sqla_ids.last_uuid7"
_ASSIGN_ON_INIT = "sqla_ids.assign_on_init"

_T = TypeVar("_T")

PREFETCH_CHUNK = 1_000
"""Server-made keys fetched per ``SELECT`` before a flush: within the default
recursion limits of MySQL (``cte_max_recursion_depth``) and MariaDB
(``max_recursive_iterations``), both 1,000."""


def uuid7_default(
    generator: UUIDv7Generator | None = None,
) -> Callable[[DefaultExecutionContext], uuid.UUID]:
    """A column ``default``/``insert_default`` giving the next UUIDv7 of ``generator``.

    It also records the value as the table's last UUIDv7 on the connection
    (see :func:`last_uuid7`).
    """
    generate: Callable[[], uuid.UUID] = uuid7 if generator is None else generator

    def next_uuid7(context: DefaultExecutionContext) -> uuid.UUID:
        refuse_insert_from_select(
            context,
            "UUIDv7",
            "select a value per row for this column (the server function sqla_ids_uuid7(), "
            "or the UUIDv7ServerDefault of a rebuilt table), or insert the rows with values",
        )
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
    client-side default; ``generator`` and ``assign_on_init`` do not apply,
    and with ``dataclass=True`` the key is left out of ``__init__``. The key
    exists after the flush: a lone new object reads it back with ``INSERT …
    RETURNING``; two or more get theirs from one ``SELECT`` per 1,000 before
    the flush (:func:`prefetch_server_keys`), so the ORM batches the inserts.
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


def _uuid7_columns(mapper: orm.Mapper[Any]) -> list[tuple[str, sa.Column[Any], UUIDv7[Any]]]:
    """(attribute key, column, its type) of every ``UUIDv7`` column the mapper maps."""
    found = []
    for prop in mapper.column_attrs:
        for column in prop.columns:
            if isinstance(column, sa.Column) and isinstance(column.type, UUIDv7):
                found.append((prop.key, column, column.type))
    return found


# ORM wiring: installed once, for every mapper, when this module is imported.
# Only mappers with UUIDv7 columns get listeners, so other models pay nothing.


@event.listens_for(orm.Mapper, "mapper_configured")
def _configure_mapper(mapper: orm.Mapper[Any], class_: type[Any]) -> None:
    global _server_keys_mapped
    columns = _uuid7_columns(mapper)
    if not columns:
        return
    for key, column, type_ in columns:
        attribute = getattr(class_, key)
        # Parse strings when the attribute is set, not when binding: the ORM
        # matches RETURNING rows to objects by these values (insertmanyvalues).
        event.listen(attribute, "set", _coercer(type_), retval=True)
        generator = column.info.get(_ASSIGN_ON_INIT)
        if generator is not None and column.primary_key:
            _INIT_ASSIGN.setdefault(mapper, []).append((key, generator))
    keys = [(key, column.table.fullname) for key, column, _ in columns if column.primary_key]
    if keys:
        event.listen(mapper, "after_insert", _remember_last(keys), raw=True)
    server_key = _server_made_key(mapper)
    if server_key is not None:
        # On the class's instrumentation: found from an object's state in one
        # lookup, and gone with the class.
        mapper.class_manager.info[_SERVER_KEY_INFO] = server_key
        _server_keys_mapped = True


def _coercer(type_: UUIDv7[Any]) -> Callable[[Any, Any, Any, Any], Any]:
    """The ``set`` listener of one column: its type's parsing (``uuid.UUID``, or
    canonical text with ``as_uuid=False``)."""
    coerce = type_.coerce_set_value
    as_uuid = type_.as_uuid

    def coerce_on_set(target: Any, value: Any, oldvalue: Any, initiator: Any) -> Any:
        if value is None or (as_uuid and type(value) is uuid.UUID):
            return value  # the common case, without a call
        return coerce(value)

    return coerce_on_set


# Mapper -> [(attribute key, generator)] of keys set when an object is built.
# One ``init`` listener for all mappers: adding per-class listeners from
# ``mapper_configured`` would mutate the ``init`` dispatch while it runs.
_INIT_ASSIGN: weakref.WeakKeyDictionary[
    orm.Mapper[Any], list[tuple[str, Callable[[], uuid.UUID]]]
] = weakref.WeakKeyDictionary()


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
    # A ``raw`` listener: it gets the object's state, read without attribute
    # access (it runs once per inserted object).
    def remember(
        mapper: orm.Mapper[Any], connection: Connection, state: orm.InstanceState[Any]
    ) -> None:
        session = state.session
        if session is None:
            return
        last: dict[str, uuid.UUID] | None = session.info.get(_LAST_KEY)
        if last is None:
            last = session.info[_LAST_KEY] = {}
        values = state.dict
        for key, name in keys:
            value = values.get(key)
            if value is not None:
                previous = last.get(name)
                if previous is None or value > previous:
                    last[name] = value

    return remember


# --- server-made keys: fetched before the flush, so the ORM batches ---------------
#
# Why not SQLAlchemy's "insert sentinel" machinery: the ORM matches RETURNING
# rows to objects through a sentinel column, and a server-side default is only
# trusted as one when marked monotonic (SQLAlchemy 2.1; 2.0 has no such mark).
# That mark is read once per Table, for every dialect: SQLAlchemy 2.1.9 then
# batches on PostgreSQL and MariaDB but fails an internal assertion on SQLite
# (its primary-key rule takes the monotonic default for a client-side one).
# Fetching the keys first needs neither: the inserts carry their keys, like
# client-made ones, on SQLAlchemy 2.0 and 2.1 and on every database.

# Key in a mapped class's ``ClassManager.info``: (attribute key, function name)
# of its single-column UUIDv7 primary key when only the server fills it.
_SERVER_KEY_INFO = "sqla_ids.server_made_key"
_server_keys_mapped = False
"""Whether any such class was mapped (else a flush skips the scan at once)."""
_FETCH_STATEMENTS: dict[str, sa.Select[Any]] = {}


def _server_made_key(mapper: orm.Mapper[Any]) -> tuple[str, str] | None:
    """(attribute key, function) if the mapper's key is a server-only UUIDv7, else ``None``."""
    if len(mapper.primary_key) != 1:
        return None
    column = mapper.primary_key[0]
    default = column.server_default
    if (
        not isinstance(column.type, UUIDv7)
        or not isinstance(default, UUIDv7ServerDefault)
        or column.default is not None
    ):
        return None
    key = mapper.get_property_by_column(column).key
    return key, UUID7_SERIAL_FUNCTION if default.serial else UUID7_FUNCTION


def _fetch_statement(function: str) -> sa.Select[Any]:
    """``WITH RECURSIVE n … SELECT function() FROM n``: ``:count`` new values."""
    statement = _FETCH_STATEMENTS.get(function)
    if statement is None:
        counter = sa.select(sa.literal_column("1").label("n")).cte(
            "sqla_ids_key_counter", recursive=True
        )
        counter = counter.union_all(
            sa.select(counter.c.n + 1).where(counter.c.n < sa.bindparam("count"))
        )
        statement = sa.select(getattr(sa.func, function)()).select_from(counter)
        _FETCH_STATEMENTS[function] = statement
    return statement


def fetch_server_keys(connection: Connection, count: int, serial: bool = False) -> list[uuid.UUID]:
    """``count`` new keys from ``sqla_ids_uuid7()`` (or the serial one), ascending.

    Keys as the function a column ``DEFAULT`` calls on this server makes them:
    where the database can reserve a block of its function's state (PostgreSQL
    before 18, MariaDB/MySQL), one statement reserves ``count`` ticks (serial:
    reads the millisecond, then one statement per :data:`PREFETCH_CHUNK`
    sequence values) and the keys are assembled here in the function's layout
    (:mod:`sqla_ids.identifiers.server_layouts`); the function's later keys
    sort after them. Elsewhere, one ``SELECT`` per :data:`PREFETCH_CHUNK`
    calls the function (PostgreSQL 18's native ``uuidv7()`` there). Our
    function must exist
    (:func:`~sqla_ids.types.server_functions.install_uuid7_function`).
    """
    if count <= 0:
        return []
    dialect = connection.dialect
    database = for_dialect(dialect)
    native = None if serial else database.uuid7_native_function(dialect)
    if native is None:
        if serial:
            statements = database.uuid7_serial_reserve_sql(
                dialect.identifier_preparer.quote(UUID7_SERIAL_SEQUENCE)
            )
            if statements is not None:
                return _serial_block(connection, count, *statements)
        else:
            ticks = database.uuid7_reserve_ticks_sql()
            if ticks is not None:
                first = connection.execute(sa.text(ticks), {"count": count}).scalar_one()
                return uuid7s_from_ticks(int(first), count)
    function = native or (UUID7_SERIAL_FUNCTION if serial else UUID7_FUNCTION)
    statement = _fetch_statement(function)
    keys = _in_chunks(
        count,
        lambda chunk: [
            # PostgreSQL's driver gives uuid.UUID; MariaDB and SQLite hex text.
            value if type(value) is uuid.UUID else parse_uuid(value)
            for value in connection.execute(statement, {"count": chunk}).scalars()
        ],
        f"SELECT {function}()",
    )
    # The values increase in the order they were made, whatever the order of
    # the rows: sorting in Python is linear on (nearly) sorted input.
    keys.sort()
    return keys


def _serial_block(
    connection: Connection, count: int, clock_sql: str, values_sql: str
) -> list[uuid.UUID]:
    """Serial keys from one millisecond and ``count`` sequence values."""
    milliseconds = int(connection.execute(sa.text(clock_sql)).scalar_one())
    statement = sa.text(values_sql)
    values = _in_chunks(
        count,
        lambda chunk: [
            int(value)
            for value in (connection.execute(statement, {"count": chunk}).scalar_one() or "").split(
                ","
            )
            if value
        ],
        f"the values of {UUID7_SERIAL_SEQUENCE}",
    )
    # A cycled sequence starts again at 1: sorted, the keys still come out
    # ascending, as the function's would sort.
    return sorted(uuid7s_from_serial(milliseconds, values))


def _in_chunks(count: int, fetch: Callable[[int], list[_T]], what: str) -> list[_T]:
    """``count`` values, at most :data:`PREFETCH_CHUNK` per ``fetch``. A server may
    cut a recursive CTE short without an error (MariaDB's
    ``max_recursive_iterations``): take what came and ask for the rest."""
    values: list[_T] = []
    while len(values) < count:
        got = fetch(min(PREFETCH_CHUNK, count - len(values)))
        if not got:
            raise RuntimeError(f"{what} returned no rows: no keys to fetch")
        values += got
    return values


def prefetch_server_keys(session: orm.Session, objects: Iterable[Any] | None = None) -> int:
    """Give pending objects their server-made UUIDv7 keys now; return how many got one.

    For every table whose key only the database makes (``uuid7_pk(server_default="serial")``,
    or ``server_default=UUIDv7ServerDefault()`` without a client default) and
    that has two or more pending objects without a key: keys as the column's
    default would make them (:func:`fetch_server_keys`: a block of the
    function's state in one statement, or one ``SELECT`` of the function per
    1,000), assigned in the order the objects were added. The ORM then batches their ``INSERT`` like
    client-made keys instead of one ``INSERT … RETURNING`` per object (it
    needs ``RETURNING`` to tell which row got which key). A lone object
    keeps the single ``INSERT … RETURNING``. Runs before every flush; call it
    yourself to know the keys earlier. ``objects``: only these (default: all
    of ``session.new``).
    """
    if not _server_keys_mapped:
        return 0
    pending: dict[tuple[orm.Mapper[Any], str, str], list[orm.InstanceState[Any]]] = {}
    for obj in session.new if objects is None else objects:
        state: orm.InstanceState[Any] = instance_state(obj)
        spec: tuple[str, str] | None = state.manager.info.get(_SERVER_KEY_INFO)
        if spec is None or not state.pending or state.dict.get(spec[0]) is not None:
            continue
        pending.setdefault((state.mapper.base_mapper, *spec), []).append(state)
    assigned = 0
    for (base_mapper, key, function), states in pending.items():
        if len(states) < 2:
            continue
        connection = session.connection(bind_arguments={"mapper": base_mapper})
        values = fetch_server_keys(connection, len(states), function == UUID7_SERIAL_FUNCTION)
        states.sort(key=lambda state: state.insert_order or 0)  # the order they were added
        for state, value in zip(states, values, strict=True):
            # Like a value read back with RETURNING: no attribute event, no
            # history; the INSERT takes its parameters from the object's dict.
            if key in state.committed_state:  # set to None by the application
                orm.attributes.set_committed_value(state.obj(), key, value)
            else:
                state.dict[key] = value
        assigned += len(states)
    return assigned


@event.listens_for(orm.Session, "before_flush")
def _prefetch_before_flush(session: orm.Session, flush_context: Any, instances: Any) -> None:
    prefetch_server_keys(session, instances)
