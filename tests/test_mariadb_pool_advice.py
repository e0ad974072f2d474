"""The warning before a MariaDB online backfill when the InnoDB buffer pool is
small against the tables it rewrites (pure: no server)."""

from __future__ import annotations

from sqla_ids.migration.backends.mysql.online import pool_advice

MB = 1024 * 1024


def test_a_pool_a_twelfth_of_the_tables_gets_advice_with_the_size_to_set() -> None:
    advice = pool_advice(64 * MB, 750 * MB)
    assert advice is not None
    assert "(64 MB) is 9% of the 750 MB" in advice
    assert "innodb_buffer_pool_size (dynamic) to 125 MB or more" in advice
    assert pool_advice(120 * MB, 750 * MB) is not None


def test_a_pool_of_a_sixth_or_more_gets_none() -> None:
    assert pool_advice(125 * MB, 750 * MB) is None
    assert pool_advice(128 * MB, 750 * MB) is None  # Debian's default, measured
    assert pool_advice(128 * MB, 16 * 1024) is None  # small tables


def test_no_tables_measured_gets_none() -> None:
    assert pool_advice(128 * MB, 0) is None
