"""PostgreSQL online: the lock block the steps take their tables with, and
waiting out autovacuum.

A step that changes several tables in one transaction must never wait for
one while holding another that an application transaction waits for: the
application would wait longer than the step, and be PostgreSQL's deadlock
victim. :func:`lock_all` takes them all first, waiting for one at a time.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect

from sqla_ids.dialects.sql import literal_for, quote_name
from sqla_ids.migration.core.sql import Statement

# The trigger functions' bodies are dollar-quoted with this tag; names inside
# are quoted identifiers, so a name containing "$" cannot end the body early
# unless it contains the whole tag, which dollar_tag() avoids.
_TAG = "sqla_ids_fn"


def dollar_tag(*texts: str) -> str:
    """A dollar-quote tag found in none of ``texts``."""
    tag = _TAG
    while any(tag in text for text in texts):
        tag += "_"
    return f"${tag}$"


# The relation {name} (SQL text of a regclass) and the tables a LOCK TABLE of
# it takes too (partitions, inheriting tables), as a row set of oids.
TREE = (
    "WITH RECURSIVE t(oid) AS (SELECT CAST({name} AS oid)"
    " UNION SELECT i.inhrelid FROM pg_inherits i JOIN t ON i.inhparent = t.oid)"
    " SELECT oid FROM t"
)
# Granted locks on that tree held by other sessions, l joined to their activity a.
HELD = (
    "SELECT 1 FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'relation' AND l.granted AND l.pid IS DISTINCT FROM pg_backend_pid()"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND l.relation IN (" + TREE + ")"
)
AUTOVACUUM = "a.backend_type = 'autovacuum worker'"
# lock_timeout past the deadlock check: deadlock_timeout plus the step's own
# ({step}: SQL text of a lock_timeout value; '0' stays 0).
OUTLAST = (
    "CASE WHEN {step} IN ('0', '0ms') THEN '0' ELSE CAST(CAST(extract(epoch FROM"
    " CAST(current_setting('deadlock_timeout') AS interval) + CAST({step} AS interval))"
    " * 1000 AS bigint) AS text) || 'ms' END"
)


def lock_all(dialect: Dialect, names: list[str], mode: str = "ACCESS EXCLUSIVE") -> Statement:
    """``names`` (quoted) locked in ``mode``, waiting for one at a time while
    holding none that the application waits for.

    One ``DO`` block. First, autovacuum: each object taken in ``SHARE UPDATE
    EXCLUSIVE`` -- the weakest lock autovacuum conflicts with, which no read
    or write of the application waits for -- and one that is busy waited for
    past the deadlock check, which cancels the vacuum (see
    :meth:`~.online.PostgreSQLOnline.vacuum_holding`); held, they keep autovacuum off
    until the step commits (given back, a table would be vacuumed again
    within ``autovacuum_naptime``). Then ``mode``: the first object is waited
    for (under the step's ``lock_timeout``, whose expiry ends the statement:
    the step is retried); the others are taken at once (``NOWAIT``),
    server-side, right after it. One that is busy gives back every lock of
    ``mode`` taken (the round's subtransaction rolls back), and the next round
    waits for that one first. The application waits behind the step only for
    the object it is waiting for, and never for a step that waits for the
    application.

    (The wait past the deadlock check once came while holding the objects
    before, in ``mode``, when autovacuum alone held the next: an application
    transaction that took that one in the moment between the check and the
    wait, then queued for one held, was in a cycle with the step -- and,
    having waited longer, PostgreSQL's deadlock victim; two runs in seventeen
    of tests/test_migration_online_partitions.py's autovacuum test.)"""
    body = "\n".join(
        [
            *_declare(dialect, names, "wait int := 1; waiting boolean;"),
            "BEGIN",
            *_vacuum_first(),
            f"FOR attempt IN 1..{2 * len(names) + 1} LOOP",
            "  BEGIN",
            "    waiting := true;",
            f"    EXECUTE 'LOCK TABLE ' || names[wait] || ' IN {mode} MODE';",
            "    waiting := false;",
            "    FOR i IN 1..array_length(names, 1) LOOP",
            "      CONTINUE WHEN i = wait;",
            "      wait := i;",
            f"      EXECUTE 'LOCK TABLE ' || names[i] || ' IN {mode} MODE NOWAIT';",
            "    END LOOP;",
            "    RETURN;",
            "  EXCEPTION WHEN lock_not_available THEN",
            "    IF waiting THEN RAISE; END IF;",
            "  END;",
            "END LOOP;",
            "RAISE EXCEPTION 'the tables stayed busy' USING ERRCODE = 'lock_not_available';",
            "END",
        ]
    )
    return _do(body)


def wait_out_vacuum(dialect: Dialect, names: list[str]) -> Statement:
    """The first part of :func:`lock_all` alone: ``SHARE UPDATE EXCLUSIVE`` on
    ``names`` (quoted), a busy one waited for past the deadlock check, at the
    start of a step's transaction (see
    :meth:`~.online.PostgreSQLOnline.wait_out_vacuum`)."""
    return _do("\n".join([*_declare(dialect, names), "BEGIN", *_vacuum_first(), "END"]))


def _declare(dialect: Dialect, names: list[str], more: str = "") -> list[str]:
    """The block's variables: ``names`` (quoted), ``step`` (its lock_timeout)."""
    array = ", ".join(literal_for(dialect, name) for name in names)
    return [
        f"DECLARE names text[] := ARRAY[{array}]; {more}".rstrip(),
        "  step text := current_setting('lock_timeout');",
    ]


def _vacuum_first() -> list[str]:
    """PL/pgSQL: every one of ``names`` taken in ``SHARE UPDATE EXCLUSIVE``, one
    that is busy (autovacuum) waited for past the deadlock check; one gone
    since it was named skipped."""
    outlast = OUTLAST.format(step="step")
    return [
        "FOR i IN 1..array_length(names, 1) LOOP",
        "  CONTINUE WHEN to_regclass(names[i]) IS NULL;",
        "  BEGIN",
        "    EXECUTE 'LOCK TABLE ' || names[i] || ' IN SHARE UPDATE EXCLUSIVE MODE NOWAIT';",
        "  EXCEPTION WHEN lock_not_available THEN",
        f"    PERFORM set_config('lock_timeout', {outlast}, true);",
        "    EXECUTE 'LOCK TABLE ' || names[i] || ' IN SHARE UPDATE EXCLUSIVE MODE';",
        "    PERFORM set_config('lock_timeout', step, true);",
        "  END;",
        "END LOOP;",
    ]


def _do(body: str) -> Statement:
    tag = dollar_tag(body)
    return Statement(f"DO {tag}\n{body}\n{tag}")


def lock_tree(connection: Connection, table: str, mode: str) -> list[Statement]:
    """``table`` and every table below it (partitions at any depth, tables
    that inherit from it) locked in ``mode`` by :func:`lock_all`, the deepest
    first; nothing for a table with none below it (one table: its statement
    waits for nothing else).

    For a step whose statements take the tree's locks one by one -- a
    statement per partition, or one that recurses -- each a wait while
    holding the ones before: an application transaction that wrote to one
    table below and queued for one held would be in a cycle with the step,
    and having waited longer, the deadlock victim. A ``LOCK TABLE`` of a
    table takes those below it too, one by one, so the one waited for (the
    first) is one with none below it, and a table comes after those below
    it."""
    below = [
        str(name)
        for name in connection.execute(
            sa.text(
                "WITH RECURSIVE t(oid, depth) AS ("
                " SELECT inhrelid, 1 FROM pg_inherits WHERE inhparent = to_regclass(:t)"
                " UNION SELECT i.inhrelid, t.depth + 1 FROM pg_inherits i"
                " JOIN t ON i.inhparent = t.oid)"
                " SELECT CAST(CAST(oid AS regclass) AS text) FROM t"
                " GROUP BY oid ORDER BY max(depth) DESC, 1"
            ),
            {"t": quote_name(connection.dialect, table)},
        ).scalars()
    ]
    if not below:
        return []
    names = [*below, quote_name(connection.dialect, table)]
    return [lock_all(connection.dialect, names, mode)]
