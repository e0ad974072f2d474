"""What the key migration needs from a database: :class:`MigrationBackend`.

The engine's own per-database registry, beside SQLAlchemy's dialects as
Alembic keeps ``alembic/ddl/`` (``DefaultImpl.get_by_dialect``): each backend
(``sqla_ids/migration/backends/<database>/``) subclasses
:class:`MigrationBackend` for one :class:`~sqla_ids.dialects.Database` family
and registers itself; :func:`sqla_ids.migration.backends.backend_for` returns
it. The planner (:mod:`sqla_ids.migration.plan`) calls the reflection
methods, the offline runner hands the plan to :attr:`MigrationBackend.strategy`
(the object that changes the columns: in place, by swapping filled columns
in, or by rebuilding tables) and the online runner to
:attr:`MigrationBackend.online`.

The reflection methods are static: each database binds its module's
functions, so the SQL stays next to the comments that explain it.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from sqlalchemy.engine import Connection

from sqla_ids.migration.backends.add_key import KeyAdder
from sqla_ids.migration.core import mapping
from sqla_ids.migration.core.backfill import Walk
from sqla_ids.migration.core.estimate import CostModel
from sqla_ids.migration.core.model import (
    Blockers,
    ColumnDefinition,
    Dependent,
    NewKeyDefault,
    OldKeyDefault,
    ParkedTrigger,
    PkMigrationPlan,
    Reference,
    Routine,
    View,
    Work,
)
from sqla_ids.migration.core.phases import Recorded
from sqla_ids.migration.core.reflected import Inspector
from sqla_ids.migration.core.sizing import ServerFacts, Step, TableSize
from sqla_ids.migration.core.sql import Statement

if TYPE_CHECKING:
    from sqla_ids.dialects import Database

_REGISTRY: dict[type[Database], type[MigrationBackend]] = {}
_REFUSED: dict[type[Database], str] = {}


#: References ``(table, column)`` a strategy proved to have no orphan while it ran
#: (a foreign key the database validated, or the check it ran before adding one):
#: the final check does not scan them again.
Proven = frozenset[tuple[str, str]]


class Strategy(ABC):
    """How the converted values replace the old ones (see the backends' modules).

    ``transactional``: the whole run happens in one transaction, so a failure
    rolls everything back; otherwise each step is durable and recorded.
    """

    transactional: bool = True

    def fill_mapping(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """Create and fill the mapping table, continuing after the rows already
        there (by default the keys are made in Python)."""
        mapping.fill_mapping(connection, plan)

    def prepare(self, connection: Connection) -> None:  # noqa: B027 - optional hook
        """Check or set connection-level settings before the transaction begins
        (nothing by default)."""

    @contextmanager
    def quiet(self, connection: Connection, plan: PkMigrationPlan) -> Iterator[None]:
        """Run the block without firing the application's triggers on the
        migration's writes, each database its way (PostgreSQL disables them,
        MariaDB parks its UPDATE triggers, SQLite drops and replays the migrated
        table's); nothing by default."""
        yield

    @abstractmethod
    def upgrade(self, connection: Connection, plan: PkMigrationPlan, resumed: Recorded) -> Proven:
        """Replace the old key values by the mapped UUIDs in every affected column."""

    @abstractmethod
    def downgrade(self, connection: Connection, plan: PkMigrationPlan, resumed: Recorded) -> Proven:
        """Put the old key values back in every affected column."""


class Mode(enum.Enum):
    """How the online runner runs a :class:`Ddl` task's statements."""

    TRANSACTION = "in one short transaction under lock_timeout, retried"
    """Read, build and run in one transaction, retried as a whole on a lock
    timeout (on MariaDB each DDL statement commits on its own: a retry builds
    from the catalog again and skips what is done)."""
    AUTOCOMMIT = "each statement on its own, outside any transaction"
    """Built in a short transaction, then each statement alone with no lock
    timeout (``CREATE INDEX CONCURRENTLY`` waits for running transactions,
    a wait that blocks nobody)."""
    LOCKED = "with the affected tables locked"
    """Under the backend's table lock (:meth:`OnlineStrategy.lock`), built after
    taking it, retried under it up to :attr:`OnlineStrategy.locked_attempts` times."""


@dataclass(frozen=True)
class Ddl:
    """Statements a backend builds from the catalog just before they run.

    ``build`` reads what it needs and returns only what is still to do, so a
    step killed half-way, or retried, continues; its statements are the exact
    SQL that runs (a dry run prints them).
    """

    what: str
    build: Callable[[Connection], list[Statement]]
    mode: Mode = Mode.TRANSACTION
    hint: str = ""
    """Said after "did not get its locks" when the step gives up on a lock timeout."""


@dataclass(frozen=True)
class Probe:
    """A read in a short transaction: a check that may refuse, or a warning."""

    what: str
    run: Callable[[Connection], None]


@dataclass(frozen=True)
class Backfill:
    """A keyset backfill, driven by :func:`sqla_ids.migration.core.backfill.run_walk`."""

    walk: Walk


Task = Ddl | Probe | Backfill
"""One unit of an online phase, carried out by the online runner in order."""


class OnlineStrategy(ABC):
    """Online migration: the application keeps writing while the key changes.

    Each phase is a list of :data:`Task` the online runner carries out --
    statements built from the catalog when they run, keyset backfills, checks
    -- each resumable from what the database holds: :meth:`expand` (new
    columns kept in sync by triggers), :meth:`backfill`, :meth:`prepare`
    (indexes and foreign keys built without blocking writes), :meth:`swap` (one
    short locked step) and, later and separately, :meth:`contract`; back:
    :meth:`abort` before the swap, :meth:`unprepare` and :meth:`unswap` after.
    The strategy never calls the runner: it says what to run and how.
    """

    serves_versions: bool = False
    """Whether it can serve two versions of the tables (the ``versions`` option)."""

    makes_uuid192: bool = False
    """Whether it migrates keys to UUID192 (``target="uuid192"``) as well as to UUIDv7."""

    locked_attempts: int = 1
    """How often a :attr:`Mode.LOCKED` task is built and run again under the
    lock when one of its statements meets a lock timeout (1: the whole step
    is retried from outside instead, the transaction rolled back)."""

    # --- policy ------------------------------------------------------------------------

    @abstractmethod
    def refusals(self, connection: Connection, plan: PkMigrationPlan) -> list[str]:
        """What the online mode cannot carry over for this plan (empty: it can)."""

    @abstractmethod
    def set_lock_timeout(self, connection: Connection, seconds: float, local: bool) -> None:
        """Make lock waits of this transaction (``local``) or session give up after ``seconds``."""

    def retry_delays(self, attempts: int) -> list[float]:
        """Seconds to sleep before each retry of a step that met a lock timeout
        (``attempts`` from the options): exponential backoff from 0.1 s to 5 s."""
        return [min(0.1 * 2**n, 5.0) for n in range(max(attempts - 1, 0))]

    def release(self, connection: Connection) -> None:  # noqa: B027 - optional hook
        """Undo the session settings :meth:`set_lock_timeout` made, before the
        connection returns to the application's pool (nothing by default)."""

    def vacuum_holding(self, connection: Connection, tables: Sequence[str]) -> list[str]:
        """Which of ``tables`` (or their partitions) the server's own maintenance
        holds a lock on now that it gives up for a lock wait longer than its
        deadlock check (PostgreSQL's autovacuum), quoted: a step that met a lock
        timeout then waits that long once (:meth:`wait_out_vacuum`,
        :meth:`outlast_vacuum`) instead of being retried until the maintenance
        ends. None by default."""
        return []

    def outlast_vacuum(self, connection: Connection, local: bool) -> None:  # noqa: B027
        """Make this transaction's (``local``) or session's lock waits last past the
        server's deadlock check (see :meth:`vacuum_holding`); called after
        :meth:`set_lock_timeout`. Nothing by default."""

    def wait_out_vacuum(self, connection: Connection, quoted: Sequence[str]) -> None:  # noqa: B027
        """At the start of a step's transaction, after :meth:`set_lock_timeout`:
        wait past the server's deadlock check, holding nothing else, for the
        maintenance holding the tables ``quoted`` names (as
        :meth:`vacuum_holding` gives them) to give them up, and keep it off
        them until the transaction ends -- without holding up the
        application's reads and writes. Nothing by default."""

    @abstractmethod
    def is_lock_timeout(self, error: BaseException) -> bool:
        """Whether ``error`` is a lock wait that gave up (the step is retried)."""

    @abstractmethod
    def attached(
        self, connection: Connection, plan: PkMigrationPlan, columns: dict[str, set[str]]
    ) -> set[str]:
        """Every object depending on ``columns`` (table -> column names) but the
        ones the online migration of ``plan`` (or another) made: indexes,
        constraints and foreign keys (to them too), views, triggers, generated
        columns..., each described as the database names it. Compared with
        :attr:`~sqla_ids.migration.core.model.PkMigrationPlan.attached` before
        each online phase: what the application created since is refused."""

    def swap_began(self, connection: Connection, plan: PkMigrationPlan) -> bool:
        """Whether a swap killed half-way left some of its statements done (never,
        where DDL is transactional): an undo finishes it first, then undoes it."""
        return False

    @abstractmethod
    def scope(self, connection: Connection) -> str:
        """Where unqualified names lead on the caller's ``connection`` (PostgreSQL's
        ``search_path``, MariaDB's current database): the migration's own
        connections use the same (:meth:`enter_scope`), whatever their pool's
        default -- a multi-tenant application sets it per connection."""

    @abstractmethod
    def enter_scope(self, connection: Connection, scope: str) -> None:
        """Make ``connection`` resolve names as the caller's did (session-wide)."""

    @abstractmethod
    def leave_scope(self, connection: Connection) -> None:
        """Undo :meth:`enter_scope` before the connection returns to the pool."""

    @abstractmethod
    def try_lock(self, connection: Connection, name: str) -> bool:
        """Take the session-level lock ``name`` without waiting (``False``: held
        elsewhere): one run of a table's migration at a time."""

    @abstractmethod
    def unlock_name(self, connection: Connection, name: str) -> None:
        """Release the lock ``name``."""

    @abstractmethod
    def lock(self, connection: Connection, plan: PkMigrationPlan) -> list[Statement]:
        """Statements taking the affected tables' lock for a :attr:`Mode.LOCKED` task."""

    def unlock(self, connection: Connection) -> list[Statement]:
        """Statements releasing that lock (none where the transaction's end does)."""
        return []

    # --- phases --------------------------------------------------------------------------

    @abstractmethod
    def expand(self, plan: PkMigrationPlan) -> list[Task]:
        """Mapping table, new columns, sync triggers, server default for new rows."""

    @abstractmethod
    def backfill(self, plan: PkMigrationPlan) -> list[Task]:
        """Give every existing row its new key / new reference, batch by batch."""

    @abstractmethod
    def prepare(self, plan: PkMigrationPlan) -> list[Task]:
        """Unique index, NOT NULL checks, foreign keys and indexes on the new columns."""

    @abstractmethod
    def swap(self, plan: PkMigrationPlan) -> list[Task]:
        """Put the new columns in place of the old ones (tables locked briefly)."""

    @abstractmethod
    def contract(self, plan: PkMigrationPlan) -> list[Task]:
        """Drop what only served the transition: triggers, old child columns."""

    @abstractmethod
    def abort(self, plan: PkMigrationPlan) -> list[Task]:
        """Undo :meth:`expand` and :meth:`prepare` before the swap (the table as it was)."""

    @abstractmethod
    def unprepare(self, plan: PkMigrationPlan) -> list[Task]:
        """After the swap, before :meth:`contract`: indexes and foreign keys back on the
        old columns (kept in step by the triggers), without blocking writes."""

    @abstractmethod
    def unswap(self, plan: PkMigrationPlan) -> list[Task]:
        """Undo :meth:`swap` (after :meth:`unprepare`)."""


class Reflection(Protocol):
    """What the planner reads from a database (each backend's ``reflect`` module
    implements it: the SQL stays next to the comments that explain it)."""

    # --- reflection ------------------------------------------------------------

    def primary_key(
        self, connection: Connection, inspector: Inspector, table: str
    ) -> tuple[str | None, list[str]]:
        """Name and columns of ``table``'s primary key."""

    def columns(self, connection: Connection, inspector: Inspector, table: str) -> dict[str, Any]:
        """``table``'s columns by name (SQLAlchemy's reflected column dicts)."""

    def foreign_keys(self, connection: Connection, inspector: Inspector) -> list[dict[str, Any]]:
        """Every foreign key of the schema (for the ones that are not to the key)."""

    def find_references(
        self, connection: Connection, inspector: Inspector, table: str, column: str
    ) -> list[Reference]:
        """Declared foreign keys to ``table.column``."""

    def resolve_inheritance(
        self, connection: Connection, table: str, references: list[Reference], blockers: Blockers
    ) -> None:
        """Handle partitions / inherited tables of the affected tables, or block them."""

    def identifier_limit(self, name: str) -> int | None:
        """How far ``name`` is over the database's identifier limit (``None``: fits)."""

    def column_type_sql(self, connection: Connection, table: str, column: str) -> str:
        """The column's type as the database prints it."""

    def find_blockers(
        self,
        connection: Connection,
        inspector: Inspector,
        table: str,
        affected: dict[str, set[str]],
    ) -> list[str]:
        """Objects on the affected columns the migration cannot carry over."""

    def missing_privileges(
        self, connection: Connection, tables: Sequence[str], work: Work
    ) -> list[str]:
        """The privileges ``work`` on ``tables`` (the key's table first) needs and
        the session's user lacks, each a refusal naming it (checked before
        anything changes: DDL that commits step by step would otherwise stop
        half-way)."""

    def find_views(
        self,
        connection: Connection,
        inspector: Inspector,
        affected: dict[str, set[str]],
        blockers: Blockers | None = None,
        *,
        refresh_populated: bool = False,
    ) -> list[View]:
        """Views that use the affected columns (dropped and recreated around the change).
        ``refresh_populated``: a populated materialized view is recreated and
        refreshed (the online swap) rather than added to ``blockers``."""

    def find_routines(self, connection: Connection, affected: dict[str, set[str]]) -> list[Routine]:
        """Functions, procedures and triggers whose body uses the affected columns."""

    def update_triggers(
        self, connection: Connection, affected: dict[str, set[str]]
    ) -> list[ParkedTrigger]:
        """Application triggers firing on ``UPDATE`` of the affected tables that the
        offline mode sets aside while it writes (MariaDB/MySQL, which cannot disable
        one); none where triggers are disabled instead or carried by a rebuild."""

    def find_dependents(
        self,
        connection: Connection,
        inspector: Inspector,
        table: str,
        column: str,
        affected: dict[str, set[str]],
    ) -> list[Dependent]:
        """Indexes and constraints on the affected columns, to rebuild after the change."""

    # --- the plan's database-specific parts ---------------------------------------

    def key_default(self, connection: Connection, plan: PkMigrationPlan) -> OldKeyDefault:
        """How the old key is filled (identity, sequence, auto-increment…), for downgrade."""

    def uuid7_key_default(self, connection: Connection, plan: PkMigrationPlan) -> NewKeyDefault:
        """How the new key will be filled by the server (``sqla_ids_uuid7()``)."""

    def table_sql(self, connection: Connection, plan: PkMigrationPlan) -> dict[str, list[str]]:
        """The affected tables' definitions as the database prints them (for the record)."""

    def comment_sql(self, connection: Connection, plan: PkMigrationPlan) -> list[str]:
        """The comments on the constraints and indexes over the converted columns,
        as the statements that give them back (:attr:`PkMigrationPlan.comment_sql`);
        none where a comment is part of the definition (MariaDB's ``SHOW CREATE
        TABLE`` lines) or there are none (SQLite)."""

    def column_definitions(
        self, connection: Connection, plan: PkMigrationPlan
    ) -> list[ColumnDefinition]:
        """The affected columns' full definitions, to put them back as they were."""

    def preserved_columns(self, connection: Connection, table: str) -> tuple[str, ...]:
        """Columns every UPDATE must leave untouched (``ON UPDATE CURRENT_TIMESTAMP``)."""

    def next_old_key(self, connection: Connection, plan: PkMigrationPlan) -> Any:
        """The old key's next value, numbering rows inserted after the migration on downgrade."""


class RowWrites(Protocol):
    """What a run writing every row of a table needs around its writes, which are
    not application updates (the backend's ``writes`` module)."""

    def quiet(
        self, connection: Connection, table: str, schema: str | None = None
    ) -> AbstractContextManager[tuple[str, ...]]:
        """Keep ``table``'s ``UPDATE`` triggers from firing inside (each database
        its way), back exactly as they were after; yields the columns every
        ``UPDATE`` inside must assign to themselves (MariaDB's ``ON UPDATE
        CURRENT_TIMESTAMP``). Refuses, before any change, what it cannot do."""


class PreflightReads(Protocol):
    """What a dry run reads from a database and the statements it shows (each
    backend's ``preflight`` module; see :mod:`sqla_ids.migration.dry_run`)."""

    def table_sizes(self, connection: Connection, tables: Sequence[str]) -> list[TableSize]:
        """Rows and bytes of each table."""

    def server_facts(self, connection: Connection) -> ServerFacts:
        """Free disk, log settings and what cannot be known from SQL."""

    def cost_model(self, online_mode: bool, server: ServerFacts) -> CostModel | None:
        """The estimate model's coefficients (``None``: no such mode here)."""

    def planned_offline(self, connection: Connection, plan: PkMigrationPlan) -> list[Step]:
        """The offline strategy's statements and data steps, in order, read-only."""

    def planned_locked(
        self, connection: Connection, plan: PkMigrationPlan
    ) -> tuple[list[Step], list[Step]] | None:
        """The online swap's and contract's statements, built over the catalog
        as it will be after the prepare (``None``: no online mode)."""


class MigrationBackend:
    """The key migration on one database: its reflection and its strategies.

    Subclasses name the :class:`~sqla_ids.dialects.Database` they serve in
    :attr:`database` and are registered when their class body runs (MariaDB's
    backend inherits MySQL's, as the databases do);
    :func:`~sqla_ids.migration.backends.backend_for` finds the one for a
    dialect. What a backend can do is a documented class attribute.
    """

    database: ClassVar[type[Database] | None] = None
    """The database family served (registry key); ``None`` for an abstract backend."""
    identifier_quote: ClassVar[str]
    """The character quoting identifiers in this database's SQL text."""
    reflect: ClassVar[Reflection]
    """The planner's reads (the backend's ``reflect`` module)."""
    strategy: ClassVar[Strategy]
    """How this database's columns are changed offline (see :class:`Strategy`)."""
    online: ClassVar[OnlineStrategy | None] = None
    """The online strategy (writers keep going), where the database has one."""
    key_adder: ClassVar[KeyAdder | None] = None
    """How a UUIDv7 primary key is added to a table without one
    (:func:`sqla_ids.migration.add_uuid7_key`), where the database has it."""
    writes: ClassVar[RowWrites]
    """How a run writes every row of a table without it passing for application
    updates (the backend's ``writes`` module)."""
    online_key_adder: ClassVar[KeyAdder | None] = None
    """The same while the application keeps writing (``online=True``), where the
    database has it."""
    preflight: ClassVar[PreflightReads]
    """What a dry run reads and shows (the backend's ``preflight`` module)."""
    transactional_ddl: ClassVar[bool] = True
    """DDL is rolled back with its transaction (PostgreSQL, SQLite): a step that
    fails leaves nothing half done. Otherwise (MariaDB) each statement commits
    on its own, and every step is built to continue from what the catalog
    shows after a kill."""
    view_dependencies: ClassVar[bool] = False
    """The catalog records which views use a view (PostgreSQL): the planner
    finds the views built on the affected views too, and they are dropped and
    recreated with the rest. Otherwise (MariaDB, SQLite) a view resolves the
    views it uses when it is queried, and only the views naming the affected
    tables are rebuilt."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("database") is not None:
            _REGISTRY[cls.__dict__["database"]] = cls

    def __repr__(self) -> str:
        return f"<sqla_ids migration backend {type(self).__name__}>"


def registered() -> dict[type[Database], type[MigrationBackend]]:
    """Database class -> backend class, for every registered backend."""
    return dict(_REGISTRY)


def refuse_database(database: type[Database], why: str) -> None:
    """Record that ``database`` (not its subclasses) has no backend, and why:
    :func:`~sqla_ids.migration.backends.backend_for` refuses it with that reason."""
    _REFUSED[database] = why


def refusal(database: type[Database]) -> str | None:
    """Why ``database`` has no backend, if it was refused by name."""
    return _REFUSED.get(database)
