"""MySQL's employees sample migrated online, with an application writing (issue 29).

A schema of another style than Chinook's and Sakila's (``tests/data/employees``,
CC BY-SA 3.0): every child is a link table keyed by its references
(``dept_emp (emp_no, dept_no)``, ``dept_manager``, ``titles (emp_no, title,
from_date)``, ``salaries (emp_no, from_date)``), ``departments`` has a text
key (``CHAR(4)``), and ``current_dept_emp`` is a view over the view
``dept_emp_latest_date``. Both keys are migrated online, one after the other
(a link table's key spans both), on PostgreSQL and MariaDB, while an
application transfers employees between departments (an update of a key
column of ``dept_emp``), gives raises and promotions, fires employees (cascades
through every link table), and reads each employee's department through the
view over the view and rows back by key. Afterwards every employee's rows,
joined by name to their departments, are what the application wrote; undone
before the contract, the schema is the original's exactly.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import datasets
import pytest
import requirements as requires
import sqlalchemy as sa
from dbsnapshot import schema
from online_app import Unpaced
from sqlalchemy.engine import Connection, Engine

from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7

pytestmark = pytest.mark.slow

ONLINE = PkMigrationOptions(online=True, batch_size=50, batch_time=0, recreate_views=True)
OPEN = date(9999, 1, 1)
"""``to_date`` of a current row, as upstream."""

Person = dict[str, set[tuple[Any, ...]]]


def people(conn: Connection) -> dict[str, Person]:
    """Every employee by last name (unique here): their department rows, titles,
    salaries and manager rows, departments by name -- no key anywhere."""
    found: dict[str, Person] = {}
    for (name,) in conn.exec_driver_sql("SELECT last_name FROM employees").all():
        found[str(name)] = {"dept_emp": set(), "titles": set(), "salaries": set(), "manager": set()}
    queries = {
        "dept_emp": "SELECT e.last_name, d.dept_name, x.from_date, x.to_date FROM dept_emp x"
        " JOIN employees e ON e.emp_no = x.emp_no JOIN departments d ON d.dept_no = x.dept_no",
        "manager": "SELECT e.last_name, d.dept_name, x.from_date, x.to_date FROM dept_manager x"
        " JOIN employees e ON e.emp_no = x.emp_no JOIN departments d ON d.dept_no = x.dept_no",
        "titles": "SELECT e.last_name, x.title, x.from_date, x.to_date FROM titles x"
        " JOIN employees e ON e.emp_no = x.emp_no",
        "salaries": "SELECT e.last_name, x.salary, x.from_date, x.to_date FROM salaries x"
        " JOIN employees e ON e.emp_no = x.emp_no",
    }
    for kind, sql in queries.items():
        for name, *rest in conn.exec_driver_sql(sql).all():
            found[str(name)][kind].add(tuple(rest))
    return found


def current_departments(conn: Connection) -> dict[str, str]:
    """Each employee's department through the view over the view."""
    return {
        str(n): str(d)
        for n, d in conn.exec_driver_sql(
            "SELECT e.last_name, d.dept_name FROM current_dept_emp c"
            " JOIN employees e ON e.emp_no = c.emp_no JOIN departments d ON d.dept_no = c.dept_no"
        ).all()
    }


def orphans(conn: Connection) -> int:
    """Link rows whose employee or department is gone (none: the keys are enforced)."""
    return int(
        conn.exec_driver_sql(
            "SELECT (SELECT count(*) FROM dept_emp x LEFT JOIN employees e ON e.emp_no = x.emp_no"
            " WHERE e.emp_no IS NULL) + (SELECT count(*) FROM salaries x LEFT JOIN employees e"
            " ON e.emp_no = x.emp_no WHERE e.emp_no IS NULL)"
        ).scalar_one()
    )


class HumanResources(Unpaced):
    """The application: each transaction of its own, keys only passed through
    (employees found by name, departments by name), no pause between them."""

    minimum = 60
    caught = (sa.exc.DBAPIError, AssertionError)  # its reads check what they read

    def __init__(self, engine: Engine) -> None:
        super().__init__()
        # Its own pool; on PostgreSQL without server-side prepared statements,
        # which the swap invalidates (docs/migration.md, the deploy sequence).
        prepared = {"prepare_threshold": None} if engine.dialect.name == "postgresql" else {}
        self.engine = sa.create_engine(engine.url, connect_args=prepared)
        self.rng = random.Random(29)
        with engine.connect() as conn:
            self.people = people(conn)
            self.departments = sorted(
                str(d) for d in conn.exec_driver_sql("SELECT dept_name FROM departments").scalars()
            )

    def _saved(self) -> Callable[[], None]:
        kept = {n: {k: set(v) for k, v in p.items()} for n, p in self.people.items()}

        def restore() -> None:
            self.people = kept

        return restore

    def _one(self, n: int) -> None:
        q = sa.text
        name = self.rng.choice(sorted(self.people))
        person = self.people[name]
        employee = "(SELECT emp_no FROM employees WHERE last_name = :l)"
        day = date(2030, 1, 1) + timedelta(days=n)
        with self.engine.begin() as conn:
            action = n % 6
            current = [r for r in person["dept_emp"] if r[2] == OPEN]
            had = {r[0] for r in person["dept_emp"]}
            to = self.rng.choice(self.departments)
            if action == 0 and len(current) == 1 and to not in had:
                # A transfer: the current row's department changes (a key column).
                conn.execute(
                    q(
                        "UPDATE dept_emp SET dept_no = (SELECT dept_no FROM departments"
                        f" WHERE dept_name = :d) WHERE emp_no = {employee} AND to_date = :open"
                    ),
                    {"d": to, "l": name, "open": OPEN},
                )
                person["dept_emp"].remove(current[0])
                person["dept_emp"].add((to, *current[0][1:]))
            elif action == 1:
                salary = 50_000 + n
                conn.execute(
                    q(
                        "INSERT INTO salaries (emp_no, salary, from_date, to_date)"
                        " SELECT emp_no, :s, :f, :t FROM employees WHERE last_name = :l"
                    ),
                    {"s": salary, "f": day, "t": OPEN, "l": name},
                )
                person["salaries"].add((salary, day, OPEN))
            elif action == 2:
                conn.execute(
                    q(
                        "INSERT INTO titles (emp_no, title, from_date, to_date)"
                        f" VALUES ({employee}, 'Manager', :f, NULL)"
                    ),
                    {"f": day, "l": name},
                )
                person["titles"].add(("Manager", day, None))
            elif action == 3 and len(self.people) > 300 and n % 4 == 3:
                conn.execute(q("DELETE FROM employees WHERE last_name = :l"), {"l": name})
                del self.people[name]
            elif action == 4:
                key = conn.execute(q(employee[1:-1]), {"l": name}).scalar_one()
                found = conn.execute(
                    q("SELECT last_name FROM employees WHERE emp_no = :k"), {"k": key}
                ).scalar_one()
                dept = conn.execute(
                    q("SELECT dept_no FROM departments WHERE dept_name = :d"), {"d": to}
                ).scalar_one()
                dept_name = conn.execute(
                    q("SELECT dept_name FROM departments WHERE dept_no = :k"), {"k": dept}
                ).scalar_one()
                if (found, dept_name) != (name, to):
                    raise AssertionError(f"read back by key: {(found, dept_name)} for {name}")
            else:
                wanted = max(person["dept_emp"], key=lambda r: (r[1], r[2]), default=None)
                got = (
                    conn.execute(
                        q(
                            "SELECT d.dept_name FROM current_dept_emp c JOIN departments d"
                            f" ON d.dept_no = c.dept_no WHERE c.emp_no = {employee}"
                        ),
                        {"l": name},
                    )
                    .scalars()
                    .all()
                )
                if wanted is not None and got != [wanted[0]]:
                    raise AssertionError(f"current department of {name}: {got}, not {wanted[0]}")

    def run(self) -> None:
        super().run()
        self.engine.dispose()


@pytest.fixture
def employees(online_private_engine: Engine) -> Engine:
    """The sample, loaded in a schema/database of the test's own."""
    engine = online_private_engine
    if engine.dialect.name == "postgresql":
        # Only the test's own schema on the search_path (see the samples test).
        options = engine.url.query["options"]
        assert isinstance(options, str) and options.endswith(",public"), options
        engine = sa.create_engine(
            engine.url.update_query_dict({"options": options.removesuffix(",public")})
        )
    with engine.begin() as conn:
        datasets.load(conn, "employees", requires.database_name(engine))
        datasets.populate_employees(conn)
    return engine


def _migrate(engine: Engine, table: str, phase: str = "all") -> None:
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, table, ONLINE, phase=phase)  # type: ignore[arg-type]


def _undo(engine: Engine, table: str) -> None:
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, table)
        conn.commit()


@pytest.mark.parametrize("way", ["contract", "undo after the swap"])
def test_employees_online_with_human_resources_writing(employees: Engine, way: str) -> None:
    engine = employees
    with engine.connect() as conn:
        original = schema(conn)
        assert datasets.single_column_keys(conn) == ["departments", "employees"]
    app = HumanResources(engine)
    app.start()
    try:
        # One after the other: each link table's key spans both references.
        for table in ("employees", "departments"):
            if way == "contract":
                _migrate(engine, table)
            else:
                _migrate(engine, table, "swap")
                _undo(engine, table)
    finally:
        app.stop.set()
        app.join()
    assert app.failures == [], app.failures[:5]
    with engine.connect() as conn:
        found, views, lost = people(conn), current_departments(conn), orphans(conn)
        now = schema(conn)
        types = {
            c["name"]: str(c["type"]).lower()
            for t in ("employees", "departments")
            for c in sa.inspect(conn).get_columns(t)
            if c["name"] in ("emp_no", "dept_no")
        }
    assert lost == 0
    assert found == app.people
    assert set(views) == set(found)  # the view over the view still reads every employee
    print(f"\n{engine.dialect.name} {way}: {app.done} transactions, longest {app.longest:.3f} s")
    if way == "contract":
        assert all(t in ("uuid", "char(36)") for t in types.values()), types
    else:
        assert now == original
