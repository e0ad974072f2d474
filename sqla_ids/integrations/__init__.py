"""Bridges to other libraries, each imported only when asked for.

* :mod:`sqla_ids.integrations.pydantic` -- a validated order-number type for
  pydantic models and FastAPI (needs ``pydantic``; ``pip install
  "sqla-ids[pydantic]"``).

Nothing else in ``sqla_ids`` imports these modules, so their libraries stay
optional.
"""

from __future__ import annotations

__all__: list[str] = []
