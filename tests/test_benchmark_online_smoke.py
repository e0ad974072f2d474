"""benchmarks/online_migration.py runs end to end on a tiny size, on PostgreSQL and
MariaDB (no timing assertions): the migration and the online downgrade, each with
the application running, no failed statement and every relationship checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import requirements as requires
from scripts import run_script
from sqlalchemy.engine import URL

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "online_migration.py"


def _run(url: URL, *options: str) -> list[str]:
    """The script's output lines, run ``--quick`` with ``options`` (it must succeed)."""
    base = url.render_as_string(hide_password=False).split("?")[0]  # it makes its own schema
    return run_script(SCRIPT, "--quick", *options, "--url", base, timeout=600).splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("server", requires.online.databases())
def test_online_benchmark_quick(server: str, request: pytest.FixtureRequest) -> None:
    lines = _run(request.getfixturevalue(f"{server}_url"))
    checked = next(line for line in lines if line.startswith("relationships after it"))
    assert checked.count("OK (") == 2, checked  # after the migration and after the downgrade
    failed = next(line for line in lines if line.startswith("failed statements"))
    assert failed.split()[2:] == ["0", "0"], failed


@pytest.mark.slow
@pytest.mark.parametrize("server", requires.online.databases())
def test_online_benchmark_quick_with_two_application_versions(
    server: str, request: pytest.FixtureRequest
) -> None:
    """``--versions``: the online migration without versions and, interleaved, with
    them -- the old code on *before* (MariaDB: the application's database), the
    new code on *after* from the prepare's end; both write, none fails, every
    child of either checked; and the table comparing the two."""
    lines = _run(request.getfixturevalue(f"{server}_url"), "--online-only", "--versions")
    statements = [line for line in lines if line.startswith("application statements")]
    assert len(statements) == 2 and "by the new code" in statements[1], statements
    checked = [line for line in lines if line.startswith("relationships after it")]
    assert [line.count("OK (") for line in checked] == [2, 2], checked
    failed = [line.split()[2:] for line in lines if line.startswith("failed statements")]
    assert failed == [["0", "0"], ["0", "0"]], failed
    assert "Serving two versions against the online migration without them (same run)" in lines
    assert any(line.startswith("migration: longest statement") for line in lines)
    # The lock windows were found (the swap's, and its undo's) in both modes, each
    # with the migration's statement that took longest under them.
    held = [line for line in lines if line.startswith("tables locked (")]
    windows = [int(ms) for line in held for ms in re.findall(r"(\d+) ms \(", line)]
    assert len(held) == 2 and len(windows) == 4 and all(windows), held
    under = [line for line in lines if line.startswith("its longest statement under the lock")]
    assert len(under) == 2 and all(line.count(" ms ") == 2 for line in under), under
