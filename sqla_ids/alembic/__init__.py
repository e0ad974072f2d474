"""Alembic integration: autogenerate rendering, operations, revision rewriters."""
