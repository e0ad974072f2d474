"""``merge_uuids``: duplicate ids become one everywhere, with the history kept."""

from __future__ import annotations

import json
import secrets
import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.identifiers import uuid7_batch
from sqla_ids.migration.merge import merge_uuids
from sqla_ids.types.uuid7 import UUIDv7


def _schema(metadata: sa.MetaData, engine: Engine, p: str) -> tuple[list[uuid.UUID], sa.Table]:
    customer = sa.Table(
        f"{p}customer",
        metadata,
        sa.Column("id", UUIDv7, primary_key=True),
        sa.Column("email", sa.String(40), nullable=False),
        sa.Column("referred_by", UUIDv7, sa.ForeignKey(f"{p}customer.id", name=f"{p}fk_ref")),
    )
    orders = sa.Table(
        f"{p}orders",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("customer_id", UUIDv7, sa.ForeignKey(customer.c.id), nullable=False),
    )
    sa.Table(
        f"{p}membership",
        metadata,
        sa.Column("customer_id", UUIDv7, sa.ForeignKey(customer.c.id), primary_key=True),
        sa.Column("club", sa.String(10), primary_key=True),
    )
    sa.Table(
        f"{p}audit",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("who", UUIDv7),
    )
    metadata.create_all(engine)
    ids = uuid7_batch(4)
    with engine.begin() as conn:
        conn.execute(
            customer.insert(),
            [{"id": i, "email": f"c{n}@x", "referred_by": None} for n, i in enumerate(ids)],
        )
        conn.execute(customer.update().where(customer.c.id == ids[3]).values(referred_by=ids[1]))
        conn.execute(orders.insert(), [{"id": n, "customer_id": ids[n % 3]} for n in range(1, 10)])
        conn.execute(
            metadata.tables[f"{p}membership"].insert(),
            [
                {"customer_id": ids[0], "club": "gold"},
                {"customer_id": ids[1], "club": "gold"},
                {"customer_id": ids[2], "club": "blue"},
            ],
        )
        conn.execute(metadata.tables[f"{p}audit"].insert(), [{"id": 1, "who": ids[1]}])
    return ids, customer


def test_merge_rewrites_every_reference_and_keeps_history(
    engine: Engine, metadata: sa.MetaData
) -> None:
    p = f"m{secrets.token_hex(2)}_"
    ids, customer = _schema(metadata, engine, p)
    with engine.connect() as conn:
        # ids[1] and ids[0] are both gold members: merging them would break that key.
        with pytest.raises(MigrationRefusedError, match="unique key"):
            merge_uuids(conn, f"{p}customer", {ids[1]: ids[0]})
        with pytest.raises(MigrationRefusedError, match="itself merged"):
            merge_uuids(conn, f"{p}customer", {ids[1]: ids[2], ids[2]: ids[3]})
        with pytest.raises(MigrationRefusedError, match="no row with id"):
            merge_uuids(conn, f"{p}customer", {uuid.uuid4(): ids[0]})
        merged = merge_uuids(
            conn,
            f"{p}customer",
            {str(ids[1]): ids[2]},
            extra_references=[(f"{p}audit", "who")],
        )
        conn.commit()
    assert merged == 1
    orders = metadata.tables[f"{p}orders"]
    with engine.connect() as conn:
        owners = conn.execute(sa.select(orders.c.customer_id).order_by(orders.c.id)).scalars()
        assert list(owners) == [ids[n % 3] if n % 3 != 1 else ids[2] for n in range(1, 10)]
        assert (
            conn.execute(
                sa.select(customer.c.referred_by).where(customer.c.id == ids[3])
            ).scalar_one()
            == ids[2]
        )
        audit = metadata.tables[f"{p}audit"]
        assert conn.execute(sa.select(audit.c.who)).scalar_one() == ids[2]
        assert ids[1] not in set(conn.execute(sa.select(customer.c.id)).scalars())
        history = sa.Table(f"{p}customer_uuid_merges", sa.MetaData(), autoload_with=conn)
        row = conn.execute(sa.select(history)).mappings().one()
        assert json.loads(row["row_data"])["email"] == "c1@x"
        rewritten = json.loads(row["references_rewritten"])
        assert rewritten[f"{p}orders.customer_id"] == 3
        assert rewritten[f"{p}audit.who"] == 1
    with engine.begin() as conn:
        history.drop(conn)


def test_merge_with_hostile_names(engine: Engine, metadata: sa.MetaData) -> None:
    """Backticks, quotes and spaces in the key's, the reference's and the unique
    key's names: the key is found (MariaDB: SQLAlchemy's reflection returns a
    backtick in a key's or an index's name doubled), the unique key over the
    reference refuses the merge that would break it, and a merge rewrites the
    reference."""
    p = f"m{secrets.token_hex(2)}`'\" "
    parent = sa.Table(f"{p}pa`rent", metadata, sa.Column("i`d \"k'", UUIDv7, primary_key=True))
    child = sa.Table(
        f"{p}ch`ild",
        metadata,
        sa.Column("n", sa.Integer, primary_key=True),
        sa.Column("pa`rent id", UUIDv7, sa.ForeignKey(parent.c["i`d \"k'"]), nullable=False),
        sa.Column("cl`ub", sa.String(10), nullable=False),
        sa.UniqueConstraint("pa`rent id", "cl`ub", name=f"{p}u`q"),
    )
    metadata.create_all(engine)
    ids = uuid7_batch(3)
    with engine.begin() as conn:
        conn.execute(parent.insert(), [{"i`d \"k'": i} for i in ids])
        conn.execute(
            child.insert(),
            [
                {"n": 1, "pa`rent id": ids[0], "cl`ub": "gold"},
                {"n": 2, "pa`rent id": ids[1], "cl`ub": "gold"},
                {"n": 3, "pa`rent id": ids[2], "cl`ub": "blue"},
            ],
        )
    with engine.connect() as conn:
        with pytest.raises(MigrationRefusedError, match="unique key"):
            merge_uuids(conn, parent.name, {ids[1]: ids[0]})
        assert merge_uuids(conn, parent.name, {ids[1]: ids[2]}) == 1
        conn.commit()
    with engine.connect() as conn:
        rows = conn.execute(sa.select(child.c.n, child.c["pa`rent id"]).order_by(child.c.n))
        assert [tuple(r) for r in rows] == [(1, ids[0]), (2, ids[2]), (3, ids[2])]
        history = sa.Table(f"{parent.name}_uuid_merges", sa.MetaData(), autoload_with=conn)
    with engine.begin() as conn:
        history.drop(conn)
