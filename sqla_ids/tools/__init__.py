"""Tools for people working with UUID-keyed databases (docs/tools.md).

* :mod:`~sqla_ids.tools.find` -- find one UUID value anywhere in a database;
* :mod:`~sqla_ids.tools.relations` -- infer primary/foreign keys among UUID
  columns from the data and draw an ER diagram;
* :mod:`~sqla_ids.tools.identicon` -- a deterministic SVG picture of a UUID;
* :mod:`~sqla_ids.tools.server` -- a small HTTP API for batch generation;
* :mod:`~sqla_ids.tools.insert_benchmark` -- insert measurements per key kind
  (``benchmarks/insert_keys.py``);
* :mod:`~sqla_ids.tools.layout_benchmark` -- ``sqla-ids bench``: which layout
  keeps the index dense at your rate;
* :mod:`~sqla_ids.tools.report` -- text tables and SVG bar charts.

The names below are imported on first access (``find``, ``relations``,
``diagram`` and the benchmarks need SQLAlchemy; ``identicon`` and ``server``
do not).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # type checkers see the lazy names' real types
    from sqla_ids.tools.diagram import to_dot, to_mermaid
    from sqla_ids.tools.find import FindReport, find_uuid
    from sqla_ids.tools.identicon import Identicon, identicon_distance, identicon_svg
    from sqla_ids.tools.layout_benchmark import run_layout_benchmark
    from sqla_ids.tools.relations import RelationsReport, infer_relations, related_columns
    from sqla_ids.tools.server import GeneratorAPI, make_server, serve_in_thread

__all__ = [
    "FindReport",
    "GeneratorAPI",
    "Identicon",
    "RelationsReport",
    "find_uuid",
    "identicon_distance",
    "identicon_svg",
    "infer_relations",
    "make_server",
    "related_columns",
    "run_layout_benchmark",
    "serve_in_thread",
    "to_dot",
    "to_mermaid",
]


def __getattr__(name: str) -> Any:
    # PEP 562: a public name imports its module on first access. Keep the
    # TYPE_CHECKING imports above in step (tests/test_public_api.py checks
    # it); no public name may be a submodule's (``identicon()`` stays in
    # sqla_ids.tools.identicon).
    if name in ("to_dot", "to_mermaid"):
        from sqla_ids.tools import diagram

        value = getattr(diagram, name)
    elif name in ("FindReport", "find_uuid"):
        from sqla_ids.tools import find

        value = getattr(find, name)
    elif name in ("Identicon", "identicon_distance", "identicon_svg"):
        from sqla_ids.tools import identicon

        value = getattr(identicon, name)
    elif name == "run_layout_benchmark":
        from sqla_ids.tools import layout_benchmark

        value = getattr(layout_benchmark, name)
    elif name in ("RelationsReport", "infer_relations", "related_columns"):
        from sqla_ids.tools import relations

        value = getattr(relations, name)
    elif name in ("GeneratorAPI", "make_server", "serve_in_thread"):
        from sqla_ids.tools import server

        value = getattr(server, name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
