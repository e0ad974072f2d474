"""Tools for people working with UUID-keyed databases (SPEC §5).

* :mod:`~sqla_ids.tools.find` -- find one UUID value anywhere in a database;
* :mod:`~sqla_ids.tools.relations` -- infer primary/foreign keys among UUID
  columns from the data and draw an ER diagram;
* :mod:`~sqla_ids.tools.identicon` -- a deterministic SVG picture of a UUID;
* :mod:`~sqla_ids.tools.server` -- a small HTTP API for batch generation.

Modules are imported on demand; only ``find`` and ``relations`` need SQLAlchemy.
"""
