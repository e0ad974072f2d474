"""Database URLs on the command line: one place that opens them and words their errors.

Every command taking ``--url`` (``demo``, ``find``, ``relations``, ``bench``)
turns database problems into a :class:`CommandError` here, so that

* a password in the URL (``user:secret@`` or ``?password=secret``) never
  appears in a message: the URL is shown with ``***`` and the password is
  removed from the driver's own text as well;
* a missing driver names the extra to install and the URL form that uses it;
* a missing SQLite file or schema is an error naming it, not an empty scan.

SQLAlchemy is imported inside the functions: building the parser stays light.
"""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, unquote

from sqla_ids.errors import CommandError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Engine

MASK = "***"

# The user-info part of a URL, as SQLAlchemy reads it: scheme://user:password@
_USERINFO = re.compile(r"^(?P<head>[\w+]+://[^:/]*:)(?P<password>[^@]*)@")
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&](?:password|passwd)=)(?P<password>[^&]*)", re.I)
_SCHEME = re.compile(r"^(?P<backend>\w+)(?:\+(?P<driver>\w+))?://")

# backend -> (extra to install, URL form that uses the extra's driver, database)
_DRIVERS = {
    "postgresql": (
        "postgresql",
        "postgresql+psycopg://user:password@host:5432/dbname",
        "PostgreSQL",
    ),
    "mysql": ("mysql", "mysql+pymysql://user:password@host:3306/dbname", "MariaDB/MySQL"),
    "mariadb": ("mysql", "mariadb+pymysql://user:password@host:3306/dbname", "MariaDB"),
}
_EXTRA_DRIVERS = {"postgresql": "psycopg", "mysql": "pymysql", "mariadb": "pymysql"}


def add_url_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--url`` option shared by the database tools."""
    parser.add_argument(
        "--url",
        required=True,
        help="SQLAlchemy database URL, e.g. sqlite:///shop.db, "
        "postgresql+psycopg://user:password@host/dbname, "
        "mysql+pymysql://user:password@host/dbname",
    )


def _secrets(url: str) -> list[str]:
    """The password(s) written in ``url``, as written and decoded, longest first."""
    found: set[str] = set()
    match = _USERINFO.match(url)
    if match and match["password"]:
        found.add(match["password"])
    _, _, query = url.partition("?")
    for name, value in parse_qsl(query, keep_blank_values=False):
        if name.lower() in ("password", "passwd") and value:
            found.add(value)
    for match in _QUERY_PASSWORD.finditer(url):
        if match["password"]:
            found.add(match["password"])
    found |= {unquote(secret) for secret in found}
    return sorted(found, key=len, reverse=True)


def display_url(url: str | URL) -> str:
    """``url`` for messages: its password replaced by ``***``.

    >>> display_url("postgresql+psycopg://app:s3cret@db/shop")
    'postgresql+psycopg://app:***@db/shop'
    >>> display_url("postgresql+psycopg://app@db/shop?password=s3cret&sslmode=require")
    'postgresql+psycopg://app@db/shop?password=***&sslmode=require'
    >>> import sqlalchemy as sa
    >>> display_url(sa.make_url("mysql+pymysql://app:s3cret@db/shop?passwd=s3cret"))
    'mysql+pymysql://app:***@db/shop?passwd=***'
    """
    if not isinstance(url, str):
        url = url.render_as_string(hide_password=True)  # ?password= is still to mask
    shown = _USERINFO.sub(lambda m: f"{m['head']}{MASK}@" if m["password"] else m[0], url)
    return _QUERY_PASSWORD.sub(lambda m: m["head"] + MASK, shown)


def scrub(text: str, url: str | None) -> str:
    """``text`` with ``url`` shown masked and every password from it replaced by ``***``.

    >>> scrub("cannot reach mysql://root:pw@db/x as root/pw", "mysql://root:pw@db/x")
    'cannot reach mysql://root:***@db/x as root/***'
    >>> scrub("No module named 'pyodbc' for 'x:s3cret'", "mssql+pyodbc://u:p@h/db?password=s3cret")
    "No module named 'pyodbc' for 'x:***'"
    """
    if not url:
        return text
    text = text.replace(url, display_url(url))
    for secret in _secrets(url):
        if len(secret) >= 4:
            text = text.replace(secret, MASK)
        else:  # a very short one only where it stands alone, not inside every word
            text = re.sub(rf"(?<![^\W_]){re.escape(secret)}(?![^\W_])", MASK, text)
    return text


def driver_hint(url: str) -> str:
    """What to install (and which URL form to write) when ``url``'s driver is missing.

    >>> driver_hint("mysql://root@db/shop")
    "for MariaDB/MySQL install the driver with pip install 'sqla-ids[mysql]' and write the URL as mysql+pymysql://user:password@host:3306/dbname"
    """
    match = _SCHEME.match(url)
    backend = match["backend"].lower() if match else ""
    driver = (match["driver"] or "").lower() if match else ""
    misspelled = backend == "postgres"  # a common spelling SQLAlchemy does not accept
    if misspelled:
        backend = "postgresql"
    known = _DRIVERS.get(backend)
    if known is None:
        return "install the Python database driver (DBAPI) that the URL names"
    extra, form, database = known
    install = f"pip install 'sqla-ids[{extra}]'"
    if driver == _EXTRA_DRIVERS[backend] and not misspelled:
        return f"install the {database} driver with {install}"
    return f"for {database} install the driver with {install} and write the URL as {form}"


def url_error(error: BaseException, url: str) -> CommandError:
    """A :class:`CommandError` for a problem with ``--url`` or its database; no password in it."""
    import sqlalchemy as sa

    shown = display_url(url)
    if isinstance(error, sa.exc.NoSuchModuleError):  # an ArgumentError: test it first
        match = _SCHEME.match(url)
        scheme = url.partition("://")[0] if match else url
        message = (
            f"--url {shown} is not a usable database URL: SQLAlchemy knows no database "
            f"or driver named {scheme!r}"
        )
        if match and match["backend"].lower() in (*_DRIVERS, "postgres"):
            message += f"; {driver_hint(url)}"
    elif isinstance(error, ImportError):
        reason = str(error).split("\n")[0]
        message = f"--url {shown} needs a database driver that is not installed ({reason}): "
        message += driver_hint(url)
    elif isinstance(error, sa.exc.DBAPIError):
        message = f"cannot use the database at {shown}: {str(error.orig).strip()}"
    elif isinstance(error, (sa.exc.ArgumentError, ValueError)):
        message = (
            f"--url {shown} is not a usable database URL ({error}); "
            "expected dialect+driver://user:password@host:port/database"
        )
    elif isinstance(error, FileNotFoundError):
        message = str(error)
    elif isinstance(error, LookupError):
        message = f"{error} (at {shown})"
    else:
        message = str(error)
    return CommandError(scrub(message, url))


def parse_url(url: str) -> URL:
    """``--url`` as a SQLAlchemy URL, or a :class:`CommandError` saying why not."""
    import sqlalchemy as sa

    try:
        return sa.make_url(url)
    except (sa.exc.ArgumentError, ValueError) as error:
        raise url_error(error, url) from None


def open_engine(url: str) -> Engine:
    """An engine for ``--url`` of a database that exists (a missing SQLite file is an error).

    Errors (unparsable URL, unknown dialect, missing driver, missing file)
    become a :class:`CommandError` without the password.
    """
    import sqlalchemy as sa

    from sqla_ids.tools.connections import require_sqlite_file

    parsed = parse_url(url)
    try:
        require_sqlite_file(parsed)
        return sa.create_engine(parsed)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError, OSError) as error:
        raise url_error(error, url) from None


def check_schema(engine: Engine, schema: str | None, url: str) -> None:
    """Refuse a ``--schema`` that the database does not have (the tools would find nothing)."""
    import sqlalchemy as sa

    from sqla_ids.tools.connections import require_schema

    try:
        require_schema(engine, schema)
    except (LookupError, sa.exc.DBAPIError) as error:
        raise url_error(error, url) from None
