"""The warning before a MariaDB online backfill when the InnoDB buffer pool is
small against the tables it rewrites (pure: no server)."""

from __future__ import annotations

from sqla_ids.dialects.mysql.online import pool_advice

MB = 1024 * 1024


def test_a_pool_a_sixth_of_the_tables_gets_advice_with_the_size_to_set() -> None:
    advice = pool_advice(128 * MB, 750 * MB)
    assert advice is not None
    assert "(128 MB) is 17% of the 750 MB" in advice
    assert "innodb_buffer_pool_size (dynamic) to 250 MB or more" in advice


def test_a_pool_of_a_third_or_more_gets_none() -> None:
    assert pool_advice(250 * MB, 750 * MB) is None
    assert pool_advice(256 * MB, 750 * MB) is None
    assert pool_advice(128 * MB, 16 * 1024) is None  # small tables


def test_no_tables_measured_gets_none() -> None:
    assert pool_advice(128 * MB, 0) is None
