"""Autogenerate rendering of sqla_ids column types.

Pass :func:`render_item` to ``context.configure(render_item=...)`` in
``env.py``: migrations then say ``sqla_ids.UUIDv7()`` and
``sqla_ids.FormattedOrderNumber(key='shop', sequence='orders_number_seq')``
and import ``sqla_ids``. Without it Alembic writes each type's module path
(``sqla_ids.types.order_number.FormattedOrderNumber(...)``), which works too.
sqla_ids' operations render themselves (each module registers its renderer,
typed the same way).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from sqla_ids.types.order_number import FormattedOrderNumber
from sqla_ids.types.server_functions import UUIDv7ServerDefault
from sqla_ids.types.uuid7 import UUIDv7
from sqla_ids.types.uuid192 import UUID192Type

# Our types, by the name they have in the ``sqla_ids`` namespace.
_TYPES: tuple[type[sa.types.TypeEngine[Any]], ...] = (UUIDv7, UUID192Type, FormattedOrderNumber)


#: Added to every revision that uses one of sqla_ids' operations: the revision
#: then registers them itself, so it runs whatever ``env.py`` imports (without
#: it, ``op.migrate_pk_to_uuid7`` is Alembic's bare ``AttributeError``).
OPERATIONS_IMPORT = "import sqla_ids.alembic  # registers sqla_ids' op.* operations"


def import_operations(autogen_context: Any) -> None:
    """Make the rendered revision import :mod:`sqla_ids.alembic` (see
    :data:`OPERATIONS_IMPORT`); every sqla_ids operation's renderer calls it."""
    autogen_context.imports.add(OPERATIONS_IMPORT)


def render_item(type_: str, obj: Any, autogen_context: Any) -> str | bool:
    """Render sqla_ids types as ``sqla_ids.<repr>`` and add ``import sqla_ids``.

    Returns ``False`` for everything else, so Alembic renders it as usual.
    Chain it from your own ``render_item`` if you have one.
    """
    if type_ == "type" and isinstance(obj, _TYPES):
        autogen_context.imports.add("import sqla_ids")
        return f"sqla_ids.{obj!r}"
    if type_ == "server_default" and isinstance(obj, UUIDv7ServerDefault):
        autogen_context.imports.add("import sqla_ids")
        return f"sqla_ids.{obj!r}"
    return False
