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
