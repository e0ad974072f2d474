"""benchmarks/insert_keys.py runs end to end on a tiny size (no timing assertions).

Every method is exercised: Core, ``COPY`` and the ORM (``add_all``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scripts import run_script
from sqlalchemy.engine import URL

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "insert_keys.py"


def test_insert_keys_quick_run(postgresql_url: URL, mariadb_url: URL, tmp_path: Path) -> None:
    # The fixtures only prove the servers are up; the script makes its own scratch schemas.
    base_pg = postgresql_url.set(query={})
    out = run_script(
        SCRIPT,
        "--quick",
        "--methods",
        "core,COPY,orm",
        "--dialects",
        "postgresql,mariadb,sqlite",
        "--postgresql-url",
        base_pg.render_as_string(hide_password=False),
        "--mariadb-url",
        mariadb_url.render_as_string(hide_password=False),
        "--sqlite-url",
        f"sqlite:///{tmp_path / 'bench.sqlite3'}",
        timeout=120,
        cwd=tmp_path,
    )
    for expected in (
        "postgresql: insert 2,000 rows",
        "mariadb: insert 2,000 rows",
        "sqlite: insert 2,000 rows",
        "UUIDv7 sqla_ids (client) [COPY]",
        "UUIDv7 sqla_ids (server fn) [core]",
        "bigint identity [orm]",
        "UUIDv7 sqla_ids (client) [orm]",
        "UUIDv7 sqla_ids (serial server fn) [orm]",
        "R rows sharing each millisecond",
        "2 processes inserting",
    ):
        assert expected in out, out
