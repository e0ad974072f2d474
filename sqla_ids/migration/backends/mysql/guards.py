"""MariaDB: the application's ``UPDATE`` triggers while the online migration writes.

The online migration rewrites every row of the affected tables (the backfill's
``UPDATE`` statements) while the application keeps writing, and MariaDB cannot
disable a trigger: a trigger that sets ``last_update`` or writes an audit row
must fire for the application's updates, and not for the migration's, which
change no value the application sees. From the expand until the contract (or
the undo) each such trigger (:class:`~sqla_ids.migration.core.model.ParkedTrigger`,
recorded in the plan) is replaced by itself guarded::

    IF @sqla_ids_migration IS NULL THEN
    <its body as written>;
    END IF

and the migration's own sessions set ``@sqla_ids_migration`` (a user variable:
no other session sees it) for as long as they are the migration's
(:meth:`MariaDBOnline.enter_scope`). Its definer, timing and ``sql_mode`` stay
what they were.

``CREATE OR REPLACE TRIGGER`` swaps a trigger in one statement -- no moment
without it, as a ``DROP`` then ``CREATE`` would leave -- but moves it to the end
of its table's firing order (measured on MariaDB 10.11). The triggers are
therefore replaced with the tables locked (the application waits a few
milliseconds rather than see them fire out of order), in the order they
fired, each one only if it is not replaced yet: the replaced ones are always
the first of that order, at the end in that order, so once all are replaced
the order is what it was -- also when a step stopped half-way (each DDL
statement commits on its own) continues. The migration's sync triggers,
created after them, fire last. A trigger that is gone, or whose
body is neither its recorded one nor the guarded form (changed by someone
since), is left as it is.
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import literal_for, quote_name
from sqla_ids.migration.backends.mysql.reflect import catalog_rows
from sqla_ids.migration.core.added_key import AddKeyPlan
from sqla_ids.migration.core.model import ParkedTrigger, PkMigrationPlan
from sqla_ids.migration.core.sql import Statement

#: The user variable the migration's sessions set, and the guards read.
VARIABLE = "@sqla_ids_migration"

#: Where a connection keeps its own ``sql_mode`` while a trigger's is set
#: (:meth:`MariaDBOnline.release` puts it back, also after a failed step).
SQL_MODE = "sqla_ids_online_sql_mode"


def guarded(body: str) -> str:
    """``body`` (a trigger's statement, as written) firing only outside the migration."""
    return f"IF {VARIABLE} IS NULL THEN\n{body};\nEND IF"


def trigger_bodies(connection: Connection) -> dict[str, str]:
    """The database's triggers: name -> their statement, as ``information_schema`` has it."""
    return {
        str(name): str(body)
        for name, body in catalog_rows(
            connection,
            "SELECT TRIGGER_NAME, ACTION_STATEMENT FROM information_schema.TRIGGERS"
            " WHERE TRIGGER_SCHEMA = DATABASE()",
        )
    }


def _definer(connection: Connection, definer: str) -> str:
    """``user@host`` as ``DEFINER=`` takes it (the host follows the last ``@``)."""
    user, _, host = definer.rpartition("@")
    return f"{literal_for(connection.dialect, user)}@{literal_for(connection.dialect, host)}"


def _in_mode(connection: Connection, replaced: list[tuple[ParkedTrigger, str]]) -> list[Statement]:
    """Each ``CREATE OR REPLACE`` parsed in its trigger's ``sql_mode``, the session's
    own mode back after (kept in the connection's info too: a step that stops
    half-way leaves the trigger's mode on it, which the release undoes)."""
    if not replaced:
        return []
    session_mode = connection.info.setdefault(
        SQL_MODE, connection.execute(sa.text("SELECT @@SESSION.sql_mode")).scalar_one()
    )
    statements = []
    for trigger, sql in replaced:
        statements.append(Statement("SET SESSION sql_mode = :mode", {"mode": trigger.sql_mode}))
        statements.append(Statement(sql))
    return [*statements, Statement("SET SESSION sql_mode = :mode", {"mode": session_mode})]


def guard_statements(
    connection: Connection, plan: PkMigrationPlan | AddKeyPlan, bodies: dict[str, str]
) -> list[Statement]:
    """Replace each recorded trigger by its guarded form (see the module docstring)."""
    replaced = []
    for trigger in plan.parked_triggers:
        if bodies.get(trigger.name) != trigger.body:  # guarded already, gone or changed
            continue
        replaced.append(
            (
                trigger,
                f"CREATE OR REPLACE DEFINER={_definer(connection, trigger.definer)}"
                f" TRIGGER {quote_name(connection.dialect, trigger.name)} {trigger.timing} UPDATE"
                f" ON {quote_name(connection.dialect, trigger.table)}"
                f" FOR EACH ROW {guarded(trigger.body)}",
            )
        )
        bodies[trigger.name] = guarded(trigger.body)
    return _in_mode(connection, replaced)


_CREATE = re.compile(r"\s*CREATE\s+", re.IGNORECASE)


def unguard_statements(
    connection: Connection, plan: PkMigrationPlan | AddKeyPlan, bodies: dict[str, str]
) -> list[Statement]:
    """Put each guarded trigger back as it was created (its original statement),
    in the order they fired; after the migration's own triggers are dropped."""
    replaced = []
    for trigger in plan.parked_triggers:
        if bodies.get(trigger.name) != guarded(trigger.body):
            continue
        original = _CREATE.match(trigger.create_sql)
        if original is None:  # SHOW CREATE TRIGGER always starts so; never replaced blind
            continue
        replaced.append((trigger, "CREATE OR REPLACE " + trigger.create_sql[original.end() :]))
        bodies[trigger.name] = trigger.body
    return _in_mode(connection, replaced)
