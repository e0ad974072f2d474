"""Opt-in UUIDv7 generators from elsewhere: CPython 3.14's ``uuid.uuid7()``, ``uuid_utils``.

sqla_ids' own generator (:func:`sqla_ids.identifiers.uuid7`) stays the
default everywhere. An application that prefers the standard library's
function (Python 3.14+) or the Rust-backed ``uuid_utils`` package picks it
here; each backend is a zero-argument callable returning a plain
``uuid.UUID``, so it goes wherever a column default does::

    from sqla_ids.identifiers.backends import uuid7_backend

    id: Mapped[uuid.UUID] = mapped_column(
        UUIDv7, primary_key=True, default=uuid7_backend("stdlib")
    )

How they differ from ours (docs/uuid7.md, "Other generators"): both use
CPython 3.14's layout (:data:`~sqla_ids.identifiers.Layout.CPYTHON_314`: a
42-bit counter and 32 random bits per UUID, against our 18-bit counter and
56 random bits) and have no timestamp shift, injectable clock or batch
function. The standard library's function moves its timestamp one
millisecond ahead per call while the clock is behind the last one (ours
keeps the timestamp and counts on), keeps its state in module globals
without a lock, and its per-millisecond values are not re-seeded in a forked
child (ours are). All are valid UUIDv7, strictly increasing within one thread.

>>> from sqla_ids.identifiers.backends import BACKENDS, uuid7_backend
>>> BACKENDS
('sqla_ids', 'stdlib', 'uuid_utils')
>>> make = uuid7_backend("sqla_ids")
>>> first, second = make(), make()
>>> first.version, first < second
(7, True)
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from typing import Literal, cast

from sqla_ids.errors import SqlaIdsError

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendUnavailableError",
    "stdlib_uuid7",
    "uuid7_backend",
    "uuid_utils_uuid7",
]

Backend = Literal["sqla_ids", "stdlib", "uuid_utils"]
"""Name of a UUIDv7 generator: ours, the standard library's (3.14+), ``uuid_utils``'s."""
BACKENDS: tuple[Backend, ...] = ("sqla_ids", "stdlib", "uuid_utils")
"""Every name :func:`uuid7_backend` takes, ours (the default) first."""


class BackendUnavailableError(SqlaIdsError, LookupError):
    """The UUIDv7 generator asked for is not available in this Python environment."""


def _stdlib() -> Callable[[], uuid.UUID]:
    function = getattr(uuid, "uuid7", None)
    if function is None:
        version = ".".join(map(str, sys.version_info[:3]))
        raise BackendUnavailableError(
            f"uuid.uuid7() is new in Python 3.14 and this is Python {version}: use "
            '"sqla_ids" (the default) or "uuid_utils" (pip install uuid-utils)'
        )
    return cast(Callable[[], uuid.UUID], function)


def _uuid_utils() -> Callable[[], uuid.UUID]:
    try:
        from uuid_utils import compat
    except ImportError as error:
        raise BackendUnavailableError(
            f'the "uuid_utils" UUIDv7 generator needs the uuid-utils package '
            f"(pip install uuid-utils, or the sqla-ids[bench] extra): {error}"
        ) from None
    # ``compat`` returns standard ``uuid.UUID`` objects (the top-level
    # ``uuid_utils.uuid7`` returns its own UUID type, which drivers do not bind).
    return cast(Callable[[], uuid.UUID], compat.uuid7)


def uuid7_backend(name: Backend | str = "sqla_ids") -> Callable[[], uuid.UUID]:
    """The UUIDv7 generator called ``name``: a callable returning ``uuid.UUID``.

    ``"sqla_ids"``: ours (:func:`sqla_ids.identifiers.uuid7`). ``"stdlib"``:
    ``uuid.uuid7`` itself, on Python 3.14+. ``"uuid_utils"``:
    ``uuid_utils.compat.uuid7``. An unknown name, or one not available
    here, raises :class:`BackendUnavailableError` saying why.
    """
    if name == "sqla_ids":
        from sqla_ids.identifiers.generator import uuid7

        return uuid7
    if name == "stdlib":
        return _stdlib()
    if name == "uuid_utils":
        return _uuid_utils()
    raise BackendUnavailableError(
        f"unknown UUIDv7 generator {name!r}: choose one of {', '.join(BACKENDS)}"
    )


def stdlib_uuid7() -> uuid.UUID:
    """The next ``uuid.uuid7()`` of the standard library (Python 3.14+)."""
    return _stdlib()()


def uuid_utils_uuid7() -> uuid.UUID:
    """The next ``uuid_utils.compat.uuid7()``, as a standard ``uuid.UUID``."""
    return _uuid_utils()()
