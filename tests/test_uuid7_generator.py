"""UUIDv7 generation: layout bits, monotonicity, overflow, clocks, threads, fork."""

from __future__ import annotations

import copy
import itertools
import os
import pickle
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqla_ids import UUIDv7Generator, uuid7, uuid7_batch, uuid7_datetime, uuid7_timestamp_ms
from sqla_ids.identifiers import Layout, uuid7_counter

pytestmark = pytest.mark.pure_python

VERSION_MASK = 0xF << 76
VARIANT_MASK = 0b11 << 62
V7_BITS = (0x7 << 76) | (0b10 << 62)


class FakeClock:
    """An injectable clock the test moves by hand (milliseconds)."""

    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self.ms = ms
        self.fail = False

    def __call__(self) -> int:
        if self.fail:
            raise OSError("clock unavailable")
        return self.ms


def assert_v7_strictly_increasing(values: list[uuid.UUID]) -> None:
    ints = [value.int for value in values]
    assert all(value & (VERSION_MASK | VARIANT_MASK) == V7_BITS for value in ints)
    assert all(a < b for a, b in itertools.pairwise(ints))


def test_rfc9562_appendix_a6_example_timestamp() -> None:
    # RFC 9562 A.6: 2022-02-22 14:22:22.00 GMT-05:00 -> 0x017F22E279B0 ms.
    example = uuid.UUID("017F22E2-79B0-7CC3-98C4-DC0C0C07398F")
    assert uuid7_timestamp_ms(example) == 0x017F22E279B0
    assert uuid7_datetime(example) == datetime(2022, 2, 22, 19, 22, 22, tzinfo=UTC)


def test_returns_plain_uuid_that_behaves_like_one() -> None:
    value = uuid7()
    assert type(value) is uuid.UUID
    assert value.version == 7 and value.variant == uuid.RFC_4122
    assert value == uuid.UUID(str(value)) and hash(value) == hash(uuid.UUID(str(value)))
    assert pickle.loads(pickle.dumps(value)) == value
    assert copy.deepcopy(value) == value
    assert repr(value) == f"UUID('{value}')"
    assert value.is_safe is uuid.SafeUUID.unknown
    with pytest.raises(TypeError):
        value.int = 5  # type: ignore[misc]


@pytest.mark.slow  # a million values; the quick loop checks the same on fewer
def test_version_and_variant_on_millions_of_values() -> None:
    generator = UUIDv7Generator()
    values = generator.batch(2_000_000) + [generator() for _ in range(200_000)]
    assert len(values) == 2_200_000
    assert_v7_strictly_increasing(values)


@pytest.mark.slow  # a million values; the quick loop checks the same on fewer
def test_strict_order_over_a_million_values_and_bytes_order() -> None:
    values = uuid7_batch(500_000) + [uuid7() for _ in range(500_000)] + uuid7_batch(10)
    assert_v7_strictly_increasing(values)
    raw = [value.bytes for value in values[::997]]
    assert raw == sorted(raw) and len(set(raw)) == len(raw)
    text = [str(value) for value in values[::997]]
    assert text == sorted(text)


def test_default_layout_fields() -> None:
    clock = FakeClock()
    generator = UUIDv7Generator(clock=clock)
    first = generator()
    counter = uuid7_counter(first)
    assert counter < 1 << 17, "the guard bit starts at zero"
    following = [generator() for _ in range(100)]
    assert [uuid7_counter(v) for v in following] == list(range(counter + 1, counter + 101))
    # 56 fresh random bits per UUID: their low 56 bits all differ.
    tails = {v.int & ((1 << 56) - 1) for v in following}
    assert len(tails) == 100


@pytest.mark.slow  # 320,000 values from eight threads
def test_strictly_increasing_across_eight_threads() -> None:
    generator = UUIDv7Generator()
    per_thread = 40_000
    results: list[list[uuid.UUID]] = [[] for _ in range(8)]
    start = threading.Barrier(8)

    def work(slot: list[uuid.UUID]) -> None:
        start.wait()
        for index in range(per_thread):
            if index % 100 == 0:
                slot.extend(generator.batch(50))
            else:
                slot.append(generator())

    threads = [threading.Thread(target=work, args=(slot,)) for slot in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [value for slot in results for value in slot]
    for slot in results:
        assert_v7_strictly_increasing(slot)
    assert len(set(everything)) == len(everything)
    assert generator() > max(everything)


def test_counter_overflow_advances_one_millisecond_without_waiting() -> None:
    clock = FakeClock()
    layout = Layout(counter_bits=4, guard_bits=1)  # 8 to 16 values per millisecond
    generator = UUIDv7Generator(layout, clock=clock)
    started = time.perf_counter()
    values = [generator() for _ in range(1000)]
    assert time.perf_counter() - started < 5  # it never sleeps (sanity, not a benchmark)
    assert_v7_strictly_increasing(values)
    stamps = [uuid7_timestamp_ms(v) for v in values]
    assert stamps[0] == clock.ms
    steps = [b - a for a, b in itertools.pairwise(stamps)]
    assert set(steps) <= {0, 1}
    # Each millisecond holds between 2**3 and 2**4 values: re-seeded with the guard bit.
    per_ms = [stamps.count(ms) for ms in sorted(set(stamps))[:-1]]
    assert all(8 <= n <= 16 for n in per_ms)
    assert all(uuid7_counter(v, layout) < 8 for v, s in zip(values[1:], steps, strict=True) if s)
    # Real time catching up resumes the clock's own value.
    clock.ms = stamps[-1] + 10
    assert uuid7_timestamp_ms(generator()) == clock.ms


def test_clock_going_backwards_keeps_last_timestamp_and_counts_on() -> None:
    clock = FakeClock()
    generator = UUIDv7Generator(clock=clock)
    before = generator()
    clock.ms -= 5_000  # NTP step back by five seconds
    during = [generator() for _ in range(50)]
    assert_v7_strictly_increasing([before, *during])
    assert {uuid7_timestamp_ms(v) for v in during} == {uuid7_timestamp_ms(before)}
    clock.ms += 5_001  # the clock passes the stored value again
    after = generator()
    assert uuid7_timestamp_ms(after) == clock.ms
    assert after > during[-1]


def test_clock_stalled_or_unavailable_counts_on() -> None:
    clock = FakeClock()
    generator = UUIDv7Generator(clock=clock)
    first = generator()
    clock.fail = True
    stalled = [generator() for _ in range(20)] + generator.batch(20)
    assert_v7_strictly_increasing([first, *stalled])
    assert {uuid7_timestamp_ms(v) for v in stalled} == {clock.ms}


def test_unavailable_clock_before_any_value_is_a_clear_error() -> None:
    clock = FakeClock()
    clock.fail = True
    generator = UUIDv7Generator(clock=clock)
    with pytest.raises(ValueError, match="clock is unavailable"):
        generator()
    with pytest.raises(ValueError, match="clock is unavailable"):
        generator.batch(3)


@pytest.mark.slow  # a million values; the quick loop checks the same on fewer
def test_no_drift_after_a_burst_of_a_million() -> None:
    # uuid6.uuid7() bumps the millisecond on every same-ms call and ends up
    # far in the future after such a burst; ours stays on the wall clock.
    generator = UUIDv7Generator()
    last = None
    for _ in range(1_000_000):
        last = generator()
    assert last is not None
    now_ms = time.time_ns() // 1_000_000
    assert 0 <= now_ms - uuid7_timestamp_ms(last) <= 50


@pytest.mark.slow  # a million values; the quick loop checks the same on fewer
def test_batch_of_a_million_tracks_the_clock() -> None:
    before = time.time_ns() // 1_000_000
    values = uuid7_batch(1_000_000)
    after = time.time_ns() // 1_000_000
    assert before <= uuid7_timestamp_ms(values[0]) and uuid7_timestamp_ms(values[-1]) <= after + 10


def test_timestamp_shift_per_generator_and_per_call() -> None:
    clock = FakeClock()
    shifted = UUIDv7Generator(shift=timedelta(days=-1), clock=clock)
    assert uuid7_timestamp_ms(shifted()) == clock.ms - 86_400_000
    assert shifted.shift_ms == -86_400_000
    plain = UUIDv7Generator(clock=clock)
    assert uuid7_timestamp_ms(plain(shift=3_600_000)) == clock.ms + 3_600_000
    wall = UUIDv7Generator()(shift=timedelta(hours=-2))
    assert abs(uuid7_timestamp_ms(wall) - (time.time_ns() // 1_000_000 - 7_200_000)) < 2_000
    fresh = UUIDv7Generator(clock=clock)
    assert uuid7_timestamp_ms(fresh.batch(3, shift=-1000)[0]) == clock.ms - 1000
    # A per-call shift is for that value only: back in time too, and the
    # generator's own values stay on its clock (tests/test_uuid7_generator_isolation.py).
    assert uuid7_timestamp_ms(plain(shift=-60_000)) == clock.ms - 60_000
    assert uuid7_timestamp_ms(plain()) == clock.ms
    with pytest.raises(TypeError, match="shift must be"):
        uuid7(shift=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="before 1970"):
        UUIDv7Generator(shift=timedelta(days=-365 * 100))


def test_reset_follows_a_clock_set_back_on_purpose() -> None:
    clock = FakeClock()
    generator = UUIDv7Generator(clock=clock)
    early = generator()
    clock.ms -= 60_000  # a time-travel tool moves the clock back
    assert uuid7_timestamp_ms(generator()) == uuid7_timestamp_ms(early)
    generator.reset()
    after_reset = generator()
    assert uuid7_timestamp_ms(after_reset) == clock.ms
    assert after_reset < early


def test_batch_argument_checks() -> None:
    assert uuid7_batch(0) == []
    with pytest.raises(ValueError, match="non-negative integer"):
        uuid7_batch(-1)
    with pytest.raises(ValueError, match="non-negative integer"):
        uuid7_batch("10")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("counter_bits", "guard_bits", "message"),
    [
        (43, 1, "counter_bits"),
        (-1, 0, "counter_bits"),
        (10, 11, "guard_bits"),
        (8, -1, "guard_bits"),
    ],
)
def test_layout_rejects_bad_sizes(counter_bits: int, guard_bits: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Layout(counter_bits, guard_bits)


def test_cpython_314_preset_layout() -> None:
    assert (Layout.CPYTHON_314.counter_bits, Layout.CPYTHON_314.random_bits) == (42, 32)
    generator = UUIDv7Generator(Layout.CPYTHON_314, clock=FakeClock())
    values = [generator() for _ in range(1000)]
    assert_v7_strictly_increasing(values)
    assert uuid7_counter(values[0], Layout.CPYTHON_314) < 1 << 41


def test_forked_child_never_repeats_the_parent() -> None:
    generator = UUIDv7Generator()
    generator.batch(10)
    generator()  # fill the random pool before forking
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            values = [generator() for _ in range(2000)] + generator.batch(2000)
            os.write(write_end, b"".join(v.bytes for v in values))
        finally:
            os._exit(0)
    os.close(write_end)
    parent = [generator() for _ in range(2000)] + generator.batch(2000)
    data = b""
    while chunk := os.read(read_end, 65536):
        data += chunk
    os.close(read_end)
    os.waitpid(pid, 0)
    child = [uuid.UUID(bytes=data[i : i + 16]) for i in range(0, len(data), 16)]
    assert len(child) == 4000
    assert_v7_strictly_increasing(child)
    assert not set(child) & set(parent)
    # Not only distinct: their random tails share nothing either.
    tail = (1 << 56) - 1
    assert not {v.int & tail for v in child} & {v.int & tail for v in parent}


operations = st.lists(
    st.one_of(
        st.tuples(st.just("call"), st.integers(1, 40)),
        st.tuples(st.just("batch"), st.integers(0, 60)),
        st.tuples(st.just("clock"), st.integers(-2_000, 50)),
        st.tuples(st.just("fail"), st.integers(0, 1)),
    ),
    min_size=1,
    max_size=30,
)


def run_operations(layout: Layout, ops: list[tuple[str, int]]) -> tuple[list[uuid.UUID], int]:
    """Drive a generator on a fake clock; return its values and the highest clock reading."""
    clock = FakeClock()
    generator = UUIDv7Generator(layout, clock=clock)
    produced = [generator()]
    highest_clock = clock.ms
    for op, arg in ops:
        if op == "call":
            produced += [generator() for _ in range(arg)]
        elif op == "batch":
            produced += generator.batch(arg)
        elif op == "clock":
            clock.ms += arg
            highest_clock = max(highest_clock, clock.ms)
        else:
            clock.fail = bool(arg)
    return produced, highest_clock


@settings(max_examples=150, deadline=None)
@given(counter_bits=st.integers(13, 42), ops=operations)
def test_property_monotonic_and_never_ahead_of_the_clock(
    counter_bits: int, ops: list[tuple[str, int]]
) -> None:
    produced, highest_clock = run_operations(Layout(counter_bits, 1), ops)
    assert_v7_strictly_increasing(produced)
    # With the guard bit, a millisecond holds at least 2**(counter_bits-1) >= 4096
    # values; fewer than that were made in all, so the timestamp never had to
    # run ahead of the clock.
    assert uuid7_timestamp_ms(produced[-1]) <= highest_clock


@settings(max_examples=150, deadline=None)
@given(
    layout=st.integers(0, 42).flatmap(lambda c: st.builds(Layout, st.just(c), st.integers(0, c))),
    ops=operations,
)
def test_property_any_layout_is_strictly_monotonic(
    layout: Layout, ops: list[tuple[str, int]]
) -> None:
    produced, _ = run_operations(layout, ops)
    assert_v7_strictly_increasing(produced)
    assert all(layout.counter_of(v.int) <= layout.counter_max for v in produced)
