"""The data of a key migration: the plan and what it is made of.

Plain dataclasses (JSON-serialisable through :meth:`PkMigrationPlan.to_json`),
shared by the planner (:mod:`sqla_ids.migration.plan`), each database's
migration code (``sqla_ids/dialects/<database>/migration.py``) and the
strategies. This module imports neither: data flows from it, not into it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration.core.options import PkMigrationOptions

#: Suffix of the column that keeps the old key values (``id`` -> ``id_old``).
DEFAULT_OLD_SUFFIX = "_old"
#: Suffix of the mapping table (``orders`` -> ``orders_uuid7_map``).
MAPPING_SUFFIX = "_uuid7_map"
#: Prefix of the temporary columns that hold converted values before they
#: replace the originals (``sqla_ids_tmp_<hash>_<n>``, see :func:`name_suffix`).
TEMP_PREFIX = "sqla_ids_tmp_"
#: Comment put on the old-key column, so people (and autogenerate) can tell.
OLD_COLUMN_COMMENT = "sqla_ids: old key values of {table}.{column}, kept by the UUIDv7 migration"


def name_suffix(table: str) -> str:
    """Short, stable suffix of the names a migration of ``table`` gives the
    columns and objects it adds: migrations of two tables that share a child
    (both prepared, or both swapped, before either is contracted) never
    collide, and a resumed run finds what an earlier one made."""
    return hashlib.sha1(table.encode()).hexdigest()[:8]


@dataclass
class Reference:
    """A column that points at the migrated key (declared FK or a plain column).

    ``via``: on PostgreSQL, the inheritance/partition parent through which the
    column is converted (ALTER on a parent recurses to its children); such a
    reference only has its constraint dropped and recreated.
    """

    table: str
    column: str
    nullable: bool
    type_sql: str
    constraint: str | None = None
    columns: list[str] = field(default_factory=list)
    referred_columns: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    definition: str | None = None
    via: str | None = None


@dataclass
class Dependent:
    """An index or constraint on an affected column, recreated as it was."""

    table: str
    name: str
    kind: str  # "primary", "unique" or "index"
    columns: list[str]
    definition: str | None = None
    via: str | None = None
    """On PostgreSQL, an index of a partition's own: the partitioned table whose
    column it covers (converted through that table: see :attr:`Reference.via`)."""


@dataclass
class View:
    """A view over an affected column, dropped before the change and recreated after.

    ``create_sql`` is the view's own definition as the database reports it
    (``pg_get_viewdef``, ``SHOW CREATE VIEW``, ``sqlite_master.sql``); the
    column names are the same after the swap, so it works on the new keys.
    ``after_sql`` restores what the ``CREATE`` does not carry (PostgreSQL:
    owner, grants, comment).
    """

    name: str
    depends_on: str
    create_sql: str
    drop_sql: str
    after_sql: list[str] = field(default_factory=list)
    label: str = ""
    """The view as messages name it: schema-qualified, quoted where SQL would need
    it (a view of another schema may share a table's name); empty in plans
    stored before it was recorded, and on SQLite (then :attr:`name`)."""
    kind: str = "view"
    """``view`` (materialized or not: :attr:`drop_sql` says which), or ``rule``: on
    PostgreSQL, a table's ``INSERT``/``DELETE`` rule over the columns (Sakila's
    ``payment_insert_p2007_01``), carried over the same way."""

    @property
    def shown(self) -> str:
        """:attr:`label`, or :attr:`name` when there is none."""
        return self.label or self.name


@dataclass
class ParkedTrigger:
    """An application ``UPDATE`` trigger kept from firing on the migration's own
    writes (MariaDB/MySQL cannot disable a trigger, and the migration's ``UPDATE``
    statements are not application updates). Offline it is dropped before the
    first write and created again from its own definition after the last one;
    online it is replaced by itself guarded, firing for every session but the
    migration's, from the expand until the contract or the undo
    (:mod:`sqla_ids.migration.backends.mysql.guards`). Recorded in the plan, so a
    run killed in between puts it back when run again.

    ``create_sql`` is ``SHOW CREATE TRIGGER``'s original statement (definer,
    timing, event, body as written); ``sql_mode`` the mode it was parsed in
    (``ANSI_QUOTES``, ``PIPES_AS_CONCAT``... change its meaning), set again
    around the ``CREATE``. Several triggers of one table are recreated in their
    ``ACTION_ORDER``. ``timing``, ``body`` and ``definer`` (``information_schema``'s
    ``ACTION_TIMING``, ``ACTION_STATEMENT``, ``DEFINER``) build the guarded form.
    """

    name: str
    table: str
    create_sql: str
    sql_mode: str
    timing: str = ""
    body: str = ""
    definer: str = ""


@dataclass
class ColumnDefinition:
    """An affected column exactly as the database prints it, and its position.

    MariaDB/MySQL redefine a column completely on ``CHANGE COLUMN``, so the
    definition (type, nullability, default, comment...) is recorded to put it
    back byte for byte, at the same place (``after``: the preceding column,
    ``None`` for the first).
    """

    table: str
    column: str
    definition: str
    after: str | None
    comment: str = ""


@dataclass(frozen=True)
class Routine:
    """A stored function, procedure or trigger that uses a migrated column."""

    kind: str  # "function", "procedure" or "trigger"
    name: str
    uses: str  # the first migrated column it uses, as ``table.column``
    body: str


@dataclass
class OldKeyDefault:
    """How the old key column was filled, so that a downgrade puts it back exactly."""

    kind: str = "none"
    """``none``; PostgreSQL ``identity``, ``sequence`` (owned, ``nextval``) or
    ``expression``; MariaDB ``auto_increment``; SQLite ``rowid`` or ``autoincrement``."""
    sequence: dict[str, Any] | None = None
    """PostgreSQL: the identity's or owned sequence's schema, name, options and last value."""
    always: bool = False
    """PostgreSQL: the identity is ``GENERATED ALWAYS`` (else ``BY DEFAULT``)."""
    expression: str | None = None
    """PostgreSQL: the column's ``DEFAULT`` expression."""
    counter: int | None = None
    """MariaDB: the table's ``AUTO_INCREMENT``; SQLite: its ``sqlite_sequence`` value."""
    numbered_up_to: int | None = None
    """Set by the downgrade: the highest old key given to rows inserted since the migration."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OldKeyDefault:
        """Read a stored plan's value (plans stored by 0.1 kept a dict with other keys)."""
        data = dict(data)
        counter = data.pop("next", None) or data.pop("seq", None)
        data.pop("last_value", None)  # also in ``sequence``
        if counter is not None:
            data["counter"] = counter
        return cls(**{"kind": "none", **data})


@dataclass
class NewKeyDefault:
    """How the server fills the new key column after the migration, if at all."""

    kind: str = "none"
    """``uuid7_function`` (``sqla_ids_uuid7()``), ``expression`` (the user's
    ``server_default=``) or ``none`` (the application sends keys)."""
    sql: str | None = None
    """The column's ``DEFAULT`` SQL (on MariaDB a placeholder the trigger replaces)."""
    function: str | None = None
    """The server function called, for ``uuid7_function``."""
    trigger_sql: list[str] = field(default_factory=list)
    """MariaDB/MySQL: the ``BEFORE INSERT`` trigger(s) filling the column."""
    triggers: list[str] = field(default_factory=list)
    """Their quoted names (dropped by the downgrade)."""
    reason: str | None = None
    """Why there is none (shown by the dry run)."""

    def describe(self) -> str:
        """One line saying how the new key column is filled by the server, if at all."""
        if self.kind == "uuid7_function":
            how = f"DEFAULT {self.sql}"
            if self.triggers:
                how += " + BEFORE INSERT trigger " + ", ".join(self.triggers)
            return f"UUIDv7 from {self.function}() ({how})"
        if self.kind == "expression":
            return f"DEFAULT {self.sql}"
        return f"none ({self.reason or 'not asked for'})"


@dataclass(frozen=True)
class Work:
    """What a migration will do to the database, as far as its privileges go
    (each backend's ``missing_privileges`` says what that needs)."""

    online: bool
    """Sync triggers on every table, batches through temporary tables."""
    key_trigger: bool
    """A trigger giving the key's table's new rows their key (a server default
    where a stored function cannot be the column's ``DEFAULT``: MariaDB)."""
    mapping: bool = True
    """A mapping table, created and dropped (the key migration; adding a key
    has none)."""
    versions: bool | str = False
    """The ``versions`` option: version schemas or databases to create."""


@dataclass
class PkMigrationPlan:
    """Everything the migration of one primary key will touch, reflected up front."""

    dialect: str
    table: str
    column: str
    pk_name: str | None
    key_kind: str  # "integer" or "string"
    key_type_sql: str
    old_column: str
    mapping_table: str
    row_count: int
    references: list[Reference] = field(default_factory=list)
    dependents: list[Dependent] = field(default_factory=list)
    default: OldKeyDefault = field(default_factory=OldKeyDefault)
    table_sql: dict[str, list[str]] = field(default_factory=dict)
    seed: str = ""
    base_time_ms: int = 0
    new_default: NewKeyDefault = field(default_factory=NewKeyDefault)
    views: list[View] = field(default_factory=list)
    columns: list[ColumnDefinition] = field(default_factory=list)
    options: PkMigrationOptions = field(default_factory=PkMigrationOptions)
    """The options, their one home: the planned ones, with a resumed run's knobs
    (:meth:`PkMigrationOptions.resumed_with`)."""
    warnings: list[str] = field(default_factory=list)
    parked_triggers: list[ParkedTrigger] = field(default_factory=list)
    """MariaDB/MySQL: the application's ``UPDATE`` triggers kept from firing on the
    migration's writes -- dropped meanwhile offline, guarded online
    (:class:`ParkedTrigger`)."""
    comment_sql: list[str] = field(default_factory=list)
    """PostgreSQL: the comments on the constraints and indexes over the converted
    columns, as ``COMMENT ON`` statements run again once they are made anew (a
    foreign key dropped and added back, the online mode's new indexes and
    constraints): a comment is no part of their definitions."""
    attached: list[str] | None = None
    """Online: every object that depended on the converted columns when the plan
    was made, as the database describes it (indexes, constraints, views,
    triggers, generated columns...). One found there later that is not in
    this list was created since, and the next phase refuses it by name rather
    than drop it with an old column. ``None``: a plan stored before this was
    recorded (nothing compared)."""

    @property
    def timestamp_column(self) -> str | None:
        """The column giving the new keys' timestamps, if any."""
        return self.options.timestamp_column

    @property
    def uuid192(self) -> bool:
        """The keys become ``UUID192Type`` values (``target="uuid192"``), not UUIDv7s."""
        return self.options.target == "uuid192"

    @property
    def new_key_bytes(self) -> int | None:
        """Bytes of one new UUID192 key, stored raw: 16, or 24 with its 8-byte
        segment; ``None`` for a UUIDv7 (each database stores those its own way)."""
        options = self.options
        if not self.uuid192:
            return None
        return 16 if options.segment_column is None and options.segment_sql is None else 24

    @property
    def batch_size(self) -> int:
        """Rows per batch (online: the most a batch takes)."""
        return self.options.batch_size

    @property
    def keep_child_old_columns(self) -> bool:
        """Every referencing column keeps its old values in ``<column>_old``."""
        return self.options.keep_child_old_columns

    @property
    def drop_sequence(self) -> bool:
        """The key's sequence is dropped (PostgreSQL ``serial``)."""
        return self.options.drop_sequence

    @property
    def recreate_views(self) -> bool:
        """Views over affected columns are dropped and recreated."""
        return self.options.recreate_views

    @property
    def new_default_sql(self) -> str | None:
        """The ``DEFAULT`` SQL the new key column gets (``None``: no server default)."""
        given = self.options.server_default
        sql = self.new_default.sql or (given if isinstance(given, str) else None)
        return sql or None

    @property
    def affected_tables(self) -> list[str]:
        """The migrated table first, then every referencing table once."""
        tables = [self.table]
        for ref in self.references:
            if ref.table not in tables:
                tables.append(ref.table)
        return tables

    def columns_of(self, table: str) -> list[str]:
        """The affected columns of ``table`` (the key itself and/or references)."""
        cols = [self.column] if table == self.table else []
        return cols + [r.column for r in self.references if r.table == table]

    def targets(self) -> list[tuple[str, str]]:
        """``(table, column)`` of every column whose values are converted, once:
        the key, then each reference not converted through a parent table."""
        result = [(self.table, self.column)]
        for ref in self.references:
            if ref.via is None and (ref.table, ref.column) not in result:
                result.append((ref.table, ref.column))
        return result

    def temp_column(self, table: str, column: str) -> str:
        """The temporary column that receives ``table.column``'s converted values."""
        return f"{TEMP_PREFIX}{name_suffix(self.table)}_{self.targets().index((table, column))}"

    def column_definition(self, table: str, column: str) -> ColumnDefinition | None:
        """The recorded definition of ``table.column`` (MariaDB/MySQL), if any."""
        for definition in self.columns:
            if definition.table == table and definition.column == column:
                return definition
        return None

    def affected_columns(self) -> dict[str, set[str]]:
        """Every column the migration changes or drops, per table (views over them
        must go during the change); includes the old-key columns for the downgrade."""
        affected: dict[str, set[str]] = {self.table: {self.column, self.old_column}}
        for ref in self.references:
            cols = affected.setdefault(ref.table, set())
            cols.add(ref.column)
            if self.keep_child_old_columns:
                cols.add(ref.column + DEFAULT_OLD_SUFFIX)
        return affected

    def to_json(self) -> str:
        """Serialise the plan (stored with the migration's state)."""
        data = asdict(self)
        data["options"] = self.options.to_dict()
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PkMigrationPlan:
        """Rebuild a plan stored by :meth:`to_json` (or by a version that kept
        copies of the options next to them: dropped, the options are the home)."""
        data = json.loads(text)
        for copied in _OPTION_COPIES:
            data.pop(copied, None)
        data["options"] = PkMigrationOptions.from_dict(data.get("options") or {})
        data["references"] = [Reference(**r) for r in data["references"]]
        data["dependents"] = [Dependent(**d) for d in data["dependents"]]
        data["views"] = [View(**v) for v in data.get("views", [])]
        data["columns"] = [ColumnDefinition(**c) for c in data.get("columns", [])]
        data["parked_triggers"] = [ParkedTrigger(**t) for t in data.get("parked_triggers", [])]
        data["default"] = OldKeyDefault.from_dict(data.get("default") or {})
        data["new_default"] = NewKeyDefault(**(data.get("new_default") or {}))
        return cls(**data)

    def _target_words(self) -> str:
        """What the keys become, in the dry run's words."""
        if not self.uuid192:
            return "UUIDv7"
        options = self.options
        if options.segment_column is not None:
            return f"UUID192 (UUIDv7, then the segment from {options.segment_column})"
        if options.segment_sql is not None:
            return f"UUID192 (UUIDv7, then the segment {options.segment_sql})"
        return "UUID192 (UUIDv7, no segment)"

    def describe(self) -> str:
        """A human-readable dry run: every object the migration will change."""
        lines = [
            f"migrate {self.table}.{self.column} ({self.key_type_sql}, {self.row_count} rows)"
            f" to {self._target_words()} on {self.dialect}",
            f"  old keys kept in {self.table}.{self.old_column}"
            f" and mapping table {self.mapping_table} (old -> new)",
            "  new keys ordered like the old ones; timestamps "
            + (
                f"from {self.timestamp_column} (running maximum)"
                if self.timestamp_column
                else "synthesised from key order"
            ),
            f"  batches of {self.batch_size} rows",
        ]
        if self.default.kind != "none":
            lines.append(f"  key default replaced: {self.default.kind}")
        lines.append(f"  new key default: {self.new_default.describe()}")
        roots = {ref.via for ref in self.references}
        for ref in self.references:
            what = (
                f"FK {ref.constraint}"
                if ref.constraint
                else "partitioned table, through which its partitions' FKs are converted"
                if ref.table in roots
                else "plain reference (no FK)"
            )
            via = f", converted through {ref.via}" if ref.via else ""
            lines.append(
                f"  rewrite {ref.table}.{ref.column} ({what}"
                + (f" {ref.definition}" if ref.definition else "")
                + f"{via})"
            )
        for dep in self.dependents:
            lines.append(
                f"  recreate {dep.kind} {dep.name} on {dep.table}({', '.join(dep.columns)})"
            )
        for view in self.views:
            lines.append(f"  drop view {view.shown} (depends on {view.depends_on}) and recreate it")
        for trigger in self.parked_triggers:
            lines.append(
                f"  guard trigger {trigger.name} on {trigger.table} (it fires for every"
                " session but the migration's) until the contract or the undo"
                if self.options.online
                else f"  drop trigger {trigger.name} on {trigger.table} while the migration"
                " writes and recreate it after"
            )
        for warning in self.warnings:
            lines.append(f"  warning: {warning}")
        return "\n".join(lines)


#: Plan fields of earlier versions that copied options (read back, then dropped).
_OPTION_COPIES = (
    "timestamp_column",
    "batch_size",
    "keep_child_old_columns",
    "drop_sequence",
    "server_default",
    "recreate_views",
)


def refuse(message: str, table: str | None = None) -> MigrationRefusedError:
    """The error raised when the plan cannot be carried out safely."""
    where = f" for {table}" if table else ""
    return MigrationRefusedError(f"cannot migrate: {message}; nothing was changed{where}")


class Blockers:
    """Problems found while planning; all of them are reported together."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, problem: str) -> None:
        """Record one problem (once)."""
        if problem not in self.problems:
            self.problems.append(problem)

    def extend(self, problems: list[str]) -> None:
        """Record several problems."""
        for problem in problems:
            self.add(problem)

    def raise_if_any(self, table: str) -> None:
        """Refuse with every recorded problem, numbered, in one message."""
        if len(self.problems) == 1:
            raise refuse(self.problems[0], table)
        if self.problems:
            listed = "; ".join(f"({n}) {p}" for n, p in enumerate(self.problems, start=1))
            raise refuse(f"{len(self.problems)} problems: {listed}", table)
