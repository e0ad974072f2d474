"""What a generator's values do not share: per-call shifts, and forked processes (issue 14).

* A per-call ``shift`` makes a value for another time. It is computed outside
  the generator's monotonic state: it carries its own (shifted) timestamp and
  a freshly seeded counter, and the values made without a shift afterwards
  carry the real time and continue the stream exactly where it was.
* A forked child re-seeds its counter: parent and child never continue the
  same ``(timestamp, counter)`` sequence.
"""

from __future__ import annotations

import itertools
import os
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, Session

from sqla_ids import UUIDv7Generator, uuid7, uuid7_batch, uuid7_bounds, uuid7_timestamp_ms
from sqla_ids.identifiers import Layout
from sqla_ids.identifiers import generator as generator_module
from sqla_ids.identifiers.layout import PRESETS

START_MS = 1_700_000_000_000
YEAR = timedelta(days=365)
YEAR_MS = 365 * 86_400_000


class FakeClock:
    """An injectable clock the test moves by hand (milliseconds)."""

    def __init__(self, ms: int = START_MS) -> None:
        self.ms = ms
        self.fail = False

    def __call__(self) -> int:
        if self.fail:
            raise OSError("clock unavailable")
        return self.ms


class FakeWallClock:
    """Stands in for ``time.time`` and ``time.time_ns``, in the middle of a millisecond."""

    def __init__(self) -> None:
        self.ms = START_MS

    def time(self) -> float:
        return (self.ms + 0.5) / 1000.0

    def time_ns(self) -> int:
        return self.ms * 1_000_000 + 500_000


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> FakeWallClock:
    """A stopped wall clock for the hot path (no injected clock)."""
    clock = FakeWallClock()
    monkeypatch.setattr(generator_module, "time", clock.time)
    monkeypatch.setattr(generator_module, "time_ns", clock.time_ns)
    return clock


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def pair(value: uuid.UUID, layout: Layout) -> tuple[int, int]:
    """The ``(timestamp, counter)`` of a value: what the monotonic state decides."""
    return uuid7_timestamp_ms(value), layout.counter_of(value.int)


def assert_strictly_increasing(values: list[uuid.UUID]) -> None:
    assert all(a < b for a, b in itertools.pairwise(values))


@pytest.fixture
def default_generator_guard() -> Iterator[None]:
    """Repair the process-wide generator if a shift leaked into it (as it did before the fix)."""
    try:
        yield
    finally:
        if generator_module.default_generator.last_timestamp_ms > now_ms() + 60_000:
            generator_module.default_generator.reset()


# --- item 1: a per-call shift stays with its own value -----------------------------------------


@pytest.mark.pure_python
@pytest.mark.usefixtures("default_generator_guard")
def test_a_shifted_uuid7_leaves_later_values_on_the_real_time() -> None:
    start = now_ms()
    before = uuid7()
    ahead = uuid7(shift=YEAR)
    assert abs(uuid7_timestamp_ms(ahead) - (start + YEAR_MS)) < 60_000
    later = [uuid7(), *uuid7_batch(5), uuid7()]
    end = now_ms()
    low, high = uuid7_bounds(start, end)
    # The range query of "now" finds every value made without a shift.
    assert all(low <= value <= high for value in [before, *later])
    assert_strictly_increasing([before, *later])
    assert generator_module.default_generator.last_timestamp_ms <= end


@pytest.mark.usefixtures("default_generator_guard")
def test_a_shifted_uuid7_leaves_uuid7_pk_keys_on_the_real_time() -> None:
    from sqla_ids import uuid7_pk

    class Base(DeclarativeBase):
        pass

    class Row(Base):
        __tablename__ = "rows"
        id: Mapped[uuid.UUID] = uuid7_pk()

    engine = sa.create_engine("sqlite://")
    Base.metadata.create_all(engine)
    start = now_ms()
    uuid7(shift=YEAR)
    with Session(engine) as session:
        session.add_all([Row() for _ in range(3)])
        session.commit()
        low, high = uuid7_bounds(start, now_ms())
        found = session.scalars(sa.select(Row.id).where(Row.id.between(low, high))).all()
    assert len(found) == 3
    engine.dispose()


@pytest.mark.pure_python
@pytest.mark.parametrize("path", ["wall clock", "injected clock"])
@pytest.mark.parametrize("shift", [YEAR, -YEAR, 5, -5, timedelta(hours=-2)])
def test_a_shifted_value_does_not_touch_the_stream(
    wall: FakeWallClock, path: str, shift: int | timedelta
) -> None:
    layout = Layout.DEFAULT
    clock = FakeClock() if path == "injected clock" else None
    generator = UUIDv7Generator(layout, clock=clock)
    first = generator()
    shifted = generator(shift=shift)
    shifted_batch = generator.batch(4, shift=shift)
    second = generator()
    offset = generator_module.shift_to_ms(shift)
    # The shifted values carry the shifted time, with a freshly seeded counter...
    assert uuid7_timestamp_ms(shifted) == START_MS + offset
    assert layout.counter_of(shifted.int) < 1 << layout.seed_bits
    assert {uuid7_timestamp_ms(v) for v in shifted_batch} == {START_MS + offset}
    assert layout.counter_of(shifted_batch[0].int) < 1 << layout.seed_bits
    assert_strictly_increasing(shifted_batch)
    # ...and the stream goes on exactly as if they had not been made.
    assert pair(second, layout) == (START_MS, layout.counter_of(first.int) + 1)
    assert first < second and generator.last_timestamp_ms == START_MS


@pytest.mark.pure_python
def test_shifts_on_a_shifted_generator_add_up() -> None:
    clock = FakeClock()
    generator = UUIDv7Generator(shift=timedelta(days=-1), clock=clock)
    first = generator()
    later = generator(shift=timedelta(hours=1))
    assert uuid7_timestamp_ms(first) == START_MS - 86_400_000
    assert uuid7_timestamp_ms(later) == START_MS - 86_400_000 + 3_600_000
    assert uuid7_timestamp_ms(generator()) == START_MS - 86_400_000
    assert generator.last_timestamp_ms == START_MS - 86_400_000


@pytest.mark.pure_python
@pytest.mark.parametrize("zero", [0, timedelta(0), timedelta(microseconds=999)])
def test_a_zero_shift_is_no_shift(zero: int | timedelta) -> None:
    # Less than a millisecond shifts nothing: the value belongs to the stream.
    generator = UUIDv7Generator(clock=FakeClock())
    first = generator()
    values = [first, generator(shift=zero), *generator.batch(2, shift=zero), generator()]
    counter = Layout.DEFAULT.counter_of(first.int)
    assert [pair(v, Layout.DEFAULT) for v in values] == [(START_MS, counter + i) for i in range(5)]


@pytest.mark.pure_python
def test_many_shifted_values_between_stream_values() -> None:
    # A shifted value has its own random counter: a burst of them neither
    # repeats itself nor exhausts anything of the stream's.
    layout = Layout(4, 1)
    generator = UUIDv7Generator(layout, clock=FakeClock())
    stream = [generator()]
    shifted: list[uuid.UUID] = []
    for _ in range(50):
        shifted.append(generator(shift=1))
        stream.append(generator())
    assert_strictly_increasing(stream)
    assert {uuid7_timestamp_ms(v) for v in shifted} == {START_MS + 1}
    assert len(set(shifted)) == len(shifted)
    # The stream alone overflowed its 4-bit counter: 51 values need 4+ milliseconds.
    assert uuid7_timestamp_ms(stream[-1]) >= START_MS + 3


@pytest.mark.pure_python
def test_a_shifted_value_needs_a_clock_reading() -> None:
    clock = FakeClock()
    generator = UUIDv7Generator(clock=clock)
    first = generator()
    clock.fail = True
    with pytest.raises(ValueError, match="clock is unavailable"):
        generator(shift=YEAR)
    with pytest.raises(ValueError, match="clock is unavailable"):
        generator.batch(2, shift=YEAR)
    assert generator() > first  # the stream itself still counts on


@pytest.mark.pure_python
def test_a_shift_before_1970_or_past_the_field_is_refused() -> None:
    generator = UUIDv7Generator(clock=FakeClock())
    with pytest.raises(ValueError, match="before 1970"):
        generator(shift=timedelta(days=-365 * 100))
    with pytest.raises(ValueError, match="does not fit"):
        generator.batch(2, shift=timedelta(days=365 * 10_000))


# --- item 2: a forked child re-seeds its counter -----------------------------------------------


def run_forked(
    child: Callable[[], list[uuid.UUID]], parent: Callable[[], list[uuid.UUID]]
) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """Run ``child`` in a forked process and ``parent`` here; return both results.

    The child sends its values over a pipe and leaves with ``os._exit``
    whatever happens, so no pytest machinery runs twice.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        status = 1
        try:
            os.close(read_end)
            payload = b"".join(value.bytes for value in child())
            with os.fdopen(write_end, "wb") as out:
                out.write(payload)
            status = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(status)
    os.close(write_end)
    try:
        parent_values = parent()
    finally:
        with os.fdopen(read_end, "rb") as incoming:
            data = incoming.read()
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the forked child failed (see its stderr)"
    child_values = [uuid.UUID(bytes=data[i : i + 16]) for i in range(0, len(data), 16)]
    return child_values, parent_values


COUNTER_LAYOUTS = [pytest.param(PRESETS[name], id=name) for name in ("default", "cpython314")]


@pytest.mark.pure_python
@pytest.mark.parametrize("layout", COUNTER_LAYOUTS)
@pytest.mark.parametrize("path", ["call", "batch", "injected clock"])
def test_forked_child_does_not_continue_the_parents_sequence(
    wall: FakeWallClock, layout: Layout, path: str
) -> None:
    # The clock stands still, so without a re-seed parent and child would
    # continue the very same (timestamp, counter) sequence.
    generator = UUIDv7Generator(layout, clock=FakeClock() if path == "injected clock" else None)

    def make() -> list[uuid.UUID]:
        if path == "batch":
            return generator.batch(300) + generator.batch(300)
        return [generator() for _ in range(600)]

    before = make()
    child, parent = run_forked(make, make)
    assert len(child) == len(parent) == 600
    for values in (child, parent):
        assert_strictly_increasing([*before, *values])  # each goes on from the shared history
    child_pairs = [pair(v, layout) for v in child]
    parent_pairs = [pair(v, layout) for v in parent]
    assert child_pairs[0] != parent_pairs[0]
    assert not set(child_pairs) & set(parent_pairs)
    # The child started a new, randomly seeded counter (guard bits clear).
    assert layout.counter_of(child[0].int) < 1 << layout.seed_bits


@pytest.mark.pure_python
def test_forked_child_on_the_real_clock_shares_no_timestamp_and_counter() -> None:
    layout = PRESETS["cpython314"]  # 41 random seed bits: a shared pair would be a bug
    generator = UUIDv7Generator(layout)
    generator.batch(10)
    generator()

    def make() -> list[uuid.UUID]:
        return [generator() for _ in range(2000)] + generator.batch(2000)

    child, parent = run_forked(make, make)
    assert len(child) == len(parent) == 4000
    assert_strictly_increasing(child)
    assert_strictly_increasing(parent)
    assert not {pair(v, layout) for v in child} & {pair(v, layout) for v in parent}


@pytest.mark.pure_python
def test_every_forked_child_seeds_its_own_counter(wall: FakeWallClock) -> None:
    # A pre-fork server starts its workers in the same millisecond.
    layout = PRESETS["cpython314"]
    generator = UUIDv7Generator(layout)
    generator()
    firsts = []
    for _ in range(3):
        child, _ = run_forked(lambda: [generator()], list)
        firsts.append(pair(child[0], layout))
    assert len(set(firsts)) == 3
