"""Where a key migration stands: one recorded-state type, read and written in one place.

The state table keeps each migration's step as text (``online:prepared``,
``swap:3``...), readable by people and compatible with what earlier
versions recorded. :class:`Recorded` is that step as data -- a
:class:`Reached` phase and, for the phases made of numbered statements (MariaDB's
offline swap), how many of them are done -- and :meth:`Recorded.decode` is
the only place that reads the text.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Reached(enum.Enum):
    """A phase a migration has reached (its value is what the state table shows)."""

    # Offline, going up: planned, then (MariaDB/MySQL) the swap statements one by one.
    PLANNED = "planned"
    SWAPPING = "swap"
    DONE = "done"
    # Offline, coming down.
    DOWN = "down"
    DOWN_SWAPPING = "down-swap"
    # Online (PostgreSQL, MariaDB), going up; the contract records DONE.
    ONLINE_PLANNED = "online:planned"
    EXPANDED = "online:expanded"
    BACKFILLED = "online:backfilled"
    PREPARED = "online:prepared"
    SWAPPED = "online:swapped"
    # Online, coming down: the undo of a swap has begun (MariaDB commits each of
    # its statements, so a run stopped half-way is finished, not begun again).
    UNSWAPPING = "online:unswapping"

    @property
    def online(self) -> bool:
        """A phase of the online mode (before its contract)."""
        return self in _ONLINE

    @property
    def downgrading(self) -> bool:
        """A phase of an (offline) undo."""
        return self in (Reached.DOWN, Reached.DOWN_SWAPPING)

    @property
    def numbered(self) -> bool:
        """A phase made of numbered statements, recorded one by one."""
        return self in (Reached.SWAPPING, Reached.DOWN_SWAPPING)


#: The online phases in the order they are reached (DONE last, after the contract).
ONLINE_ORDER: tuple[Reached, ...] = (
    Reached.ONLINE_PLANNED,
    Reached.EXPANDED,
    Reached.BACKFILLED,
    Reached.PREPARED,
    Reached.SWAPPED,
    Reached.DONE,
)
_ONLINE = frozenset(ONLINE_ORDER) - {Reached.DONE} | {Reached.UNSWAPPING}


@dataclass(frozen=True)
class Recorded:
    """A migration's recorded step: its phase and, for numbered phases, the
    statements of it already run (a re-run continues after them)."""

    phase: Reached
    done: int = 0

    def encode(self) -> str:
        """The text the state table keeps (``swap:3``, ``online:prepared``)."""
        return f"{self.phase.value}:{self.done}" if self.phase.numbered else self.phase.value

    @classmethod
    def decode(cls, text: str) -> Recorded:
        """The step the state table's ``text`` records (see :meth:`encode`)."""
        head, _, tail = text.rpartition(":")
        if tail.isdigit():
            phase = Reached(head)
            if not phase.numbered:
                raise ValueError(f"recorded step {text!r}: {head} has no numbered statements")
            return cls(phase, int(tail))
        return cls(Reached(text))

    def after(self, phase: Reached) -> bool:
        """Whether this online step is at or past ``phase`` (both in :data:`ONLINE_ORDER`)."""
        return ONLINE_ORDER.index(self.phase) >= ONLINE_ORDER.index(phase)

    def __str__(self) -> str:
        return self.encode()


class Check(enum.Enum):
    """A check of every row through the mapping (:mod:`sqla_ids.migration.core.verify`)."""

    FORWARD = "the new columns follow the old ones"
    """Before the swap: the new side is complete and right."""
    SWAPPED = "the new columns agree with the old ones"
    """After the swap, before the contract drops the old side: no reference lost."""
    RESTORABLE = "the old columns follow the new ones"
    """Before the swap is undone: the old side is complete and right."""
