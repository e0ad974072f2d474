"""Public sample databases for the migration tests (a test helper).

``tests/data/`` holds, with their licences: Chinook (MIT, schema and data for
the three databases), MySQL's employees sample (CC BY-SA 3.0: its schema -- link
tables keyed by both references, a text key, a view over a view -- ported to
PostgreSQL, two of its dumps; the other rows generated here by
:func:`populate_employees`) and Sakila (BSD 2-Clause, jOOQ's ports of the MySQL
sample: schema only -- triggers, views, stored routines, rules, inheritance
partitions, ``ON UPDATE CURRENT_TIMESTAMP``), and pagila (MIT, PostgreSQL's
Sakila: ``payment`` partitioned by month, each partition with foreign keys of
its own). Sakila's and pagila's rows are generated here from the reflected
schema (a few per table, every foreign key pointing at an existing row), so
every relationship is populated: :func:`fill`.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

DATA = Path(__file__).resolve().parent / "data"

CHINOOK_FILES = {
    "sqlite": "Chinook_Sqlite_AutoIncrementPKs.sql",
    "postgresql": "Chinook_PostgreSql_SerialPKs.sql",
    "mariadb": "Chinook_MySql_AutoIncrementPKs.sql",
}
SAKILA_FILES = {
    "sqlite": "sqlite-sakila-schema.sql",
    "postgresql": "postgres-sakila-schema.sql",
    "mariadb": "mysql-sakila-schema.sql",
}


def _mysql_statements(text: str) -> list[str]:
    """Statements of a MySQL script, honouring ``DELIMITER`` changes."""
    statements, current, delimiter = [], [], ";"
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.upper().startswith("DELIMITER "):
            delimiter = stripped.split()[1]
            continue
        if not current and (not stripped or stripped.startswith("--")):
            continue
        current.append(line)
        if stripped.endswith(delimiter):
            statement = "\n".join(current).strip()
            statements.append(statement[: -len(delimiter)].strip())
            current = []
    return [s for s in statements if s]


def _chinook_body(path: Path, marker: str) -> str:
    text = path.read_text(encoding="utf-8")
    return text[text.index(marker) :].split("\n", 1)[1]


def load_sqlite(file: Path, script: str) -> None:
    """Run a whole script into the SQLite database ``file``."""
    raw = sqlite3.connect(file)
    raw.executescript(script)
    raw.close()


EMPLOYEES_FILES = {
    "postgresql": "employees-postgresql.sql",
    "mariadb": "employees.sql",
    "sqlite": "employees-postgresql.sql",  # with two edits: see script()
}
EMPLOYEES_DUMPS = ("load_departments.dump",)
"""Loaded with the schema; ``load_dept_manager.dump`` by :func:`populate_employees`
(after the employees it names)."""


PAGILA_LEFT_OUT = ("Name: public; Type: SCHEMA", "Name: SCHEMA public")
"""pg_dump sections of ``pagila-schema.sql`` not loaded: the ``public`` schema's
owner and grants (the dataset goes to a scratch schema)."""


AS_TOLD: dict[tuple[str, str], dict[str, Any]] = {
    ("pagila", "staff"): {"extra_references": (("store", "manager_staff_id"),)}
}
"""What a refusal told to pass, passed: pagila's ``store.manager_staff_id`` refers
to ``staff`` with no foreign key (a view compares the two), so migrating
``staff`` is refused until the column is named."""


def _pagila() -> str:
    """pagila's schema (PostgreSQL only), in the connection's schema."""
    text = (DATA / "pagila" / "pagila-schema.sql").read_text(encoding="utf-8")
    # pg_dump writes one section per object, each headed "--\n-- Name: ...".
    sections = re.split(r"(?m)^(?=--\n-- Name: )", text)
    kept = [s for s in sections if not any(part in s.split("\n", 3)[1] for part in PAGILA_LEFT_OUT)]
    body = "".join(kept).replace("SELECT pg_catalog.set_config('search_path', '', false);", "")
    return body.replace("public.", "")


def script(dataset: str, dialect: str) -> str:
    """The dataset's script for ``dialect``, made to run in a scratch schema/database."""
    if dataset == "pagila":
        assert dialect == "postgresql", "pagila is PostgreSQL's"
        return _pagila()
    if dataset == "employees":
        text = (DATA / "employees" / EMPLOYEES_FILES[dialect]).read_text(encoding="utf-8")
        dumps = [(DATA / "employees" / d).read_text(encoding="utf-8") for d in EMPLOYEES_DUMPS]
        if dialect == "postgresql":
            dumps = [d.replace("`", "") for d in dumps]
        if dialect == "sqlite":
            # The PostgreSQL port, but for what SQLite does not take: a DROP
            # TABLE of several tables (nothing to drop here) and CREATE OR
            # REPLACE VIEW.
            text = re.sub(r"^DROP TABLE IF EXISTS .*?;", "", text, flags=re.S | re.M)
            text = text.replace("CREATE OR REPLACE VIEW", "CREATE VIEW")
        return "\n".join([text, *dumps])
    if dataset == "chinook":
        path = DATA / "chinook" / CHINOOK_FILES[dialect]
        if dialect == "postgresql":
            return _chinook_body(path, "\\c chinook_serial;")
        if dialect == "mariadb":
            return _chinook_body(path, "USE `Chinook_AutoIncrement`;")
        return path.read_text(encoding="utf-8")
    text = (DATA / "sakila" / SAKILA_FILES[dialect]).read_text(encoding="utf-8")
    if dialect == "postgresql":
        # Objects go to the scratch schema: no search_path change, no "public.".
        skip = ("SET search_path", "CREATE OR REPLACE PROCEDURAL LANGUAGE", "ALTER PROCEDURAL")
        lines = [ln for ln in text.splitlines() if not ln.startswith(skip)]
        return "\n".join(lines).replace("public.", "")
    if dialect == "mariadb":
        text = re.sub(r"^(DROP SCHEMA|CREATE SCHEMA|USE) .*$", "", text, flags=re.M)
        return text.replace("sakila.", "")
    return text


def load(conn: Connection, dataset: str, dialect: str) -> None:
    """Create the dataset in the connection's schema/database (not SQLite)."""
    text = script(dataset, dialect)
    if dialect == "postgresql":
        conn.exec_driver_sql(text.replace("%", "%%"))
        return
    if dataset == "employees":
        statements = [s for s in _mysql_statements(text) if not s.startswith("/*!")]
    elif dataset == "chinook":
        body = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        parts = re.split(r";\s*\n(?=\s*(?:INSERT|CREATE|ALTER|$))", body)
        statements = [p.strip() for p in parts if p.strip()]
    else:
        statements = _mysql_statements(text)
    for statement in statements:
        conn.exec_driver_sql(statement.replace("%", "%%"))


# -- generated rows --------------------------------------------------------------------

_FIRST = ["Georgi", "Bezalel", "Parto", "Chirstian", "Kyoichi", "Anneke", "Tzvetan", "Saniya"]
_LAST = ["Facello", "Simmel", "Bamford", "Koblick", "Maliniak", "Preusig", "Zielinski", "Kalloufi"]
_TITLES = ["Staff", "Senior Staff", "Engineer", "Senior Engineer", "Technique Leader"]


def populate_employees(conn: Connection, extra: int = 400) -> None:
    """Rows for the employees sample's tables the vendored dumps leave empty:
    every employee the ``dept_manager`` rows name, and ``extra`` more (numbers
    from 10001 as upstream), each in one or two departments (``dept_emp``, the
    later one current), with titles and salaries over time. Deterministic;
    names are unique (the test application finds employees by name)."""
    dump = (DATA / "employees" / "load_dept_manager.dump").read_text(encoding="utf-8")
    if conn.dialect.name == "postgresql":
        dump = dump.replace("`", "")
    managers = [int(k) for k in re.findall(r"^\((\d+),", dump, flags=re.M)]
    departments = sorted(conn.exec_driver_sql("SELECT dept_no FROM departments").scalars())
    numbers = sorted({*managers, *range(10001, 10001 + extra)})
    people, dept_emp, titles, salaries = [], [], [], []
    for i, emp_no in enumerate(numbers):
        hired = datetime(1985 + i % 12, 1 + i % 12, 1 + i % 28).date()
        people.append(
            {
                "emp_no": emp_no,
                "birth_date": datetime(1952 + i % 13, 1 + i % 12, 1 + i % 28).date(),
                "first_name": _FIRST[i % len(_FIRST)],
                "last_name": f"{_LAST[i % len(_LAST)]}{i}",
                "gender": "MF"[i % 2],
                "hire_date": hired,
            }
        )
        moved = hired.replace(year=hired.year + 3)
        end = datetime(9999, 1, 1).date()
        first = departments[i % len(departments)]
        if i % 3 == 0:  # moved to another department three years in
            second = departments[(i + 4) % len(departments)]
            dept_emp += [
                {"emp_no": emp_no, "dept_no": first, "from_date": hired, "to_date": moved},
                {"emp_no": emp_no, "dept_no": second, "from_date": moved, "to_date": end},
            ]
        else:
            dept_emp.append(
                {"emp_no": emp_no, "dept_no": first, "from_date": hired, "to_date": end}
            )
        for t in range(1 + i % 3):
            since = hired.replace(year=hired.year + 4 * t)
            titles.append(
                {"emp_no": emp_no, "title": _TITLES[(i + t) % len(_TITLES)], "from_date": since,
                 "to_date": None if t == i % 3 else since.replace(year=since.year + 4)}
            )  # fmt: skip
        for y in range(2 + i % 3):
            since = hired.replace(year=hired.year + y)
            salaries.append(
                {"emp_no": emp_no, "salary": 40000 + 997 * i % 30000 + 1500 * y,
                 "from_date": since, "to_date": since.replace(year=since.year + 1)}
            )  # fmt: skip
    for table, rows in (
        ("employees", people),
        ("dept_emp", dept_emp),
        ("titles", titles),
        ("salaries", salaries),
    ):
        columns = list(rows[0])
        conn.execute(
            sa.insert(sa.table(table, *(sa.column(c) for c in columns))),
            rows,
        )
        if table == "employees":
            conn.exec_driver_sql(dump.strip().rstrip(";"))


def fill(conn: Connection, dataset: str) -> None:
    """The rows of a dataset that ships none (or not all), generated."""
    if dataset == "employees":
        populate_employees(conn)
        return
    if dataset in ("sakila", "pagila"):
        populate(conn)
    if dataset == "pagila":
        populate_pagila(conn)
    elif dataset == "sakila" and conn.dialect.name == "postgresql":
        # The port's payments live in the month's child table (payment_p2007_01
        # ... INHERITS payment), where its rules put each INSERT into payment:
        # populate()'s dates (2005) fit none, so those stay in payment itself.
        # Numbered after those (populate() gives keys itself): the tree's keys
        # are one set, as the port's sequence keeps them.
        conn.exec_driver_sql(
            "SELECT setval('payment_payment_id_seq', (SELECT max(payment_id) FROM payment))"
        )
        conn.exec_driver_sql(
            "INSERT INTO payment (customer_id, staff_id, rental_id, amount, payment_date)"
            " SELECT 1 + mod(g, 12), 1 + mod(g * 7, 12), 1 + mod(g * 5, 12), mod(g, 9) + 0.99,"
            " timestamp '2007-01-01 10:00' + g * interval '2 days' FROM generate_series(1, 84) g"
        )
        # The month the application writes in (2031-01), added as the port's
        # own months are: a child with its CHECK, index, foreign keys and rule.
        for sql in (
            "CREATE TABLE payment_p2031_01 (CONSTRAINT payment_p2031_01_payment_date_check"
            " CHECK (payment_date >= '2031-01-01' AND payment_date < '2031-02-01'))"
            " INHERITS (payment)",
            "CREATE INDEX idx_fk_payment_p2031_01_customer_id ON payment_p2031_01 (customer_id)",
            "ALTER TABLE payment_p2031_01 ADD CONSTRAINT payment_p2031_01_customer_id_fkey"
            " FOREIGN KEY (customer_id) REFERENCES customer (customer_id)",
            "ALTER TABLE payment_p2031_01 ADD CONSTRAINT payment_p2031_01_rental_id_fkey"
            " FOREIGN KEY (rental_id) REFERENCES rental (rental_id)",
            "ALTER TABLE payment_p2031_01 ADD CONSTRAINT payment_p2031_01_staff_id_fkey"
            " FOREIGN KEY (staff_id) REFERENCES staff (staff_id)",
            "CREATE RULE payment_insert_p2031_01 AS ON INSERT TO payment WHERE"
            " (new.payment_date >= '2031-01-01' AND new.payment_date < '2031-02-01')"
            " DO INSTEAD INSERT INTO payment_p2031_01 (payment_id, customer_id, staff_id,"
            " rental_id, amount, payment_date) VALUES (DEFAULT, new.customer_id, new.staff_id,"
            " new.rental_id, new.amount, new.payment_date)",
        ):
            conn.exec_driver_sql(sql)


def populate_pagila(conn: Connection, payments: int = 84) -> None:
    """pagila's payments (after :func:`populate`, whose dates fit none of its
    partitions), spread over its 2022 partitions (January to June declare
    foreign keys of their own, July none); and the partition of the month the
    application writes in (2031-01), added ahead as pagila's pg_partman
    setup adds them."""
    conn.exec_driver_sql(
        "INSERT INTO payment (customer_id, staff_id, rental_id, amount, payment_date)"
        " SELECT 1 + mod(g, 12), 1 + mod(g * 7, 12), 1 + mod(g * 5, 12), mod(g, 9) + 0.99,"
        " timestamptz '2022-01-01 10:00+00' + g * interval '2 days 10 hours'"
        f" FROM generate_series(1, {int(payments)}) g"
    )
    conn.exec_driver_sql(
        "CREATE TABLE payment_p2031_01 PARTITION OF payment"
        " FOR VALUES FROM ('2031-01-01 00:00:00+00') TO ('2031-02-01 00:00:00+00')"
    )


def _value(column: dict[str, Any], i: int, n: int) -> Any:
    type_ = column["type"]
    name = column["name"]
    if isinstance(type_, sa.Enum) and type_.enums:
        return type_.enums[i % len(type_.enums)]
    kind = type(type_).__name__.upper()
    if kind == "SET":
        return str(getattr(type_, "values", ["Trailers"])[0])
    if kind in ("YEAR", "DOMAIN"):
        return 2000 + i
    if kind == "TSVECTOR":
        return f"word{i}"
    if kind == "ARRAY":
        return ["Trailers"]
    if isinstance(type_, sa.Boolean):
        return bool(i % 2)
    if isinstance(type_, sa.Integer):
        return i
    if isinstance(type_, sa.Numeric | sa.Float):
        return i + 0.25
    if isinstance(type_, sa.DateTime | sa.Date):
        return datetime(2005, 5, 1 + i % 28, i % 24, i % 60, i % 60)
    if isinstance(type_, sa.LargeBinary):
        return bytes([i % 256]) * 4
    if isinstance(type_, sa.String):
        if column["nullable"]:
            return None  # free text may be CHECKed against a vocabulary (Sakila's rating)
        length = getattr(type_, "length", None) or 40
        return f"{name[:4]}{i}"[:length]
    if "GEOMETRY" in kind or "POINT" in kind:
        return sa.func.ST_GeomFromText(f"POINT({i} {i})")
    return None


def populate(conn: Connection, rows_per_table: int = 12) -> None:
    """``rows_per_table`` rows in every empty table, keys 1..n, every foreign key
    pointing at an existing row (checks are off while loading: Sakila's store and
    staff refer to each other)."""
    name = conn.dialect.name
    if name == "postgresql":
        conn.exec_driver_sql("SET session_replication_role = replica")
    elif name == "mysql":
        conn.exec_driver_sql("SET FOREIGN_KEY_CHECKS = 0")
    metadata = sa.MetaData()
    metadata.reflect(conn, views=False)
    inspector = sa.inspect(conn)
    n = rows_per_table
    # Sakila's film_text is filled by film's INSERT trigger: it goes last.
    ordered = sorted(metadata.sorted_tables, key=lambda t: t.name == "film_text")
    skipped = []
    for table in ordered:
        if conn.execute(sa.select(sa.func.count()).select_from(table)).scalar():
            continue  # filled by a trigger
        fks = {}
        for fk in inspector.get_foreign_keys(table.name):
            for c in fk["constrained_columns"]:
                fks[c] = fk
        columns = inspector.get_columns(table.name)
        rows = []
        for i in range(1, n + 1):
            row = {}
            for offset, column in enumerate(columns):
                if column["name"] in fks:
                    row[column["name"]] = (i + offset) % n + 1 if offset else i
                elif column.get("computed") is None:
                    row[column["name"]] = _value(column, i, n)
            rows.append(row)
        try:
            with conn.begin_nested():
                conn.execute(sa.insert(table).values(rows))
        except sa.exc.IntegrityError:
            # A CHECK generated rows cannot meet (Sakila's monthly payment
            # partitions): the table stays empty, the migration still sees it.
            skipped.append(table.name)
    if name == "postgresql":
        conn.exec_driver_sql("SET session_replication_role = DEFAULT")
    elif name == "mysql":
        conn.exec_driver_sql("SET FOREIGN_KEY_CHECKS = 1")


def single_column_keys(conn: Connection) -> list[str]:
    """Tables with a single-column integer or text primary key, parents first."""
    metadata = sa.MetaData()
    metadata.reflect(conn, views=False)
    result = []
    for table in metadata.sorted_tables:
        if table.name.endswith("_uuid7_map"):
            continue
        pk = list(table.primary_key.columns)
        if len(pk) == 1 and isinstance(pk[0].type, sa.Integer | sa.String):
            result.append(table.name)
    return result


def routine_names(conn: Connection) -> list[str]:
    """Names of the stored functions, procedures and triggers (to acknowledge)."""
    name = conn.dialect.name
    if name == "postgresql":
        sql = (
            "SELECT proname FROM pg_proc"
            " WHERE pronamespace = quote_ident(current_schema())::regnamespace"
        )
    elif name == "mysql":
        sql = (
            "SELECT ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()"
            " UNION SELECT TRIGGER_NAME FROM information_schema.TRIGGERS"
            " WHERE TRIGGER_SCHEMA = DATABASE()"
        )
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'trigger'"
    return sorted(set(conn.exec_driver_sql(sql).scalars()))
