"""Issue 32, item 4: a Flask-SQLAlchemy + Flask-Migrate project (tests/projects/flask_shop).

``Migrate(db=db, **AlembicHooks(skip_empty_revisions=True))``: ``flask db
migrate`` writes a revision that imports what it uses (``import sqla_ids``, no
``NameError``), ``flask db upgrade`` creates the tables and the order-number
sequence, the app inserts through the ORM and answers over HTTP, a second
``migrate`` writes nothing (Flask-Migrate's empty-revision guard kept), ``check``
finds nothing and ``downgrade`` removes everything -- on SQLite, PostgreSQL and
MariaDB.
"""

from __future__ import annotations

import logging.config
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from sqla_ids import OrderNumberCodec
from sqla_ids.order_numbers import default_keyring, register_key
from tests.conftest import DIALECTS, _base_url, _mariadb_scratch, _postgresql_scratch


@pytest.fixture
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of this test's own: Flask-Migrate compares every table in it."""
    backend: str = request.param
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'shop.sqlite3'}"
        return
    scratch = _postgresql_scratch if backend == "postgresql" else _mariadb_scratch
    with scratch(_base_url(backend)) as found:
        yield found.render_as_string(hide_password=False)


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # Flask-Migrate's env.py calls logging.config.fileConfig, which would disable
    # every logger of the test run (other tests read sqla_ids' log records).
    monkeypatch.setattr(logging.config, "fileConfig", lambda *args, **kwargs: None)
    register_key("flask_shop", "2DE79D232DF5585D68CE47882AE256D6", "CBD09280979564")
    yield
    default_keyring.forget("flask_shop")


@pytest.mark.parametrize("url", DIALECTS, indirect=True)
def test_flask_migrate_project(url: str, tmp_path: Path) -> None:
    # Imported here, not at the top: Flask and Flask-Migrate (a third of a second)
    # would be imported by every pytest-xdist worker's collection.
    import flask_migrate

    from tests.projects.flask_shop import create_app, db

    app = create_app(url)
    directory = str(tmp_path / "migrations")
    versions = tmp_path / "migrations" / "versions"
    with app.app_context():
        flask_migrate.init(directory=directory)
        flask_migrate.migrate(directory=directory, message="orders")
        (revision,) = versions.glob("*.py")
        text = revision.read_text()
        assert "import sqla_ids\n" in text
        assert "sqla_ids.UUIDv7()" in text
        assert "sqla_ids.FormattedOrderNumber(key='flask_shop', sequence=" in text
        flask_migrate.upgrade(directory=directory)
    client = app.test_client()
    created = [client.post(f"/orders/{item}").get_json() for item in ("tea", "jam")]
    codec = OrderNumberCodec("flask_shop")
    assert [codec.decode(o["number"]) for o in created] == [1, 2]
    typed = created[1]["number"].replace("-", "")  # as a customer types it
    assert client.get(f"/orders/{typed}").get_json() == created[1]
    with app.app_context():
        flask_migrate.migrate(directory=directory, message="nothing")
        assert list(versions.glob("*.py")) == [revision]  # the empty revision is not written
        flask_migrate.check(directory=directory)
        flask_migrate.downgrade(directory=directory, revision="base")
        names = set(sa.inspect(db.engine).get_table_names())
        assert "flask_orders" not in names and "sqla_ids_counters" not in names
        with db.engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE alembic_version")
        db.engine.dispose()
