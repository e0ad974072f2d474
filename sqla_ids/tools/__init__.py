"""Tools for people working with UUID-keyed databases (SPEC §5).

* :mod:`~sqla_ids.tools.find` -- find one UUID value anywhere in a database;
* :mod:`~sqla_ids.tools.relations` -- infer primary/foreign keys among UUID
  columns from the data and draw an ER diagram;
* :mod:`~sqla_ids.tools.identicon` -- a deterministic SVG picture of a UUID;
* :mod:`~sqla_ids.tools.server` -- a small HTTP API for batch generation;
* :mod:`~sqla_ids.tools.insert_benchmark` -- insert measurements per key kind
  (``benchmarks/insert_keys.py``);
* :mod:`~sqla_ids.tools.layout_benchmark` -- ``sqla-ids bench``: which layout
  keeps the index dense at your rate;
* :mod:`~sqla_ids.tools.report` -- text tables and SVG bar charts for benchmarks.

Modules are imported on demand; ``find``, ``relations`` and
the benchmarks need SQLAlchemy.
"""
