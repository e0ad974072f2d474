"""The plan's data: typed key defaults, stored as JSON and read back (also from 0.1's dicts)."""

from __future__ import annotations

import json

from sqla_ids.migration.core.model import NewKeyDefault, OldKeyDefault, PkMigrationPlan


def _plan(**fields: object) -> PkMigrationPlan:
    base: dict[str, object] = dict(
        dialect="postgresql",
        table="orders",
        column="id",
        pk_name="orders_pkey",
        key_kind="integer",
        key_type_sql="bigint",
        old_column="id_old",
        mapping_table="orders_uuid7_map",
        row_count=3,
    )
    base.update(fields)
    return PkMigrationPlan(**base)  # type: ignore[arg-type]


def test_key_defaults_survive_json() -> None:
    plan = _plan(
        default=OldKeyDefault("identity", always=True, sequence={"relname": "orders_id_seq"}),
        new_default=NewKeyDefault("uuid7_function", sql="sqla_ids_uuid7()", function="f"),
    )
    again = PkMigrationPlan.from_json(plan.to_json())
    assert again == plan
    assert isinstance(again.default, OldKeyDefault)
    assert again.new_default.describe() == "UUIDv7 from f() (DEFAULT sqla_ids_uuid7())"
    assert again.new_default_sql == "sqla_ids_uuid7()"


def test_plans_stored_with_dicts_are_read() -> None:
    stored = json.loads(_plan().to_json())
    for old, counter in (
        ({"kind": "auto_increment", "next": 42}, 42),
        ({"kind": "autoincrement", "seq": 7}, 7),
    ):
        stored["default"] = old
        stored["new_default"] = {"kind": "none", "reason": "server_default=False"}
        plan = PkMigrationPlan.from_json(json.dumps(stored))
        assert plan.default == OldKeyDefault(old["kind"], counter=counter)
        assert plan.new_default.describe() == "none (server_default=False)"
    stored["default"] = {}
    assert PkMigrationPlan.from_json(json.dumps(stored)).default.kind == "none"
