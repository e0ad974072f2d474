"""An application's UPDATE triggers, for the tests of runs that write every row.

A run that writes every row (the fill of a new key, the numbering of a new
order-number column) is no application update: these triggers must not fire
on it, and must fire again for the application afterwards.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection


def audited(conn: Connection, table: str, audit: str, column: str) -> None:
    """Give ``table`` an ``updated`` timestamp (``'2001-01-01 00:00:00'``) and an
    UPDATE trigger writing a row naming ``column``'s value into a new table
    ``audit`` and touching ``updated`` (MariaDB: ``ON UPDATE CURRENT_TIMESTAMP``
    does that itself)."""
    q = conn.dialect.identifier_preparer.quote
    t, log = q(table), q(audit)
    conn.exec_driver_sql(f"CREATE TABLE {log} (what VARCHAR(40))")
    name = conn.dialect.name
    if name == "mysql":
        conn.exec_driver_sql(
            f"ALTER TABLE {t} ADD COLUMN updated TIMESTAMP NOT NULL"
            " DEFAULT '2001-01-01 00:00:00' ON UPDATE CURRENT_TIMESTAMP"
        )
        conn.exec_driver_sql(
            f"CREATE TRIGGER {q('touch `t`')} AFTER UPDATE ON {t} FOR EACH ROW"
            f" INSERT INTO {log} VALUES (CONCAT('upd ', NEW.{q(column)}))"
        )
        return
    conn.exec_driver_sql(
        f"ALTER TABLE {t} ADD COLUMN updated TIMESTAMP NOT NULL DEFAULT '2001-01-01 00:00:00'"
    )
    if name == "postgresql":
        conn.exec_driver_sql(
            f"CREATE FUNCTION {q('touch f')}() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN"
            f" NEW.updated := now(); INSERT INTO {log} VALUES ('upd ' || NEW.{q(column)});"
            " RETURN NEW; END$$"
        )
        conn.exec_driver_sql(
            f"CREATE TRIGGER {q('touch t')} BEFORE UPDATE ON {t} FOR EACH ROW"
            f" EXECUTE FUNCTION {q('touch f')}()"
        )
    else:
        conn.exec_driver_sql(
            f"CREATE TRIGGER {q('touch t')} AFTER UPDATE ON {t} BEGIN"
            f" UPDATE {t} SET updated = '2099-01-01 00:00:00' WHERE rowid = NEW.rowid"
            f" AND updated <> '2099-01-01 00:00:00';"
            f" INSERT INTO {log} VALUES ('upd ' || NEW.{q(column)}); END"
        )
