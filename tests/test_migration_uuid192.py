"""UUID192 as the key migration's target (issue 31, item 1), on every database.

``target="uuid192"`` makes the key and every reference the 192-bit key of
``UUID192Type``: the UUIDv7 the UUIDv7 migration would have made (same order,
same mapping of old keys) in the leading 16 bytes, then the row's segment
(a column or an SQL expression of the parent row) in 8 more. Each test
compares the whole database (schema and rows) after the undo with before,
and checks that a refusal changed nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from dbsnapshot import relations, rows, schema
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from sqla_ids import UUID192Type, UUIDv7
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.identifiers import UUID192, uuid7
from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7
from sqla_ids.types import uuid192_uuid

PARENT = "te'n\"an`t é"  # hostile: quotes, a backtick, a space, unicode
CHILD = 'or`der "s"'
LINK = "ta'gs"


def _snapshot(engine: Engine) -> tuple[list[str], dict[str, list[tuple[str, ...]]]]:
    with engine.connect() as conn:
        return schema(conn), rows(conn)


def _shop(engine: Engine, shard_type: sa.types.TypeEngine[Any] | None = None) -> sa.Table:
    """A parent with a shard column, a child with a NOT NULL reference and an
    ``ON DELETE CASCADE``, a link table with a nullable one and a self-reference."""
    metadata = sa.MetaData()
    parent = sa.Table(
        PARENT,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("sh`ard", shard_type or sa.BigInteger(), nullable=False),
        sa.Column("name", sa.String(20), comment="it's the name"),
        sa.Column("parent id", sa.Integer),
    )
    parent.append_constraint(sa.ForeignKeyConstraint(["parent id"], [parent.c.id], name="self ref"))
    sa.Table(
        CHILD,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "tenant id",
            sa.Integer,
            sa.ForeignKey(parent.c.id, name="fk 'tenant'", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("total", sa.Numeric(10, 2)),
        sa.Index("ix tenant", "tenant id", "total"),
    )
    sa.Table(
        LINK,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("owner", sa.Integer, sa.ForeignKey(parent.c.id, name="fk owner")),
        sa.Column("tag", sa.String(10)),
    )
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(
            parent.insert(),
            [
                {"id": i, "sh`ard": i % 4, "name": f"t'{i}", "parent id": 1 if i > 1 else None}
                for i in range(1, 21)
            ],
        )
        conn.execute(
            metadata.tables[CHILD].insert(),
            [{"id": i, "tenant id": i % 20 + 1, "total": i * 1.5} for i in range(1, 61)],
        )
        conn.execute(
            metadata.tables[LINK].insert(),
            [
                {"id": i, "owner": (i % 20 + 1) if i % 3 else None, "tag": f"g{i}"}
                for i in range(1, 31)
            ],
        )
    return parent


def _keys(engine: Engine) -> list[tuple[UUID192, int, int]]:
    """``(key, old key, shard)`` of every parent row, in key order."""
    t = sa.table(PARENT, sa.column("id", UUID192Type()), sa.column("id_old"), sa.column("sh`ard"))
    with engine.connect() as conn:
        return [
            (key, old, shard)
            for key, old, shard in conn.execute(
                sa.select(t.c.id, t.c.id_old, t.c["sh`ard"]).order_by(t.c.id)
            ).all()
        ]


def test_keys_and_references_become_uuid192_with_the_rows_segment_and_come_back(
    private_engine: Engine,
) -> None:
    """The segment column's value in every key's last 8 bytes; the leading UUIDv7s
    in old-key order; every reference holds its parent's whole key (the joins
    give the same pairs); the mapping and ``<key>_old`` keep the old keys; an
    ORM model declaring ``UUID192Type`` reads and writes the tables; the undo
    gives back the database exactly."""
    engine = private_engine
    _shop(engine)
    before = _snapshot(engine)
    with engine.connect() as conn:
        joined = relations(conn)
        plan = migrate_pk_to_uuid7(
            conn, PARENT, target="uuid192", segment_column="sh`ard", batch_size=7, seed="s"
        )
        conn.commit()
    assert plan.uuid192 and plan.new_default.kind == "none"
    keys = _keys(engine)
    assert [old for _, old, _ in keys] == list(range(1, 21))  # old-key order kept
    for key, _old, shard in keys:
        assert isinstance(key, UUID192) and key.segment == shard and key.uuid.version == 7
        assert len(key.bytes) == 24
    with engine.connect() as conn:
        assert relations(conn) == joined
        mapping = dict(
            conn.execute(
                sa.select(sa.column("old_key"), sa.column("new_key", UUID192Type())).select_from(
                    sa.table(f"{PARENT}_uuid7_map")
                )
            ).all()
        )
        assert mapping == {old: key for key, old, _ in keys}
        # The leading UUID joins a UUIDv7 column (uuid192_uuid): the same rows.
        t = sa.table(PARENT, sa.column("id", UUID192Type()), sa.column("name"))
        leading = conn.execute(sa.select(uuid192_uuid(t.c.id), t.c.name).order_by(t.c.id)).all()
        assert [u for u, _ in leading] == [key.uuid for key, _, _ in keys]

    class Base(DeclarativeBase):
        pass

    class Tenant(Base):
        __tablename__ = PARENT
        id: Mapped[UUID192] = mapped_column(UUID192Type(), primary_key=True)
        shard: Mapped[int] = mapped_column("sh`ard")
        name: Mapped[str | None]

    class Order(Base):
        __tablename__ = CHILD
        id: Mapped[int] = mapped_column(primary_key=True)
        tenant_id: Mapped[UUID192] = mapped_column("tenant id", UUID192Type())

    first = keys[0][0]
    with Session(engine) as session:
        tenant = session.get(Tenant, first)
        assert tenant is not None and tenant.name == "t'1"
        assert {o.tenant_id for o in session.query(Order).filter_by(tenant_id=first)} == {first}
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, PARENT)
        conn.commit()
    after = _snapshot(engine)
    assert after[0] == before[0]
    assert after[1] == before[1]


@pytest.mark.parametrize(
    ("segment", "expected"),
    [
        # no segment: 16-byte keys; a type tag (with the slow tests)
        pytest.param({}, lambda old, shard: None, marks=pytest.mark.slow),
        pytest.param({"segment_sql": "7"}, lambda old, shard: 7, marks=pytest.mark.slow),
        # an expression of the row: the old key's parity and the shard
        ({"segment_sql": "id % 2 * 256 + 3"}, lambda old, shard: old % 2 * 256 + 3),
    ],
    ids=["none", "constant", "expression"],
)
@pytest.mark.slow_on("mariadb")  # the quick loop: MariaDB's segment from a column
def test_the_segment_from_an_expression_or_none(
    private_engine: Engine, segment: dict[str, str], expected: Any
) -> None:
    """``segment_sql`` is evaluated on each parent row before its key changes;
    without a segment the keys are their 16-byte UUIDv7s."""
    engine = private_engine
    _shop(engine)
    before = _snapshot(engine)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, PARENT, target="uuid192", **segment)  # type: ignore[arg-type]
        conn.commit()
    for key, old, shard in _keys(engine):
        assert key.segment == expected(old, shard)
        assert len(key.bytes) == (16 if key.segment is None else 24)
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, PARENT)
        conn.commit()
    assert _snapshot(engine) == before


# quick cover: the [postgresql] case (a segment past 2**63 through the engine);
# MariaDB's BIGINT UNSIGNED segment column migrated and restored:
# test_keys_and_references_become_uuid192_with_the_rows_segment_and_come_back[mariadb];
# a segment of 2**64 - 1 through the same segment_hex_sql on MariaDB:
# tests/test_migration_uuid192_online_mariadb.py::
#   test_a_child_written_before_its_parent_takes_the_parents_segment
@pytest.mark.slow_on("mariadb")
def test_segments_up_to_2_64_minus_1(private_engine: Engine) -> None:
    """The segment is unsigned 64-bit: PostgreSQL's ``numeric`` and MariaDB's
    ``BIGINT UNSIGNED`` hold values past ``2**63``, which must come out whole.
    SQLite's integers stop at ``2**63 - 1``."""
    engine = private_engine
    name = engine.dialect.name
    if name == "postgresql":
        shard: sa.types.TypeEngine[Any] = sa.Numeric(20, 0)
        top = 2**64 - 1
    elif name == "mysql":
        from sqlalchemy.dialects.mysql import BIGINT

        shard, top = BIGINT(unsigned=True), 2**64 - 1
    else:
        shard, top = sa.BigInteger(), 2**63 - 1
    parent = _shop(engine, shard)
    with engine.begin() as conn:
        conn.execute(parent.update().where(parent.c.id == 2).values({"sh`ard": top}))
        if top > 2**63:
            conn.execute(parent.update().where(parent.c.id == 3).values({"sh`ard": 2**63}))
    with engine.connect() as conn:
        # Integer-typed to the planner on every server (NUMERIC(20, 0) too).
        if name == "postgresql":
            options = {"segment_sql": '"sh`ard"'}
        else:
            options = {"segment_column": "sh`ard"}
        migrate_pk_to_uuid7(conn, PARENT, target="uuid192", **options)  # type: ignore[arg-type]
        conn.commit()
    segments = {old: key.segment for key, old, _ in _keys(engine)}
    assert segments[2] == top
    if top > 2**63:
        assert segments[3] == 2**63
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, PARENT)
        conn.commit()


@pytest.mark.parametrize(
    ("options", "refused"),
    [
        ({"segment_column": "nope"}, "segment column {t}.nope does not exist"),
        ({"segment_column": "name"}, "segment column {t}.name has type"),
        (
            {"segment_sql": "CASE WHEN id = 4 THEN NULL ELSE 1 END"},
            "is NULL or outside 0..2**64-1 in 1 row(s) of {t} (first id 4)",
        ),
        ({"segment_sql": "id - 3"}, "outside 0..2**64-1 in 2 row(s) of {t} (first id 1, 2)"),
        ({"segment_sql": "no_such_column + 1"}, "segment_sql 'no_such_column + 1' cannot be read"),
    ],
    ids=["missing column", "text column", "NULL", "negative", "bad SQL"],
)
def test_a_segment_that_cannot_work_is_refused_before_any_change(
    private_engine: Engine, options: dict[str, str], refused: str
) -> None:
    engine = private_engine
    _shop(engine)
    before = _snapshot(engine)
    with engine.connect() as conn, pytest.raises(MigrationRefusedError) as error:
        migrate_pk_to_uuid7(conn, PARENT, target="uuid192", **options)  # type: ignore[arg-type]
    assert refused.format(t=PARENT) in str(error.value)
    assert _snapshot(engine) == before


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"target": "uuid8"}, "target must be one of 'uuid7', 'uuid192', got 'uuid8'"),
        ({"segment_column": "shard"}, "segment_column gives UUID192 keys their segment"),
        (
            {"target": "uuid192", "segment_column": "a", "segment_sql": "1"},
            "not both",
        ),
        ({"target": "uuid192", "segment_sql": " "}, "segment_sql must be a non-empty"),
        (
            {"target": "uuid192", "online": True, "versions": True},
            "versions serve UUIDv7 keys only",
        ),
    ],
)
def test_options_that_disagree_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as error:
        PkMigrationOptions(**options)
    assert message in str(error.value)


@pytest.mark.slow_on("mariadb")
def test_a_server_default_expression_is_kept_for_new_rows(private_engine: Engine) -> None:
    """``server_default=`` an SQL expression still becomes the key's default (the
    author's choice); without it the application sends UUID192 keys (none is set)."""
    engine = private_engine
    _shop(engine)
    default = {
        "postgresql": "decode('0123456789abcdef0123456789abcdef', 'hex')",
        "mysql": "(UNHEX('0123456789abcdef0123456789abcdef'))",
        "sqlite": "x'0123456789abcdef0123456789abcdef'",
    }[engine.dialect.name]
    with engine.connect() as conn:
        plan = migrate_pk_to_uuid7(conn, PARENT, target="uuid192", server_default=default)
        conn.commit()
    assert plan.new_default.kind == "expression"
    with engine.begin() as conn:
        t = sa.table(PARENT, sa.column("sh`ard"), sa.column("name"), sa.column("id", UUID192Type()))
        conn.execute(sa.insert(t).values({"sh`ard": 1}))
        made = conn.execute(sa.select(t.c.id).where(t.c.name.is_(None))).first()
    assert made is not None and str(made[0]) == "01234567-89ab-cdef-0123-456789abcdef"


# quick cover: uuid192_uuid() on MariaDB: tests/test_types_uuid192_partitions.py::
#   test_uuid192_round_trip_and_join; the migration to UUID192 keys on MariaDB:
#   test_keys_and_references_become_uuid192_with_the_rows_segment_and_come_back
@pytest.mark.slow_on("mariadb")
def test_uuidv7_models_and_uuid192_keys_join_on_the_leading_uuid(private_engine: Engine) -> None:
    """A table that stores the tenant's UUIDv7 (not its segment) joins the
    migrated table through ``uuid192_uuid()``."""
    engine = private_engine
    _shop(engine)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, PARENT, target="uuid192", segment_column="sh`ard")
        conn.commit()
    metadata = sa.MetaData()
    audit = sa.Table(
        "audit", metadata, sa.Column("tenant", UUIDv7()), sa.Column("what", sa.String(9))
    )
    metadata.create_all(engine)
    keys = _keys(engine)
    tenants = sa.table(PARENT, sa.column("id", UUID192Type()), sa.column("name"))
    with engine.begin() as conn:
        conn.execute(
            audit.insert(), [{"tenant": k.uuid, "what": f"a{old}"} for k, old, _ in keys[:3]]
        )
        found = conn.execute(
            sa.select(tenants.c.name, audit.c.what)
            .join_from(audit, tenants, uuid192_uuid(tenants.c.id) == audit.c.tenant)
            .order_by(audit.c.what)
        ).all()
    assert found == [("t'1", "a1"), ("t'2", "a2"), ("t'3", "a3")]
    if engine.dialect.name == "mysql":
        return  # (MariaDB indexes no expression: a generated column, see the docs)
    # The join indexed: an index on the same expression, which the planner takes.
    index = sa.Index(
        "ix 'uuid'", uuid192_uuid(sa.Table(PARENT, sa.MetaData(), autoload_with=engine).c.id)
    )
    index.create(engine)
    with engine.connect() as conn:
        query = sa.select(tenants.c.name).where(uuid192_uuid(tenants.c.id) == keys[2][0].uuid)
        assert conn.execute(query).scalar_one() == "t'3"
        compiled = query.compile(conn)
        [value] = compiled.params.values()
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("SET enable_seqscan = off")
            [name] = compiled.params
            lines = conn.exec_driver_sql(f"EXPLAIN {compiled}", {name: value}).scalars().all()
        else:  # (UUIDv7 on SQLite: 32 hex digits)
            found = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}", (value.hex,)).all()
            lines = [row[-1] for row in found]
    assert any("ix 'uuid'" in line for line in lines), lines


def test_a_lookup_by_the_leading_uuid_reads_the_key_index(private_engine: Engine) -> None:
    """``has_uuid()`` finds a row by its UUIDv7 whatever its segment, as a range
    of the key's bytes, which the primary key's index serves (the plan says
    so on each database)."""
    engine = private_engine
    _shop(engine)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, PARENT, target="uuid192", segment_column="sh`ard")
        conn.commit()
    keys = _keys(engine)
    t = sa.table(PARENT, sa.column("id", UUID192Type()), sa.column("name"))
    with engine.connect() as conn:
        for key, old, _ in keys[:5]:
            found = conn.execute(sa.select(t.c.name).where(t.c.id.has_uuid(key.uuid))).all()
            assert found == [(f"t'{old}",)]
        query = sa.select(t.c.name).where(t.c.id.has_uuid(str(keys[3][0].uuid)))
        compiled = query.compile(conn)
        # (The driver's own parameters: the bounds as the column stores them.)
        given = {k: v.bytes if isinstance(v, UUID192) else v for k, v in compiled.params.items()}
        name = engine.dialect.name
        if name == "postgresql":
            conn.exec_driver_sql("SET enable_seqscan = off")  # 20 rows: else a scan is cheaper
            plan = conn.exec_driver_sql(f"EXPLAIN {compiled}", given).scalars().all()
            assert any("Index" in line for line in plan), plan
        elif name == "mysql":
            plan = conn.exec_driver_sql(f"EXPLAIN {compiled}", given).mappings().one()
            assert plan["key"] == "PRIMARY", plan
        else:
            positional = tuple(given[k] for k in compiled.positiontup or ())
            plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}", positional).all()
            assert any("PRIMARY KEY" in str(row[-1]) or "INDEX" in str(row[-1]) for row in plan), (
                plan
            )


@pytest.mark.slow_on("mariadb")
def test_rows_created_since_get_old_keys_back(private_engine: Engine) -> None:
    """A tenant and an order the application created with UUID192 keys after the
    migration: the undo numbers the tenant after the largest old key and points
    the order at it."""
    engine = private_engine
    _shop(engine)
    if engine.dialect.name == "postgresql":  # the rows were inserted with their keys
        with engine.begin() as conn:
            conn.execute(
                sa.text("SELECT setval(pg_get_serial_sequence(:t, 'id'), 20)"),
                {"t": _q(engine, PARENT)},
            )
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, PARENT, target="uuid192", segment_column="sh`ard")
        conn.commit()
    tenants = sa.table(
        PARENT, sa.column("id", UUID192Type()), sa.column("sh`ard"), sa.column("name")
    )
    orders = sa.table(CHILD, sa.column("id"), sa.column("tenant id", UUID192Type()))
    made = UUID192(uuid7(), 9)
    with engine.begin() as conn:
        conn.execute(sa.insert(tenants).values({"id": made, "sh`ard": 9, "name": "new"}))
        conn.execute(sa.insert(orders).values({"id": 99, "tenant id": made}))
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, PARENT)
        conn.commit()
        found = conn.exec_driver_sql(
            f"SELECT p.{_q(engine, 'id')}, p.name FROM {_q(engine, CHILD)} c JOIN"
            f" {_q(engine, PARENT)} p ON p.{_q(engine, 'id')} = c.{_q(engine, 'tenant id')}"
            f" WHERE c.{_q(engine, 'id')} = 99"
        ).one()
    assert tuple(found) == (21, "new")


def _q(engine: Engine, name: str) -> str:
    return engine.dialect.identifier_preparer.quote(name)
