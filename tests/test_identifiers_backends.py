"""Opt-in UUIDv7 generators: the standard library's (3.14+) and uuid_utils."""

from __future__ import annotations

import itertools
import sys
import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from sqla_ids import UUIDv7
from sqla_ids.identifiers import Layout, is_uuid7, uuid7
from sqla_ids.identifiers.backends import (
    BACKENDS,
    BackendUnavailableError,
    stdlib_uuid7,
    uuid7_backend,
    uuid_utils_uuid7,
)

STDLIB_UUID7 = sys.version_info >= (3, 14)


@pytest.mark.pure_python
def test_ours_is_the_default() -> None:
    assert uuid7_backend() is uuid7_backend("sqla_ids") is uuid7
    assert BACKENDS[0] == "sqla_ids"


@pytest.mark.pure_python
@pytest.mark.parametrize("name", ["uuid_utils", "stdlib"])
def test_each_backend_makes_increasing_standard_uuid7(name: str) -> None:
    if name == "stdlib" and not STDLIB_UUID7:
        pytest.skip("uuid.uuid7() is new in Python 3.14")
    make = uuid7_backend(name)
    values = [make() for _ in range(5000)]
    assert all(type(v) is uuid.UUID and is_uuid7(v) for v in values)
    assert values == sorted(values) and len(set(values)) == len(values)
    # CPython 3.14's layout: within a millisecond the 42-bit counter counts on.
    layout = Layout.CPYTHON_314
    same_ms = [(a, b) for a, b in itertools.pairwise(values) if a.int >> 80 == b.int >> 80]
    assert same_ms and all(
        layout.counter_of(b.int) == layout.counter_of(a.int) + 1 for a, b in same_ms
    )


@pytest.mark.pure_python
def test_stdlib_before_3_14_says_what_to_use_instead() -> None:
    if STDLIB_UUID7:
        assert uuid7_backend("stdlib") is uuid.uuid7  # type: ignore[attr-defined,unused-ignore]
        assert is_uuid7(stdlib_uuid7())
        return
    with pytest.raises(BackendUnavailableError, match=r"new in Python 3\.14.*uuid_utils"):
        uuid7_backend("stdlib")
    with pytest.raises(BackendUnavailableError):
        stdlib_uuid7()


@pytest.mark.pure_python
def test_unknown_or_missing_backends_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(BackendUnavailableError, match="unknown UUIDv7 generator 'uuid6'"):
        uuid7_backend("uuid6")
    assert is_uuid7(uuid_utils_uuid7())
    monkeypatch.setitem(sys.modules, "uuid_utils", None)
    with pytest.raises(BackendUnavailableError, match="pip install uuid-utils"):
        uuid7_backend("uuid_utils")


def test_a_backend_is_a_column_default() -> None:
    class Base(DeclarativeBase):
        pass

    class Item(Base):
        __tablename__ = "item"
        id: Mapped[uuid.UUID] = mapped_column(
            UUIDv7, primary_key=True, default=uuid7_backend("uuid_utils")
        )

    engine = sa.create_engine("sqlite://")
    Base.metadata.create_all(engine)
    with Session(engine) as session:
        session.add_all([Item(), Item(), Item()])
        session.commit()
        ids = session.scalars(sa.select(Item.id).order_by(Item.id)).all()
    assert len(ids) == 3 and all(is_uuid7(i) for i in ids)
    engine.dispose()
