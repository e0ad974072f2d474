"""The one state transition, driven through every path: wall-clock hot path, batch, shift.

A value shifted per call lies outside the transition (its own timestamp and
fresh counter, no state change); a zero shift is no shift.

The wall-clock hot path (no injected clock) reads ``time.time``; these tests
replace it (and ``time_ns``, read by batches and per-call shifts) with a fake
clock, so that its carry, overflow and clock-going-back branches run.
"""

from __future__ import annotations

import itertools
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqla_ids import UUIDv7Generator, uuid7_timestamp_ms
from sqla_ids.identifiers import Layout
from sqla_ids.identifiers import generator as generator_module

pytestmark = pytest.mark.pure_python

START_MS = 1_700_000_000_000


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
    clock = FakeWallClock()
    monkeypatch.setattr(generator_module, "time", clock.time)
    monkeypatch.setattr(generator_module, "time_ns", clock.time_ns)
    return clock


operations = st.lists(
    st.one_of(
        st.tuples(st.just("call"), st.integers(1, 80)),
        st.tuples(st.just("batch"), st.integers(0, 80)),
        st.tuples(st.just("shift"), st.integers(-3, 3)),
        st.tuples(st.just("clock"), st.integers(-5, 3)),
    ),
    min_size=1,
    max_size=25,
)


def check_transitions(layout: Layout, made: list[tuple[uuid.UUID, int]]) -> None:
    """Each value follows the previous one as the transition prescribes.

    ``made`` pairs each value with the (shifted) clock reading it was made at.
    """
    seed_limit = 1 << layout.seed_bits
    for (a, _), (b, reading) in itertools.pairwise(made):
        assert a.int < b.int
        ms_a, ms_b = uuid7_timestamp_ms(a), uuid7_timestamp_ms(b)
        counter_a, counter_b = layout.counter_of(a.int), layout.counter_of(b.int)
        if ms_b == ms_a:  # counted on: no gaps, whichever path made the values
            assert counter_b == counter_a + 1
        else:  # a new millisecond: re-seeded with the guard bits clear
            assert counter_b < seed_limit
            if ms_b != reading:  # not the clock's: borrowed after an overflow
                assert (ms_b, counter_a) == (ms_a + 1, layout.counter_max)


# The fixture only installs the fake clock; each example sets its time itself.
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    layout=st.sampled_from(
        [Layout.DEFAULT, Layout.NO_COUNTER, Layout(4, 1), Layout(7, 2), Layout(13, 1)]
    ),
    ops=operations,
)
def test_hot_path_batch_and_zero_shift_share_one_transition(
    wall: FakeWallClock, layout: Layout, ops: list[tuple[str, int]]
) -> None:
    wall.ms = START_MS
    generator = UUIDv7Generator(layout)
    made = [(generator(), wall.ms)]
    for op, arg in ops:
        if op == "call":
            made += [(generator(), wall.ms) for _ in range(arg)]
        elif op == "batch":
            made += [(value, wall.ms) for value in generator.batch(arg)]
        elif op == "shift" and arg == 0:
            made.append((generator(shift=arg), wall.ms))
        elif op == "shift":
            shifted = generator(shift=arg)  # outside the stream: checked on its own
            assert uuid7_timestamp_ms(shifted) == wall.ms + arg
            assert layout.counter_of(shifted.int) < 1 << layout.seed_bits
        else:
            wall.ms += arg
    check_transitions(layout, made)
    assert generator.last_timestamp_ms == uuid7_timestamp_ms(made[-1][0])


def test_hot_path_overflow_borrows_the_next_millisecond(wall: FakeWallClock) -> None:
    layout = Layout(4, 1)  # 8 to 16 values per millisecond
    generator = UUIDv7Generator(layout)
    values = [generator() for _ in range(200)]
    stamps = [uuid7_timestamp_ms(v) for v in values]
    assert stamps[0] == wall.ms and stamps[-1] > wall.ms + 10
    check_transitions(layout, [(v, wall.ms) for v in values])
    # Once the wall clock passes the borrowed milliseconds, it is followed again.
    wall.ms = stamps[-1] + 5
    assert uuid7_timestamp_ms(generator()) == wall.ms


def test_hot_path_keeps_its_timestamp_when_the_clock_goes_back(wall: FakeWallClock) -> None:
    generator = UUIDv7Generator()
    first = generator()
    wall.ms -= 5_000
    during = [generator() for _ in range(300)] + generator.batch(300)  # carries included
    assert {uuid7_timestamp_ms(v) for v in during} == {START_MS}
    check_transitions(Layout.DEFAULT, [(v, wall.ms) for v in [first, *during]])
    wall.ms = START_MS + 1
    assert uuid7_timestamp_ms(generator()) == START_MS + 1


def test_hot_path_reset_follows_the_clock_back(wall: FakeWallClock) -> None:
    generator = UUIDv7Generator()
    early = generator()
    wall.ms -= 60_000
    generator.reset()
    later = generator()
    assert uuid7_timestamp_ms(later) == wall.ms and later < early
