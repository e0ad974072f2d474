"""SQLite pieces of sqla_ids.

Each feature adds its own section below; keep sections independent.
"""

from __future__ import annotations
