"""docs/index.md's installation holds: sqla_ids is not on PyPI, so it is
installed from a checkout or from a wheel built there.

The wheel is built from this checkout and installed, with an extra, into a
fresh virtual environment (no access to this checkout); there the command
line runs the demo, writes an Alembic environment from the templates the
wheel carries, and uses the extra (a QR code needs ``segno``).
"""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from sqla_ids.order_numbers import OrderNumberCodec, register_key

ROOT = Path(__file__).resolve().parent.parent


def _run(*command: str | Path, cwd: Path) -> str:
    result = subprocess.run(
        [str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result.stdout


@pytest.mark.slow
def test_the_wheel_installs_into_a_fresh_environment_and_works(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, ROOT, cwd=tmp_path)
    (wheel,) = dist.glob("sqla_ids-*-py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "sqla_ids/py.typed" in names
    assert any(name.startswith("sqla_ids/_migrations_templates/") for name in names)
    assert not any(name.startswith(("tests/", "docs/", "benchmarks/")) for name in names)

    env = tmp_path / "env"
    venv.create(env, with_pip=True)
    python, command = env / "bin" / "python", env / "bin" / "sqla-ids"
    _run(python, "-m", "pip", "install", "-q", f"{wheel}[qr]", cwd=tmp_path)
    where = _run(python, "-c", "import sqla_ids; print(sqla_ids.__file__)", cwd=tmp_path)
    assert where.startswith(str(env)), where  # the installed copy, not this checkout

    work = tmp_path / "work"
    work.mkdir()
    tour = _run(command, "demo", "--customers", "3", "--orders", "12", cwd=work)
    assert "relationships kept" in tour and "matches" in tour
    _run(command, "alembic", "init", "migrations", cwd=work)
    assert (work / "migrations" / "env.py").is_file() and (work / "alembic.ini").is_file()
    register_key("install_test", "2DE79D232DF5585D68CE47882AE256D6", "CBD09280979564")
    number = OrderNumberCodec("install_test").encode(1)
    svg = _run(command, "order-number", "qr", number, cwd=work)  # the qr extra: segno
    assert "<svg" in svg


# What an install without extras lacks: each library only an extra brings.
_EXTRAS_ONLY = (
    "greenlet", "aiosqlite", "asyncpg", "psycopg", "pymysql", "mysql", "MySQLdb",
    "segno", "pydantic", "sqlmodel", "flask_sqlalchemy", "litestar", "advanced_alchemy",
    "uuid6", "uuid_utils",
)  # fmt: skip
_INTEGRATIONS = "sqla_ids.integrations"  # each names the extra it needs when imported


def test_every_module_imports_without_the_extras() -> None:
    """A module importing an extra's library at the top breaks ``import sqla_ids``
    for everyone without that extra (``sqlalchemy.ext.asyncio`` needs greenlet):
    each module is imported in a fresh interpreter that cannot find them."""
    code = f"""
import importlib, pkgutil, sys
for name in {_EXTRAS_ONLY!r}:
    sys.modules[name] = None  # ImportError on import
import sqla_ids
failed = []
for info in pkgutil.walk_packages(sqla_ids.__path__, "sqla_ids."):
    if info.name.startswith({_INTEGRATIONS!r}) or info.name.endswith(".__main__"):
        continue
    try:
        importlib.import_module(info.name)
    except ImportError as error:
        failed.append(f"{{info.name}}: {{error}}")
print("\\n".join(failed))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == ""
