"""sqla_ids: UUIDv7 keys, FF3-1 order numbers and key migrations for SQLAlchemy.

The pure identifier API (``uuid7``, ``UUIDv7Generator``, encodings, bounds…)
is importable without SQLAlchemy being loaded; the SQLAlchemy column types
are loaded on first access (``from sqla_ids import UUIDv7``).
"""

from __future__ import annotations

import importlib
from typing import Any

from sqla_ids.identifiers import *  # noqa: F403 - the pure API is the package's API
from sqla_ids.identifiers import __all__ as _identifier_names

__version__ = "0.1.0"

# Public names that need SQLAlchemy, and the module each one lives in; they
# are imported on first access so ``import sqla_ids`` stays light.
_LAZY: dict[str, str] = {}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sqla_ids' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [*_identifier_names, *_LAZY, "__version__"]
