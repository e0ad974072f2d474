"""The data of a key migration: the plan and what it is made of.

Plain dataclasses (JSON-serialisable through :meth:`PkMigrationPlan.to_json`),
shared by the planner (:mod:`sqla_ids.migration.plan`), each database's
migration code (``sqla_ids/dialects/<database>/migration.py``) and the
strategies. This module imports neither: data flows from it, not into it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration.options import PkMigrationOptions

#: Suffix of the column that keeps the old key values (``id`` -> ``id_old``).
DEFAULT_OLD_SUFFIX = "_old"
#: Suffix of the mapping table (``orders`` -> ``orders_uuid7_map``).
MAPPING_SUFFIX = "_uuid7_map"
#: Prefix of the temporary columns that hold converted values before they
#: replace the originals (short and fixed, so no name gets too long).
TEMP_PREFIX = "sqla_ids_tmp_"
#: Comment put on the old-key column, so people (and autogenerate) can tell.
OLD_COLUMN_COMMENT = "sqla_ids: old key values of {table}.{column}, kept by the UUIDv7 migration"


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
    default: dict[str, Any] = field(default_factory=dict)
    table_sql: dict[str, list[str]] = field(default_factory=dict)
    timestamp_column: str | None = None
    seed: str = ""
    batch_size: int = 10_000
    keep_child_old_columns: bool = False
    drop_sequence: bool = False
    server_default: str | None = None
    base_time_ms: int = 0
    new_default: dict[str, Any] = field(default_factory=dict)
    recreate_views: bool = False
    views: list[View] = field(default_factory=list)
    columns: list[ColumnDefinition] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def new_default_sql(self) -> str | None:
        """The ``DEFAULT`` SQL the new key column gets (``None``: no server default)."""
        sql = self.new_default.get("sql", self.server_default)
        return str(sql) if sql else None

    @property
    def migration_options(self) -> PkMigrationOptions:
        """The options the migration was planned with."""
        return PkMigrationOptions.from_dict(self.options)

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
        return f"{TEMP_PREFIX}{self.targets().index((table, column))}"

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
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PkMigrationPlan:
        """Rebuild a plan stored by :meth:`to_json`."""
        data = json.loads(text)
        data["references"] = [Reference(**r) for r in data["references"]]
        data["dependents"] = [Dependent(**d) for d in data["dependents"]]
        data["views"] = [View(**v) for v in data.get("views", [])]
        data["columns"] = [ColumnDefinition(**c) for c in data.get("columns", [])]
        return cls(**data)

    def describe(self) -> str:
        """A human-readable dry run: every object the migration will change."""
        lines = [
            f"migrate {self.table}.{self.column} ({self.key_type_sql}, {self.row_count} rows)"
            f" to UUIDv7 on {self.dialect}",
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
        if self.default:
            lines.append(f"  key default replaced: {self.default.get('kind')}")
        lines.append(f"  new key default: {describe_new_default(self.new_default)}")
        for ref in self.references:
            what = f"FK {ref.constraint}" if ref.constraint else "plain reference (no FK)"
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
            lines.append(f"  drop view {view.name} (depends on {view.depends_on}) and recreate it")
        for warning in self.warnings:
            lines.append(f"  warning: {warning}")
        return "\n".join(lines)


def describe_new_default(new_default: dict[str, Any]) -> str:
    """One line saying how the new key column is filled by the server, if at all."""
    kind = new_default.get("kind")
    if kind == "uuid7_function":
        how = f"DEFAULT {new_default['sql']}"
        if new_default.get("triggers"):
            how += " + BEFORE INSERT trigger " + ", ".join(new_default["triggers"])
        return f"UUIDv7 from {new_default['function']}() ({how})"
    if kind == "expression":
        return f"DEFAULT {new_default['sql']}"
    if kind == "none":
        return f"none ({new_default.get('reason', 'not asked for')})"
    return "none"


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
