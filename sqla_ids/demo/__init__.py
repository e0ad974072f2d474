"""The ``sqla-ids demo`` tour: a small shop database migrated to UUIDv7 keys."""
