"""SQLAlchemy column types and defaults built on the pure identifier layer."""
