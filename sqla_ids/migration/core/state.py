"""The state table: one row per migrated key, holding its plan and current step.

It lets ``alembic downgrade`` use exactly what was reflected at upgrade time,
and lets a MariaDB/MySQL migration interrupted by a crash continue where it
stopped (its DDL commits implicitly, so there is no rollback to rely on).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.migration.core.model import PkMigrationPlan
from sqla_ids.migration.core.phases import Recorded
from sqla_ids.migration.core.reflected import create_table, inspect

STATE_TABLE = "sqla_ids_pk_migrations"

_metadata = sa.MetaData()
state_table = sa.Table(
    STATE_TABLE,
    _metadata,
    sa.Column("table_name", sa.String(255), primary_key=True),
    sa.Column("step", sa.String(64), nullable=False),
    sa.Column("plan", sa.Text, nullable=False),
)


def load(connection: Connection, table: str) -> tuple[Recorded, PkMigrationPlan] | None:
    """The recorded ``(step, plan)`` of ``table``'s migration, if any."""
    if not inspect(connection).has_table(STATE_TABLE):
        return None
    row = connection.execute(
        sa.select(state_table.c.step, state_table.c.plan).where(state_table.c.table_name == table)
    ).first()
    if row is None:
        return None
    return Recorded.decode(row.step), PkMigrationPlan.from_json(row.plan)


def steps(connection: Connection) -> dict[str, str]:
    """The recorded step of every table with a migration on record, as the
    state table shows it (``online:prepared``): for people and logs."""
    return {name: step.encode() for name, step in recorded(connection).items()}


def recorded(connection: Connection) -> dict[str, Recorded]:
    """The recorded step of every table with a migration on record."""
    if not inspect(connection).has_table(STATE_TABLE):
        return {}
    rows = connection.execute(sa.select(state_table.c.table_name, state_table.c.step))
    return {name: Recorded.decode(step) for name, step in rows}


def recorded_plans(connection: Connection) -> dict[str, tuple[Recorded, PkMigrationPlan]]:
    """Every recorded migration: its step and its plan."""
    if not inspect(connection).has_table(STATE_TABLE):
        return {}
    rows = connection.execute(
        sa.select(state_table.c.table_name, state_table.c.step, state_table.c.plan)
    )
    return {
        name: (Recorded.decode(step), PkMigrationPlan.from_json(plan)) for name, step, plan in rows
    }


def save(connection: Connection, plan: PkMigrationPlan, reached: Recorded) -> None:
    """Record that ``plan`` reached ``reached`` (creates the state table on first use)."""
    step = reached.encode()
    create_table(connection, state_table)
    updated = connection.execute(
        sa.update(state_table)
        .where(state_table.c.table_name == plan.table)
        .values(step=step, plan=plan.to_json())
    ).rowcount
    if not updated:
        connection.execute(
            sa.insert(state_table).values(table_name=plan.table, step=step, plan=plan.to_json())
        )


def forget(connection: Connection, table: str) -> None:
    """Remove ``table``'s row; drop the state table once it is empty."""
    connection.execute(sa.delete(state_table).where(state_table.c.table_name == table))
    remaining = connection.execute(sa.select(sa.func.count()).select_from(state_table)).scalar()
    if not remaining:
        state_table.drop(connection)
