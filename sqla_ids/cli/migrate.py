"""``sqla-ids migrate plan|run|status|undo --url URL TABLE...``: key migrations
without an Alembic project.

The same library calls the Alembic operations make
(:func:`~sqla_ids.migration.migrate_pks_to_uuid7`,
:func:`~sqla_ids.migration.restore_pk_from_uuid7`, the state table of
:mod:`sqla_ids.migration.core.state`), so a migration started here can be
continued or undone by a revision and the other way round:

* ``plan``: the preflight (:mod:`sqla_ids.migration.dry_run`) -- what
  will change, the statements of each phase, what is refused, the estimates
  next to the server's free disk and log settings; nothing is changed.
* ``run``: the migration, with a progress bar on a terminal and plain log
  lines otherwise. Ctrl-C stops at the next batch boundary and says how to
  continue; a second Ctrl-C stops at once.
* ``status``: where each recorded migration stands, and what comes next.
* ``undo``: back to the old keys (online where the migration is swapped and
  not contracted yet).

Passwords in ``--url`` never appear in the output or in errors.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from sqla_ids.cli.database import add_url_argument, display_url, open_engine, url_error
from sqla_ids.errors import CommandError, SqlaIdsError

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

    from sqla_ids.migration import PkMigrationOptions

Phase = Literal["all", "prepare", "swap", "contract"]
_PHASE: dict[str, Phase] = {
    "all": "all",
    "prepare": "prepare",
    "swap": "swap",
    "contract": "contract",
}
PHASES = tuple(_PHASE)


def register(subparsers: Any) -> None:
    """Add ``migrate`` and its actions to the command line."""
    parser = subparsers.add_parser(
        "migrate",
        help="migrate integer/text primary keys to UUIDv7 (plan, run, status, undo)",
        description=(
            "Migrate primary keys to UUIDv7 without an Alembic project: the same engine as"
            " op.migrate_pk_to_uuid7. Exit status: 0 done, 1 refused (plan), 2 error,"
            " 130 stopped by Ctrl-C."
        ),
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    helps = {
        "plan": "the preflight: changes, statements, estimates, risks (changes nothing)",
        "run": "run the migration (progress bar; Ctrl-C stops between batches)",
        "status": "where each recorded migration stands",
        "undo": "restore the old keys",
    }
    for name, text in helps.items():
        action = actions.add_parser(name, help=text, description=text)
        add_url_argument(action)
        action.add_argument(
            "tables",
            nargs="*" if name == "status" else "+",
            metavar="TABLE",
            help="tables whose key to migrate, in order"
            + (" (default: all recorded)" if name == "status" else ""),
        )
        if name in ("plan", "run"):
            _add_options(action)
        if name == "plan":
            action.add_argument("--json", action="store_true", help="print the report as JSON")
            action.add_argument(
                "--summary", action="store_true", help="leave the statements of each phase out"
            )
        action.set_defaults(handler=_HANDLERS[name])


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--online", action="store_true", help="migrate while the application writes"
    )
    parser.add_argument(
        "--phase",
        choices=PHASES,
        default="all",
        help="online: run this phase only (prepare, swap, contract; default all)",
    )
    parser.add_argument("--batch-size", type=int, help="rows per batch (default 10000)")
    parser.add_argument(
        "--batch-time", type=float, help="online: seconds a batch should take (default 0.5)"
    )
    parser.add_argument("--batch-pause", type=float, help="online: seconds between batches")
    parser.add_argument("--lock-timeout", type=float, help="online: seconds to wait for a lock")
    parser.add_argument("--timestamp-column", help="column giving the new keys' timestamps")
    parser.add_argument(
        "--target",
        # (PkMigrationOptions.TARGETS: the migration package is imported only to run)
        choices=("uuid7", "uuid192"),
        help="the new key type: uuid7 (default) or uuid192 (UUIDv7 + 64-bit segment; offline)",
    )
    parser.add_argument("--segment-column", help="uuid192: integer column giving each segment")
    parser.add_argument("--segment-sql", help="uuid192: SQL expression giving each segment")
    parser.add_argument(
        "--extra-reference",
        nargs=2,
        action="append",
        metavar=("TABLE", "COLUMN"),
        default=[],
        help="a column holding the key without a foreign key (repeat)",
    )
    parser.add_argument(
        "--acknowledge",
        action="append",
        default=[],
        metavar="ROUTINE",
        help="a function, procedure or trigger you checked for the new key type (repeat)",
    )
    parser.add_argument(
        "--recreate-views", action="store_true", help="drop and recreate views over the key"
    )


def _options(args: argparse.Namespace) -> PkMigrationOptions:
    from sqla_ids.migration import PkMigrationOptions

    given: dict[str, Any] = {
        "online": args.online,
        "batch_size": args.batch_size,
        "batch_time": args.batch_time,
        "batch_pause": args.batch_pause,
        "lock_timeout": args.lock_timeout,
        "timestamp_column": args.timestamp_column,
        "target": args.target,
        "segment_column": args.segment_column,
        "segment_sql": args.segment_sql,
        "extra_references": [tuple(pair) for pair in args.extra_reference],
        "acknowledged_routines": args.acknowledge,
        "recreate_views": args.recreate_views,
    }
    try:
        return PkMigrationOptions(**{k: v for k, v in given.items() if v not in (None, [])})
    except ValueError as error:
        raise CommandError(str(error).replace("_", "-")) from None


@contextmanager
def _connected(url: str) -> Iterator[Connection]:
    """A connection to ``--url``; database errors as :class:`CommandError`."""
    import sqlalchemy as sa

    engine: Engine = open_engine(url)
    if engine.dialect.name == "sqlite":
        _transactional_ddl(engine)
    try:
        with engine.connect() as connection:
            yield connection
    except sa.exc.DBAPIError as error:
        raise url_error(error, url) from None
    except (SqlaIdsError, ValueError, LookupError) as error:
        if isinstance(error, CommandError):
            raise
        raise CommandError(str(error)) from None
    finally:
        engine.dispose()


def _transactional_ddl(engine: Engine) -> None:
    """SQLite: let the transaction cover DDL too (SQLAlchemy's recipe): Python's
    driver otherwise commits a ``CREATE TABLE`` run before the transaction's
    first write, so a stopped offline run would leave the state table behind."""
    import sqlalchemy as sa

    @sa.event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = None

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN")


def _plan(args: argparse.Namespace) -> int:
    from sqla_ids.migration import preflight_many

    options = _options(args)
    with _connected(args.url) as connection:
        report = preflight_many(
            connection, [(t, options) for t in args.tables], phase=_PHASE[args.phase]
        )
        connection.rollback()
    if args.json:
        print(report.to_json())
    else:
        print(f"sqla-ids migrate plan: {display_url(args.url)}")
        print(report.describe(statements=not args.summary))
    return 1 if report.refused else 0


def _again(args: argparse.Namespace, action: str = "run") -> str:
    """The command to type to continue (the password masked)."""
    words = ["sqla-ids", "migrate", action, "--url", display_url(args.url), *args.tables]
    if action == "run" and args.online:
        words.append("--online")
        if args.phase != "all":
            words += ["--phase", args.phase]
    return shlex.join(words)


def _stopped(args: argparse.Namespace, transactional: bool, at_once: bool) -> str:
    """What a stop left, and how to go on: by mode and database."""
    from sqla_ids.migration.core import state

    how = "stopped at once (second Ctrl-C)" if at_once else "stopped between batches"
    if not args.online and transactional:
        return (
            f"{how}: the offline migration runs in one transaction, which was rolled back;"
            f" nothing was changed. Run `{_again(args)}` to start it again"
        )
    with _connected(args.url) as connection:
        steps = state.steps(connection)
    where = ", ".join(f"{t} at {steps[t]}" for t in args.tables if t in steps) or "nothing"
    if args.online:
        kept = "every batch done is committed" if not at_once else "the step running was cut off"
        return (
            f"{how}: {kept}; recorded: {where}. Run `{_again(args)}` to continue where it"
            f" stopped, or `{_again(args, 'undo')}` to remove what it added"
        )
    return (
        f"{how}: each step commits on its own and is recorded ({where}). Run"
        f" `{_again(args)}` to continue where it stopped"
        + ("" if not at_once else " (the statement running may have finished on the server)")
    )


def _run(args: argparse.Namespace) -> int:
    from sqla_ids.cli.migration_progress import StopRequested, Watch
    from sqla_ids.migration import migrate_pks_to_uuid7
    from sqla_ids.migration.backends import backend_for

    options = _options(args)
    if args.phase != "all" and not args.online:
        raise CommandError("--phase needs --online (the offline mode has one phase)")
    entries: list[str | tuple[str, PkMigrationOptions]] = [(t, options) for t in args.tables]
    # Online, the phases one by one: a Ctrl-C during one stops before the next.
    phases: list[Phase] = ["prepare", "swap", "contract"] if args.online else ["all"]
    if args.phase != "all":
        phases = [_PHASE[args.phase]]
    transactional = True
    with Watch() as watch:
        try:
            with _connected(args.url) as connection:
                transactional = backend_for(connection).strategy.transactional
                for phase in phases:
                    watch.phase(phase if args.online else "offline")
                    migrate_pks_to_uuid7(connection, entries, phase=phase)
                    connection.commit()
        except StopRequested:
            message = _stopped(args, transactional, at_once=False)
        except KeyboardInterrupt:
            message = _stopped(args, transactional, at_once=True)
        else:
            late = " (Ctrl-C came after the last batch)" if watch.stop_requested else ""
            watch.say(f"done: {', '.join(args.tables)}{late}")
            return 0
    print(f"sqla-ids migrate run: {message}", file=sys.stderr)
    return 130


def _next(step: str) -> str:
    from sqla_ids.migration.core.phases import Reached, Recorded

    phase = Recorded.decode(step).phase
    return {
        Reached.DONE: "migrated; undo restores the old keys",
        Reached.ONLINE_PLANNED: "online: run --online continues with the expand",
        Reached.EXPANDED: "online: run --online continues the backfill",
        Reached.BACKFILLED: "online: run --online continues with the prepare",
        Reached.PREPARED: "online: next --phase swap (or undo)",
        Reached.SWAPPED: "online: next --phase contract, once no rollback is wanted (or undo)",
        Reached.UNSWAPPING: "online: an undo was stopped half-way; undo again to finish it",
    }.get(phase, "unfinished: run again to continue it")


def _status(args: argparse.Namespace) -> int:
    import sqlalchemy as sa

    from sqla_ids.migration.core import state
    from sqla_ids.migration.core.phases import Reached

    with _connected(args.url) as connection:
        steps = state.steps(connection)
        tables = args.tables or sorted(steps)
        if not tables:
            print("no key migration recorded")
        for table in tables:
            if table not in steps:
                print(f"{table}: no migration recorded")
                continue
            line = f"{table}: {steps[table]} -- {_next(steps[table])}"
            recorded = state.load(connection, table)
            if recorded is not None and recorded[0].phase is Reached.EXPANDED:
                plan = recorded[1]
                column: sa.ColumnClause[Any] = sa.column(plan.temp_column(plan.table, plan.column))
                done = connection.execute(
                    sa.select(sa.func.count())
                    .select_from(sa.table(plan.table, column))
                    .where(column.is_not(None))
                ).scalar_one()
                line += f" (backfill: {done:,} of {plan.row_count:,} keys at the start)"
            print(line)
        connection.rollback()
    return 0


def _undo(args: argparse.Namespace) -> int:
    from sqla_ids.migration import restore_pk_from_uuid7

    with _connected(args.url) as connection:
        for table in reversed(args.tables):
            restore_pk_from_uuid7(connection, table)
            connection.commit()
            print(f"{table}: old keys restored")
    return 0


_HANDLERS = {"plan": _plan, "run": _run, "status": _status, "undo": _undo}
