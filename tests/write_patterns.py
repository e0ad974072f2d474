"""Application write patterns, run against a table being migrated online.

Each pattern is the kind of statement real application code sends -- ORM-style
insert-then-child, a data-modifying CTE, a child before its parent under a
deferred foreign key, upserts, ``COPY``/``LOAD DATA``, multi-table statements,
cascades, key changes -- and records what it means (which shop each item,
review, note and sub-shop belongs to, by their names). :func:`check` then
compares the database with those meanings, so a pattern passes only if its
statement succeeded *and* every row points where it was written to point.

Before the swap the application uses the old keys; from the swap on, the new
ones (docs/migration.md: code that sends or computes with an old-type key is
switched at the swap). In a rolling deploy (:class:`Deployment`,
:attr:`Matrix.deployments`) each application version keeps its keys all along
-- the old code through *before*, the new code through *after* -- and sends the
same patterns, interleaved with the other's; each then reads every row back in
its own version. The schema (:func:`create_schema`) has a
self-reference, a ``NOT NULL`` child with ``ON DELETE CASCADE`` and ``ON UPDATE
CASCADE`` (``DEFERRABLE`` on PostgreSQL), a nullable ``SET NULL`` child, a child
that gets truncated, and application triggers that must never see the
migration's own writes: a ``BEFORE UPDATE`` trigger stamping ``updated_at`` and
an audit trigger logging every update (pagila-style).

``item`` comes in three layouts (:data:`ITEM_LAYOUTS`): a plain child, a link
table whose primary key starts with the reference (its key is rebuilt and
its key column moved by the patterns), and on PostgreSQL a child
partitioned by hash of its label (its foreign key and index built per
partition).
"""

from __future__ import annotations

import csv
import itertools
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from sqla_ids import uuid7
from sqla_ids.identifiers import UUID192

SEED_SHOPS = 40
SEED_ITEMS = 200


ITEM_LAYOUTS = ("plain", "link table", "partitioned")
"""How ``item`` is keyed: by its ``id``; by ``(shop_id, id)``; by ``(id, label)``,
partitioned by hash of ``label`` in three (PostgreSQL only: InnoDB has no
foreign keys on partitioned tables)."""

_PG_ITEM = {
    "plain": ("id bigserial PRIMARY KEY", ""),
    "link table": ("id bigserial", ", PRIMARY KEY (shop_id, id)"),
    "partitioned": ("id bigserial", ", PRIMARY KEY (id, label)) PARTITION BY HASH (label"),
}
_MARIADB_ITEM = {
    "plain": "id BIGINT AUTO_INCREMENT PRIMARY KEY",
    "link table": "id BIGINT AUTO_INCREMENT, PRIMARY KEY (shop_id, id), KEY item_id (id)",
}


CASES = [
    *((db, "plain") for db in ("postgresql", "mariadb")),
    *((db, "link table") for db in ("postgresql", "mariadb")),
    ("postgresql", "partitioned"),
]
"""``(database, item layout)`` of the pattern tests."""


def layout_shop(request: Any) -> Iterator[Engine]:
    """For a fixture parametrized by :data:`CASES`: a database of the test's own
    with the patterns' shop, ``item`` in the case's layout (MariaDB: ``LOAD DATA
    LOCAL`` allowed)."""
    database, item = request.param
    engine: Engine = request.getfixturevalue(f"{database}_private_engine")
    if database == "mariadb":
        engine = sa.create_engine(engine.url, connect_args={"local_infile": True})
    create_schema(engine, item)
    yield engine
    engine.dispose()


def create_schema(engine: Engine, item: str = "plain") -> None:
    """The shop schema, seeded (see the module docstring); ``item``: its layout."""
    pg = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        if pg:
            key, tail = _PG_ITEM[item]
            for sql in (
                "CREATE TABLE shop (id bigserial PRIMARY KEY, name text NOT NULL UNIQUE,"
                " parent_id bigint REFERENCES shop (id) ON DELETE SET NULL ON UPDATE CASCADE,"
                " n int NOT NULL DEFAULT 0, updated_at timestamptz)",
                f"CREATE TABLE item ({key}, shop_id bigint NOT NULL"
                " REFERENCES shop (id) ON DELETE CASCADE ON UPDATE CASCADE"
                f" DEFERRABLE INITIALLY IMMEDIATE, label text NOT NULL UNIQUE{tail})",
                *(
                    f"CREATE TABLE item_{n} PARTITION OF item"
                    f" FOR VALUES WITH (MODULUS 3, REMAINDER {n})"
                    for n in range(3 if item == "partitioned" else 0)
                ),
                "CREATE INDEX item_shop ON item (shop_id)",
                "CREATE TABLE review (id bigserial PRIMARY KEY, shop_id bigint REFERENCES shop (id)"
                " ON DELETE SET NULL ON UPDATE CASCADE, body text NOT NULL UNIQUE)",
                "CREATE TABLE note (id bigserial PRIMARY KEY, shop_id bigint NOT NULL"
                " REFERENCES shop (id) ON DELETE CASCADE, text text NOT NULL)",
                "CREATE TABLE shop_audit (id bigserial PRIMARY KEY, name text, what text)",
                "CREATE FUNCTION shop_stamp() RETURNS trigger LANGUAGE plpgsql AS $$"
                " BEGIN NEW.updated_at := now(); RETURN NEW; END $$",
                "CREATE TRIGGER shop_stamp BEFORE UPDATE ON shop FOR EACH ROW"
                " EXECUTE FUNCTION shop_stamp()",
                "CREATE FUNCTION shop_log() RETURNS trigger LANGUAGE plpgsql AS $$"
                " BEGIN INSERT INTO shop_audit (name, what) VALUES (NEW.name, 'update');"
                " RETURN NULL; END $$",
                "CREATE TRIGGER shop_log AFTER UPDATE ON shop FOR EACH ROW"
                " EXECUTE FUNCTION shop_log()",
            ):
                conn.exec_driver_sql(sql)
        else:
            for sql in (
                "CREATE TABLE shop (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
                " name VARCHAR(60) NOT NULL UNIQUE, parent_id BIGINT NULL,"
                " n INT NOT NULL DEFAULT 0,"
                " updated_at TIMESTAMP(6) NULL DEFAULT NULL ON UPDATE CURRENT_TIMESTAMP(6),"
                " CONSTRAINT shop_parent FOREIGN KEY (parent_id) REFERENCES shop (id)"
                " ON DELETE SET NULL ON UPDATE CASCADE)",
                f"CREATE TABLE item ({_MARIADB_ITEM[item]}, shop_id BIGINT NOT NULL,"
                " label VARCHAR(60) NOT NULL UNIQUE, KEY item_shop (shop_id),"
                " CONSTRAINT item_shop_fk FOREIGN KEY (shop_id) REFERENCES shop (id)"
                " ON DELETE CASCADE ON UPDATE CASCADE)",
                "CREATE TABLE review (id BIGINT AUTO_INCREMENT PRIMARY KEY, shop_id BIGINT NULL,"
                " body VARCHAR(60) NOT NULL UNIQUE, CONSTRAINT review_shop FOREIGN KEY (shop_id)"
                " REFERENCES shop (id) ON DELETE SET NULL ON UPDATE CASCADE)",
                "CREATE TABLE note (id BIGINT AUTO_INCREMENT PRIMARY KEY, shop_id BIGINT NOT NULL,"
                " text VARCHAR(60) NOT NULL, CONSTRAINT note_shop FOREIGN KEY (shop_id)"
                " REFERENCES shop (id) ON DELETE CASCADE)",
            ):
                conn.exec_driver_sql(sql)
        shop = sa.table("shop", sa.column("name"))
        conn.execute(sa.insert(shop), [{"name": f"seed{n}"} for n in range(1, SEED_SHOPS + 1)])
        ids = dict(conn.exec_driver_sql("SELECT name, id FROM shop").all())
        item = sa.table("item", sa.column("shop_id"), sa.column("label"))
        conn.execute(
            sa.insert(item),
            [
                {"shop_id": ids[f"seed{1 + n % SEED_SHOPS}"], "label": f"seed-i{n}"}
                for n in range(SEED_ITEMS)
            ],
        )


@dataclass
class Expected:
    """What the application wrote means: every row's parent, by names."""

    items: dict[str, str | None] = field(default_factory=dict)
    reviews: dict[str, str | None] = field(default_factory=dict)
    notes: dict[str, str | None] = field(default_factory=dict)
    parents: dict[str, str | None] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    updates: int = 0
    """Application UPDATEs of ``shop`` rows (each logged once by the audit trigger)."""


@dataclass
class Context:
    """What a pattern gets: the application's engine, whether the application
    uses the UUID keys, a fresh tag."""

    engine: Engine
    swapped: bool
    """The application uses the UUID keys (new code); otherwise the old ones.
    On the base tables: whether the migration has swapped them."""
    tag: str
    expected: Expected
    uuid192: bool = False
    """The keys become UUID192 values: from the swap on the application makes
    them (``UUID192Type`` has no server default), so every new shop names its key."""
    home: str | None = None
    """The application's own schema (PostgreSQL) or database (MariaDB) when it is
    deployed with versions: its names may resolve to a version's views, so
    the statements no view takes (docs/migration.md, "Rolling deploys") are
    sent as the docs say: ``TRUNCATE`` names the base table, PostgreSQL's
    ``COPY`` loads a temporary table first."""

    @property
    def pg(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    def explicit_key(self, conn: Connection) -> Any:
        """A key the application chooses itself (fixtures, imports): the next
        sequence value before the swap, a UUIDv7 from the swap on."""
        if self.swapped:
            return UUID192(uuid7(), 3).bytes if self.uuid192 else str(uuid7())
        if self.pg:
            # The sequence by its name: pg_get_serial_sequence() reads the
            # column's owner, which a version's view has not.
            return conn.exec_driver_sql("SELECT nextval('shop_id_seq')").scalar_one()
        top = conn.exec_driver_sql("SELECT COALESCE(MAX(id), 0) FROM shop").scalar_one()
        return int(top) + 1000

    def made(self, conn: Connection) -> tuple[str, str, dict[str, Any]]:
        """What a new shop's INSERT adds when the application makes the key
        (:attr:`uuid192` from the swap on): the column, the value, its binding."""
        if self.uuid192 and self.swapped:
            return "id, ", ":k, ", {"k": self.explicit_key(conn)}
        return "", "", {}

    def base(self, conn: Connection, table: str) -> str:
        """``table`` as a statement names it: qualified with :attr:`home` (the base
        table, whichever version the application is on) when deployed with
        versions."""
        if self.home is None:
            return table
        quote = conn.dialect.identifier_preparer.quote
        return f"{quote(self.home)}.{quote(table)}"

    def shop(self, conn: Connection, name: str) -> Any:
        """A new shop's key, inserted the way ORM code does (RETURNING /
        LAST_INSERT_ID)."""
        column, value, bound = self.made(conn)
        insert = f"INSERT INTO shop ({column}name) VALUES ({value}:n)"
        if self.pg:
            returning = sa.text(f"{insert} RETURNING id")
            return conn.execute(returning, {"n": name, **bound}).scalar_one()
        conn.execute(sa.text(insert), {"n": name, **bound})
        return key_of(conn, name)


def has_column(conn: Connection, table: str, column: str) -> bool:
    """Whether ``table`` has ``column`` now."""
    return column in {c["name"] for c in sa.inspect(conn).get_columns(table)}


def key_of(conn: Connection, name: str) -> Any:
    """The key of shop ``name``, as the database holds it now."""
    return conn.execute(sa.text("SELECT id FROM shop WHERE name = :n"), {"n": name}).scalar_one()


Pattern = Callable[[Connection, Context], None]


def p_insert_then_child(conn: Connection, ctx: Context) -> None:
    key = ctx.shop(conn, f"orm-{ctx.tag}")
    conn.execute(
        sa.text("INSERT INTO item (shop_id, label) VALUES (:s, :l)"),
        {"s": key, "l": f"orm-{ctx.tag}"},
    )
    ctx.expected.items[f"orm-{ctx.tag}"] = f"orm-{ctx.tag}"


def p_cte_parent_and_child(conn: Connection, ctx: Context) -> None:
    column, value, bound = ctx.made(conn)
    conn.execute(
        sa.text(
            f"WITH p AS (INSERT INTO shop ({column}name) VALUES ({value}:n) RETURNING id)"
            " INSERT INTO item (shop_id, label) SELECT id, :l FROM p"
        ),
        {"n": f"cte-{ctx.tag}", "l": f"cte-{ctx.tag}", **bound},
    )
    ctx.expected.items[f"cte-{ctx.tag}"] = f"cte-{ctx.tag}"


def p_child_before_parent(conn: Connection, ctx: Context) -> None:
    """A child written before its parent: a deferred foreign key (PostgreSQL),
    foreign key checks off for the session (MariaDB imports and fixtures)."""
    key = ctx.explicit_key(conn)
    if ctx.pg:
        conn.exec_driver_sql("SET CONSTRAINTS ALL DEFERRED")
    else:
        conn.exec_driver_sql("SET SESSION foreign_key_checks = 0")
    try:
        conn.execute(
            sa.text("INSERT INTO item (shop_id, label) VALUES (:s, :l)"),
            {"s": key, "l": f"early-{ctx.tag}"},
        )
        conn.execute(
            sa.text("INSERT INTO shop (id, name) VALUES (:k, :n)"),
            {"k": key, "n": f"late-{ctx.tag}"},
        )
    finally:
        if not ctx.pg:
            conn.exec_driver_sql("SET SESSION foreign_key_checks = 1")
    ctx.expected.items[f"early-{ctx.tag}"] = f"late-{ctx.tag}"


def p_self_reference_in_one_statement(conn: Connection, ctx: Context) -> None:
    """A row referring to itself. On MariaDB, the new code deployed with versions
    sets the reference in a second statement: the old version could not read
    it otherwise (docs/migration.md, "Rolling deploys": the AUTO_INCREMENT old
    key is not known to a BEFORE trigger, and no trigger writes its own table)."""
    key = ctx.explicit_key(conn)
    name = f"self-{ctx.tag}"
    if ctx.pg or ctx.home is None or not ctx.swapped:
        conn.execute(
            sa.text("INSERT INTO shop (id, name, parent_id) VALUES (:k, :n, :k)"),
            {"k": key, "n": name},
        )
    else:
        conn.execute(sa.text("INSERT INTO shop (id, name) VALUES (:k, :n)"), {"k": key, "n": name})
        conn.execute(sa.text("UPDATE shop SET parent_id = id WHERE name = :n"), {"n": name})
        ctx.expected.updates += 1
    ctx.expected.parents[name] = name


def p_sub_shop(conn: Connection, ctx: Context) -> None:
    column, value, bound = ctx.made(conn)
    conn.execute(
        sa.text(
            f"INSERT INTO shop ({column}name, parent_id) SELECT {value}:n, id FROM shop"
            " WHERE name = 'seed3'"
        ),
        {"n": f"sub-{ctx.tag}", **bound},
    )
    ctx.expected.parents[f"sub-{ctx.tag}"] = "seed3"


def p_insert_select(conn: Connection, ctx: Context) -> None:
    conn.execute(
        sa.text(
            "INSERT INTO item (shop_id, label) SELECT id, CONCAT(CAST(:l AS VARCHAR(40)), name)"
            " FROM shop WHERE name IN ('seed4', 'seed5')"
        ),
        {"l": f"sel-{ctx.tag}-"},
    )
    for shop in ("seed4", "seed5"):
        ctx.expected.items[f"sel-{ctx.tag}-{shop}"] = shop


def p_multi_row(conn: Connection, ctx: Context) -> None:
    six, seven = key_of(conn, "seed6"), key_of(conn, "seed7")
    conn.execute(
        sa.text("INSERT INTO item (shop_id, label) VALUES (:a, :la), (:b, :lb)"),
        {"a": six, "la": f"multi-a-{ctx.tag}", "b": seven, "lb": f"multi-b-{ctx.tag}"},
    )
    ctx.expected.items[f"multi-a-{ctx.tag}"] = "seed6"
    ctx.expected.items[f"multi-b-{ctx.tag}"] = "seed7"


def p_upsert(conn: Connection, ctx: Context) -> None:
    """Upserts: a shop counted up, an item moved by its natural key."""
    column, value, bound = ctx.made(conn)
    if ctx.pg:
        conn.execute(
            sa.text(
                f"INSERT INTO shop ({column}name) VALUES ({value}'seed8')"
                " ON CONFLICT (name) DO UPDATE SET n = shop.n + 1"
            ),
            bound,
        )
        conn.execute(
            sa.text(
                "INSERT INTO item (shop_id, label) SELECT id, 'seed-i9' FROM shop"
                " WHERE name = 'seed9' ON CONFLICT (label) DO UPDATE SET shop_id = EXCLUDED.shop_id"
            )
        )
    else:
        conn.execute(
            sa.text(
                f"INSERT INTO shop ({column}name) VALUES ({value}'seed8')"
                " ON DUPLICATE KEY UPDATE n = n + 1"
            ),
            bound,
        )
        conn.exec_driver_sql(
            "INSERT INTO item (shop_id, label) SELECT id, 'seed-i9' FROM shop WHERE name = 'seed9'"
            " ON DUPLICATE KEY UPDATE shop_id = VALUES(shop_id)"
        )
    ctx.expected.updates += 1
    ctx.expected.items["seed-i9"] = "seed9"


def p_replace_or_insert_ignore(conn: Connection, ctx: Context) -> None:
    """MariaDB's ``REPLACE`` (a delete and an insert) and ``INSERT IGNORE``;
    PostgreSQL's ``ON CONFLICT DO NOTHING``."""
    ten = key_of(conn, "seed10")
    if ctx.pg:
        conn.execute(
            sa.text("INSERT INTO item (shop_id, label) VALUES (:s, :l) ON CONFLICT DO NOTHING"),
            {"s": ten, "l": f"ign-{ctx.tag}"},
        )
    else:
        conn.execute(
            sa.text("REPLACE INTO item (shop_id, label) VALUES (:s, 'seed-i10')"), {"s": ten}
        )
        ctx.expected.items["seed-i10"] = "seed10"
        conn.execute(
            sa.text("INSERT IGNORE INTO item (shop_id, label) VALUES (:s, :l)"),
            {"s": ten, "l": f"ign-{ctx.tag}"},
        )
    ctx.expected.items[f"ign-{ctx.tag}"] = "seed10"


def p_bulk_load(conn: Connection, ctx: Context) -> None:
    """``COPY`` (PostgreSQL) / ``LOAD DATA LOCAL INFILE`` (MariaDB) of items."""
    eleven = key_of(conn, "seed11")
    binary = isinstance(eleven, bytes | memoryview)  # UUID192 keys
    rows = [(str(eleven), f"bulk-{ctx.tag}-{n}") for n in range(3)]
    if ctx.pg:
        # PostgreSQL copies into no view ("cannot copy to view"): deployed with
        # versions, the application copies into a temporary table shaped like
        # its version's item, then inserts from it.
        target = "item"
        if ctx.home is not None:
            target = "item_load"
            conn.exec_driver_sql(
                f"CREATE TEMPORARY TABLE {target} ON COMMIT DROP AS"
                " SELECT shop_id, label FROM item WITH NO DATA"
            )
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        with cursor.copy(f"COPY {target} (shop_id, label) FROM STDIN") as copy:
            for _, label in rows:
                copy.write_row((bytes(eleven) if binary else str(eleven), label))
        if target != "item":
            conn.exec_driver_sql(
                f"INSERT INTO item (shop_id, label) SELECT shop_id, label FROM {target}"
            )
    else:
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False, newline="") as f:
            key = bytes(eleven).hex() if binary else str(eleven)
            csv.writer(f, lineterminator="\n").writerows((key, label) for _, label in rows)
        how = "(@k, label) SET shop_id = UNHEX(@k)" if binary else "(shop_id, label)"
        try:
            conn.exec_driver_sql(
                f"LOAD DATA LOCAL INFILE '{Path(f.name).as_posix()}' INTO TABLE item"
                f" FIELDS TERMINATED BY ',' {how}"
            )
        finally:
            Path(f.name).unlink()
    for _, label in rows:
        ctx.expected.items[label] = "seed11"


def p_move_child(conn: Connection, ctx: Context) -> None:
    conn.exec_driver_sql(
        "UPDATE item SET shop_id = (SELECT id FROM shop WHERE name = 'seed12')"
        " WHERE label = 'seed-i13'"
    )
    ctx.expected.items["seed-i13"] = "seed12"


def p_multi_table(conn: Connection, ctx: Context) -> None:
    """``UPDATE … FROM`` / ``UPDATE … JOIN`` and ``DELETE … USING`` / ``DELETE … JOIN``."""
    conn.execute(
        sa.text("INSERT INTO review (shop_id, body) VALUES (:s, :b)"),
        {"s": key_of(conn, "seed14"), "b": f"join-{ctx.tag}"},
    )
    if ctx.pg:
        conn.execute(
            sa.text(
                "UPDATE review r SET shop_id = s.id FROM shop s"
                " WHERE s.name = 'seed15' AND r.body = :b"
            ),
            {"b": f"join-{ctx.tag}"},
        )
        conn.execute(
            sa.text(
                "DELETE FROM item i USING shop s WHERE i.shop_id = s.id"
                " AND s.name = 'seed16' AND i.label = 'seed-i15'"
            )
        )
    else:
        conn.execute(
            sa.text(
                "UPDATE review r JOIN shop s ON s.name = 'seed15' SET r.shop_id = s.id"
                " WHERE r.body = :b"
            ),
            {"b": f"join-{ctx.tag}"},
        )
        conn.exec_driver_sql(
            "DELETE i FROM item i JOIN shop s ON i.shop_id = s.id"
            " WHERE s.name = 'seed16' AND i.label = 'seed-i15'"
        )
    ctx.expected.reviews[f"join-{ctx.tag}"] = "seed15"
    ctx.expected.items.pop("seed-i15", None)


def p_rekey_parent(conn: Connection, ctx: Context) -> None:
    """The key of a shop changes; ``ON UPDATE CASCADE`` follows it."""
    name = f"rekey-{ctx.tag}"
    key = ctx.shop(conn, name)
    conn.execute(
        sa.text("INSERT INTO item (shop_id, label) VALUES (:s, :l)"), {"s": key, "l": name}
    )
    new = ctx.explicit_key(conn)
    conn.execute(sa.text("UPDATE shop SET id = :k WHERE name = :n"), {"k": new, "n": name})
    ctx.expected.items[name] = name
    ctx.expected.updates += 1


def p_delete_cascade_and_set_null(conn: Connection, ctx: Context) -> None:
    name = f"gone-{ctx.tag}"
    key = ctx.shop(conn, name)
    conn.execute(
        sa.text("INSERT INTO item (shop_id, label) VALUES (:s, :l)"), {"s": key, "l": name}
    )
    conn.execute(
        sa.text("INSERT INTO review (shop_id, body) VALUES (:s, :b)"), {"s": key, "b": name}
    )
    conn.execute(sa.text("DELETE FROM shop WHERE name = :n"), {"n": name})
    ctx.expected.deleted.add(name)
    ctx.expected.items.pop(name, None)
    ctx.expected.reviews[name] = None


def p_truncate(conn: Connection, ctx: Context) -> None:
    """A child emptied with ``TRUNCATE``, then written again."""
    conn.execute(
        sa.text("INSERT INTO note (shop_id, text) VALUES (:s, 'before')"),
        {"s": key_of(conn, "seed17")},
    )
    # MariaDB: commits the insert. Deployed with versions, the base table: no
    # view can be truncated (docs/migration.md, "Rolling deploys").
    conn.exec_driver_sql(f"TRUNCATE TABLE {ctx.base(conn, 'note')}")
    ctx.expected.notes.clear()
    conn.execute(
        sa.text("INSERT INTO note (shop_id, text) VALUES (:s, :t)"),
        {"s": key_of(conn, "seed18"), "t": f"note-{ctx.tag}"},
    )
    ctx.expected.notes[f"note-{ctx.tag}"] = "seed18"


def p_replica_role(conn: Connection, ctx: Context) -> None:
    """PostgreSQL: a session replaying rows as a replica (no user triggers, no
    foreign key checks): a child before its parent."""
    key = ctx.explicit_key(conn)
    conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
    conn.execute(
        sa.text("INSERT INTO item (shop_id, label) VALUES (:s, :l)"),
        {"s": key, "l": f"replica-{ctx.tag}"},
    )
    conn.execute(
        sa.text("INSERT INTO shop (id, name) VALUES (:k, :n)"),
        {"k": key, "n": f"replica-{ctx.tag}"},
    )
    ctx.expected.items[f"replica-{ctx.tag}"] = f"replica-{ctx.tag}"


def p_touch_parent(conn: Connection, ctx: Context) -> None:
    """An application update of a shop (the stamp and audit triggers fire)."""
    conn.exec_driver_sql("UPDATE shop SET n = n + 1 WHERE name = 'seed19'")
    ctx.expected.updates += 1


COMMON: dict[str, Pattern] = {
    "insert then child": p_insert_then_child,
    "child before parent": p_child_before_parent,
    "self-reference in one statement": p_self_reference_in_one_statement,
    "sub-shop by INSERT ... SELECT": p_sub_shop,
    "INSERT ... SELECT children": p_insert_select,
    "multi-row VALUES": p_multi_row,
    "upsert": p_upsert,
    "REPLACE / INSERT IGNORE / DO NOTHING": p_replace_or_insert_ignore,
    "COPY / LOAD DATA": p_bulk_load,
    "move a child": p_move_child,
    "multi-table UPDATE and DELETE": p_multi_table,
    "key update with ON UPDATE CASCADE": p_rekey_parent,
    "delete: cascade and SET NULL": p_delete_cascade_and_set_null,
    "TRUNCATE a child": p_truncate,
    "update a parent (application triggers)": p_touch_parent,
}
POSTGRESQL_ONLY: dict[str, Pattern] = {
    "data-modifying CTE: parent and child": p_cte_parent_and_child,
    "replica session: child before parent": p_replica_role,
}


def patterns(engine: Engine) -> dict[str, Pattern]:
    """Every pattern the database can run."""
    if engine.dialect.name == "postgresql":
        return {**COMMON, **POSTGRESQL_ONLY}
    return dict(COMMON)


_tags = itertools.count(1)


def run_all(
    engine: Engine, swapped: bool, expected: Expected, where: str, uuid192: bool = False
) -> dict[str, str]:
    """Run every pattern once, each in its own transaction; the failures by pattern
    (``uuid192``: see :attr:`Context.uuid192`)."""
    failures: dict[str, str] = {}
    for name, pattern in patterns(engine).items():
        ctx = Context(engine, swapped, f"{next(_tags)}", expected, uuid192)
        _attempt(pattern, ctx, f"{where}: {name}", failures)
    return failures


def _attempt(pattern: Pattern, ctx: Context, label: str, failures: dict[str, str]) -> None:
    try:
        with ctx.engine.begin() as conn:
            pattern(conn, ctx)
    except sa.exc.DBAPIError as error:
        failures[label] = str(error.orig).splitlines()[0]


def run_interleaved(apps: list[tuple[str, Context]], where: str) -> dict[str, str]:
    """Every pattern once per application (``(name, context)``; each context's
    tag is replaced), one application's after the other's, pattern by pattern;
    the failures by place, application and pattern."""
    failures: dict[str, str] = {}
    for name, pattern in patterns(apps[0][1].engine).items() if apps else ():
        for app, ctx in apps:
            ctx.tag = f"{app}{next(_tags)}"
            _attempt(pattern, ctx, f"{where}: {app}: {name}", failures)
    return failures


def check(engine: Engine, expected: Expected) -> list[str]:
    """Where the database disagrees with what the application wrote (empty: nowhere)."""
    problems: list[str] = []
    with engine.connect() as conn:
        for table, column, wanted in (
            ("item", "label", expected.items),
            ("review", "body", expected.reviews),
            ("note", "text", expected.notes),
        ):
            actual = dict(
                conn.exec_driver_sql(
                    f"SELECT c.{column}, s.name FROM {table} c LEFT JOIN shop s ON s.id = c.shop_id"
                ).all()
            )
            for natural, shop in wanted.items():
                if natural not in actual:
                    problems.append(f"{table} {natural!r} is missing")
                elif actual[natural] != shop:
                    problems.append(
                        f"{table} {natural!r} points at {actual[natural]!r}, not {shop!r}"
                    )
            orphans = conn.exec_driver_sql(
                f"SELECT count(*) FROM {table} c WHERE c.shop_id IS NOT NULL"
                " AND NOT EXISTS (SELECT 1 FROM shop s WHERE s.id = c.shop_id)"
            ).scalar_one()
            if orphans:
                problems.append(f"{table}: {orphans} rows point at no shop")
        parents = dict(
            conn.exec_driver_sql(
                "SELECT s.name, p.name FROM shop s LEFT JOIN shop p ON p.id = s.parent_id"
            ).all()
        )
        for name, parent in expected.parents.items():
            if parents.get(name, "missing") != parent:
                problems.append(f"shop {name!r} has parent {parents.get(name)!r}, not {parent!r}")
        for name in expected.deleted:
            if name in parents:
                problems.append(f"shop {name!r} was deleted but is there")
        if engine.dialect.name == "postgresql":
            audited = conn.exec_driver_sql("SELECT count(*) FROM shop_audit").scalar_one()
            if audited != expected.updates:
                problems.append(
                    f"the audit trigger logged {audited} updates; the application made"
                    f" {expected.updates}"
                )
        stamped = conn.execute(
            sa.text(
                "SELECT count(*) FROM shop WHERE name LIKE 'seed%' AND updated_at IS NOT NULL"
                " AND name NOT IN ('seed8', 'seed19')"
            )
        ).scalar_one()
        if stamped:
            problems.append(f"{stamped} seed shops the application never updated were stamped")
    return problems


def seeded() -> Expected:
    """What the seed data means (:func:`create_schema`'s items)."""
    expected = Expected()
    expected.items.update({f"seed-i{n}": f"seed{1 + n % SEED_SHOPS}" for n in range(SEED_ITEMS)})
    return expected


def where_of(engine: Engine) -> str:
    """Which version an application's engine is on: its ``search_path``
    (PostgreSQL) or its database (MariaDB), as its connections see it."""
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            return str(conn.exec_driver_sql("SHOW search_path").scalar_one())
        return str(conn.exec_driver_sql("SELECT DATABASE()").scalar_one())


@dataclass
class Deployment:
    """One application version of a rolling deploy (docs/migration.md, "Rolling
    deploys"): whether it uses the UUID keys, and the engine it serves through
    as the migration stands (:func:`~sqla_ids.migration.migration_phase`'s
    answer; ``None``: not serving then)."""

    name: str
    uses_uuid: bool
    serving: Callable[[str | None], Engine | None]
    home: str
    """The application's own schema (PostgreSQL) or database (MariaDB)."""


@dataclass
class Matrix:
    """Every pattern run again and again against one shop while it is migrated:
    what they meant (:attr:`expected`) and how they failed (:attr:`failures`)."""

    engine: Engine
    uuid192: bool = False
    """Run the patterns as a UUID192 application (:attr:`Context.uuid192`)."""
    expected: Expected = field(default_factory=seeded)
    failures: dict[str, str] = field(default_factory=dict)
    pauses: int = 0
    """Backfill pauses seen (:meth:`around_every_phase`)."""

    deployments: list[Deployment] = field(default_factory=list)
    """Application versions of a rolling deploy, each on its version of the tables
    (none: one application on the base tables, using the keys of the moment)."""
    served: list[tuple[str, str, str]] = field(default_factory=list)
    """With :attr:`deployments`: ``(where, phase, application)`` of every run, the
    engine's database and search path appended (``where ... on <url>``)."""

    def run(self, where: str) -> None:
        """Every pattern once, as the migration stands now (with
        :attr:`deployments`: once by each application version serving now,
        interleaved)."""
        if self.deployments:
            from sqla_ids.migration import migration_phase

            with self.engine.connect() as conn:
                phase = migration_phase(conn, "shop")
            apps = []
            for deployment in self.deployments:
                engine = deployment.serving(phase)
                if engine is not None:
                    ctx = Context(
                        engine, deployment.uses_uuid, "", self.expected, home=deployment.home
                    )
                    apps.append((deployment.name, ctx))
                    self.served.append(
                        (where, str(phase), f"{deployment.name} on {where_of(engine)}")
                    )
            self.failures.update(run_interleaved(apps, f"{where} [{phase}]"))
            # Each application reads every row where either wrote it to point,
            # in its own version (its keys, its references).
            for app, ctx in apps:
                problems = check(ctx.engine, self.expected)
                if problems:
                    self.failures[f"{where} [{phase}]: {app}: read back"] = "; ".join(problems)
            return
        with self.engine.connect() as conn:
            swapped = has_column(conn, "shop", "id_old")
        self.failures.update(run_all(self.engine, swapped, self.expected, where, self.uuid192))

    def around_every_phase(self, monkeypatch: Any, mid_backfill: tuple[int, ...]) -> None:
        """Run the patterns before each of the online migration's phases and at the
        backfill pauses numbered ``mid_backfill`` (1 is the first)."""
        from sqla_ids.migration import online

        run_tasks, pause = online.OnlineRun.run_tasks, online.OnlineRun.pause
        phases = iter(["the plan", "expand", "backfill", "prepare", "swap", "contract"])

        def before_each_phase(run: Any, tasks: Any, then: Any = None) -> None:
            self.run(f"before {next(phases, 'a phase')}")
            run_tasks(run, tasks, then)

        def paused(run: Any) -> None:
            self.pauses += 1
            if self.pauses in mid_backfill:
                self.run(f"mid-backfill ({self.pauses})")
            pause(run)

        monkeypatch.setattr(online.OnlineRun, "run_tasks", before_each_phase)
        monkeypatch.setattr(online.OnlineRun, "pause", paused)

    def migrate(self, options: Any) -> None:
        """The online migration of ``shop`` with ``options``, phase by phase to the
        contract, then the patterns once more and :meth:`checked`."""
        from sqla_ids.migration import migrate_pk_to_uuid7

        try:
            for phase in ("prepare", "swap", "contract"):
                with self.engine.connect() as conn:
                    migrate_pk_to_uuid7(conn, "shop", options, phase=phase)
        except Exception as error:  # the failures first: they say why it stopped
            raise AssertionError(f"{error}; the application's failures: {self.failures}") from error
        self.run("after the contract")
        self.checked()

    def checked(self) -> None:
        """No pattern failed, and every row is where it was written to be."""
        assert self.failures == {}
        problems = check(self.engine, self.expected)
        assert not problems, "\n".join(problems)
