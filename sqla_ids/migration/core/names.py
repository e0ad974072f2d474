"""Names and sides shared by every database's online strategy.

The online mode adds objects next to the application's (a column per
affected column, indexes, foreign keys, triggers) under stable names derived
from the migrated table, so a resumed run finds what an earlier one made and
several migrations can coexist. :class:`Sides` says which column plays which
part in the swap and in its undo.
"""

from __future__ import annotations

import re

from sqla_ids.migration.core.model import Dependent, PkMigrationPlan, Reference, name_suffix

__all__ = [
    "Sides",
    "child_old",
    "is_object_name",
    "mentions_object_name",
    "object_name",
    "rebuilt",
    "references",
]


def object_name(plan: PkMigrationPlan, kind: str, n: int) -> str:
    """``sqla_ids_<kind>_<hash>_<n>``: names of the objects the online mode creates
    (at most 30 characters: within every database's identifier limit)."""
    return f"sqla_ids_{kind}_{name_suffix(plan.table)}_{n}"


_OBJECT_NAME = re.compile(r"sqla_ids_[a-z]+_[0-9a-f]{8}_[0-9]+")


def is_object_name(name: str) -> bool:
    """Whether ``name`` is one :func:`object_name` gives: an object of some online
    migration (of this table or another one sharing a child with it)."""
    return _OBJECT_NAME.fullmatch(name) is not None


def mentions_object_name(text: str) -> bool:
    """Whether ``text`` (a database's description of an object) names an object
    of some online migration."""
    return _OBJECT_NAME.search(text) is not None


def references(plan: PkMigrationPlan) -> list[tuple[int, Reference]]:
    """The references and their position among the plan's targets (temp column number)."""
    targets = plan.targets()
    return [(targets.index((r.table, r.column)), r) for r in plan.references if r.via is None]


def rebuilt(plan: PkMigrationPlan) -> list[tuple[int, Dependent]]:
    """The indexes the online mode builds again over the new columns, with their
    position in the plan (their temporary name's number): a child's primary key
    over a reference too (a link table's), not the migrated table's own primary
    key (moved on its own; listed among the dependents when the table
    references itself)."""
    return [
        (number, dep)
        for number, dep in enumerate(plan.dependents)
        if not (dep.table == plan.table and (dep.kind == "primary" or dep.name == plan.pk_name))
    ]


def child_old(plan: PkMigrationPlan, n: int, ref: Reference) -> str:
    """Where a child's old values stay between the swap and the contract.

    Named after the migration, not only the position: a child of two parents
    swapped before either is contracted keeps both parents' old values.
    """
    return f"{ref.column}_old" if plan.keep_child_old_columns else object_name(plan, "old", n)


class Sides:
    """Which columns play which part, upgrading (``up``) or undoing the swap.

    ``new``: the column that takes the original name and role; ``parked``:
    the name the column currently in that role moves to.
    """

    def __init__(self, plan: PkMigrationPlan, up: bool) -> None:
        self.plan, self.up = plan, up
        key_tmp = plan.temp_column(plan.table, plan.column)
        self.key_new = key_tmp if up else plan.old_column
        self.key_parked = plan.old_column if up else key_tmp

    def child_new(self, n: int, ref: Reference) -> str:
        """The child column taking ``ref.column``'s name and role."""
        tmp = self.plan.temp_column(ref.table, ref.column)
        return tmp if self.up else child_old(self.plan, n, ref)

    def child_parked(self, n: int, ref: Reference) -> str:
        """Where the child column now named ``ref.column`` goes."""
        tmp = self.plan.temp_column(ref.table, ref.column)
        return child_old(self.plan, n, ref) if self.up else tmp

    def new_column(self, table: str, column: str) -> str:
        """The column that will replace ``table.column`` (in an index being rebuilt;
        for a partition's own index, ``table`` is its :attr:`Dependent.via`)."""
        if (table, column) == (self.plan.table, self.plan.column):
            return self.key_new
        for n, ref in references(self.plan):
            if (ref.table, ref.column) == (table, column):
                return self.child_new(n, ref)
        return column
