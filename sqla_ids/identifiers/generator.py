"""Monotonic UUIDv7 generation (RFC 9562 §5.7, §6.1-6.3, §6.8).

The hot path avoids what dominates a naive implementation: random words come
from a pool (one ``os.urandom`` per 512 UUIDs) and the ``uuid.UUID`` is built
with ``object.__new__`` plus its two slots, skipping ``UUID.__init__``'s
argument parsing. The result is an ordinary ``uuid.UUID``.
"""

from __future__ import annotations

import gc
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from itertools import chain, repeat
from operator import or_
from time import time, time_ns
from typing import Protocol
from uuid import UUID, SafeUUID

from sqla_ids.identifiers._random import RandomPool, random_words
from sqla_ids.identifiers.clock import Clock
from sqla_ids.identifiers.layout import MAX_TIMESTAMP_MS, VERSION_VARIANT, Layout

_RAND_B_MASK = (1 << 62) - 1

_new_object = object.__new__
# Slot descriptors of uuid.UUID: setting them directly is what UUID.__init__
# does internally (UUID.__setattr__ refuses assignment).
_set_int = UUID.__dict__["int"].__set__
_set_is_safe = UUID.__dict__["is_safe"].__set__
_SAFE_UNKNOWN = SafeUUID.unknown  # attribute lookup on the enum is slow on 3.11

# A batch is produced in chunks of at most this many UUIDs; the clock is
# re-read between chunks so big batches still carry current timestamps.
_BATCH_CHUNK = 4096
_BLANKS_PER_REFILL = 512
_GC_PAUSE_MIN_COUNT = 10_000

Shift = int | timedelta
"""A timestamp shift: milliseconds, or a ``timedelta``."""


def make_uuid(value: int) -> UUID:
    """Return a plain ``uuid.UUID`` for a 128-bit integer, without validation."""
    uuid = _new_object(UUID)
    _set_int(uuid, value)
    _set_is_safe(uuid, _SAFE_UNKNOWN)
    return uuid


def make_uuids(values: Iterable[int], count: int) -> list[UUID]:
    """Return ``count`` plain ``uuid.UUID`` objects for the given integers."""
    # UUIDs hold only ints and cannot form reference cycles, yet each one
    # counts towards the cyclic GC's thresholds, which then re-walks the
    # growing list: for large batches that was 60% of the time. Pause it.
    pause_gc = count >= _GC_PAUSE_MIN_COUNT and gc.isenabled()
    if pause_gc:
        gc.disable()
    try:
        uuids = list(map(_new_object, repeat(UUID, count)))
        # deque(maxlen=0) drains a map at C speed without building a list.
        deque(map(_set_int, uuids, values), maxlen=0)
        deque(map(_set_is_safe, uuids, repeat(_SAFE_UNKNOWN, count)), maxlen=0)
    finally:
        if pause_gc:
            gc.enable()
    return uuids


def shift_to_ms(shift: Shift) -> int:
    """Convert a shift (milliseconds or ``timedelta``) to whole milliseconds."""
    if isinstance(shift, timedelta):
        return (shift.days * 86_400_000) + (shift.seconds * 1000) + (shift.microseconds // 1000)
    if isinstance(shift, int) and not isinstance(shift, bool):
        return shift
    raise TypeError(f"shift must be an int (milliseconds) or a timedelta, got {shift!r}")


class UUIDv7Generator:
    """A thread-safe, fork-safe source of strictly increasing UUIDv7 values.

    Every value is greater than the previous one from the same generator, in
    every thread. When the counter of a millisecond is exhausted, the stored
    timestamp advances by one millisecond (never waiting); when the clock goes
    backwards, stalls or fails, the last timestamp is kept and the counter
    counts on, until the clock passes it again.
    """

    __slots__ = (
        "__call__",
        "__weakref__",
        "_after_fork",
        "_batch",
        "_clock",
        "_layout",
        "_reset",
        "_shift_ms",
        "_state",
    )

    def __init__(
        self,
        layout: Layout = Layout.DEFAULT,
        *,
        shift: Shift = 0,
        clock: Clock | None = None,
    ) -> None:
        if not isinstance(layout, Layout):
            raise TypeError(f"layout must be a sqla_ids Layout, got {layout!r}")
        self._layout = layout
        self._shift_ms = shift_to_ms(shift)
        if self._shift_ms < -time_ns() // 1_000_000:
            # The hot path trusts that shifted wall-clock time is not before 1970.
            raise ValueError(f"shift {self._shift_ms} ms moves the clock before 1970")
        self._clock = clock
        _build_engine(self)
        _GENERATORS.add(self)

    # Set per instance by _build_engine (closures are faster than attribute access).
    __call__: _NextFunction
    _batch: _BatchFunction
    _reset: Callable[[], None]
    _after_fork: Callable[[], None]
    _state: Callable[[], tuple[int, int]]

    def __repr__(self) -> str:
        return (
            f"UUIDv7Generator(layout={self._layout!r}, shift={self._shift_ms}, "
            f"clock={self._clock!r})"
        )

    @property
    def layout(self) -> Layout:
        """The bit layout of the values this generator makes."""
        return self._layout

    @property
    def shift_ms(self) -> int:
        """Milliseconds added to every clock reading."""
        return self._shift_ms

    @property
    def last_timestamp_ms(self) -> int:
        """Timestamp of the last value generated (-1 before the first)."""
        return self._state()[0]

    def reset(self) -> None:
        """Forget the last timestamp and counter.

        For time-travel test tools: after the clock was set back on purpose,
        the next value follows the new clock instead of the stored timestamp.
        """
        self._reset()

    def batch(self, count: int, *, shift: Shift | None = None) -> list[UUID]:
        """Return ``count`` strictly increasing UUIDv7 values, much faster than a loop."""
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"count must be a non-negative integer, got {count!r}")
        return make_uuids(self._batch(count, shift), count)


class _NextFunction(Protocol):
    def __call__(self, *, shift: Shift | None = None) -> UUID: ...


_BatchFunction = Callable[[int, "Shift | None"], list[int]]


def _build_engine(generator: UUIDv7Generator) -> None:
    """Install the generator's closures; its mutable state lives in their cells."""
    layout = generator.layout
    clock = generator._clock
    shift_ms = generator.shift_ms
    counter_max = layout.counter_max
    random_bits = layout.random_bits
    # Random words are 64 bits; shifting right keeps the wanted number of bits.
    seed_shift = 64 - layout.seed_bits
    tail_shift = 64 - random_bits
    pool = RandomPool()
    lock = threading.Lock()
    acquire, release = lock.acquire, lock.release
    last_ms = -1
    counter = counter_max  # so that a first call without a clock reading fails

    def random_bits_of(shift: int) -> int:
        if shift >= 0:
            return pool.word() >> shift
        # More than 64 random bits (counters shorter than 10 bits): two words.
        return (pool.word() << -shift) | (pool.word() >> (64 + shift))

    def read_clock(extra_ms: int) -> int:
        try:
            now = time_ns() // 1_000_000 if clock is None else int(clock())
        except Exception:
            # Clock unavailable: treat it as standing still (RFC 9562 §6.2).
            return -1
        now += shift_ms + extra_ms
        if now < 0:
            raise ValueError(f"the shifted timestamp {now} ms lies before 1970")
        if now > MAX_TIMESTAMP_MS:
            raise ValueError(f"timestamp {now} ms does not fit the 48-bit UUIDv7 field")
        return now

    def advance(now: int) -> int:
        """Move the state to the next value; return its timestamp. Lock held."""
        nonlocal last_ms, counter
        if now > last_ms:
            last_ms = now
            counter = random_bits_of(seed_shift)
            return now
        if last_ms < 0:
            raise ValueError("the clock is unavailable and no earlier timestamp is known")
        counter += 1
        if counter > counter_max:
            # Counter exhausted: borrow the next millisecond, never wait.
            if last_ms >= MAX_TIMESTAMP_MS:
                raise ValueError("UUIDv7 timestamp space exhausted")
            last_ms += 1
            counter = random_bits_of(seed_shift)
        return last_ms

    # The hot path keeps the UUID integer without its random bits in ``base``
    # and steps it by ``unit`` per counter increment, so a value costs three
    # big-integer operations instead of re-composing all fields.
    base = 0
    low_bits = max(0, 62 - random_bits)  # counter bits that land in rand_b
    unit = 1 << (random_bits if low_bits else random_bits + 2)
    # After an increment, ``counter & low_mask == 0`` means the counter carried
    # out of rand_b (the carry would hit the variant bits) or overflowed; both
    # take the slow path. Overflow lands on a multiple of 2**low_bits too.
    low_mask = (1 << low_bits) - 1 if low_bits else counter_max

    def spread_random(bits: int) -> int:
        """Place ``random_bits`` of random data around the variant bits."""
        return layout.compose(0, 0, bits) ^ VERSION_VARIANT

    # Random tails ready to OR into ``base``, made 512 at a time.
    tails: list[int] = []

    def refill_tails() -> int:
        if random_bits <= 62:  # below the variant bits: plain masked words
            tails.extend(random_words(_BLANKS_PER_REFILL, random_bits))
        else:
            tails.extend(
                spread_random(random_bits_of(tail_shift)) for _ in range(_BLANKS_PER_REFILL)
            )
        return tails.pop()

    # Blank UUID objects made 512 at a time at C speed (is_safe already set):
    # allocation is the largest single cost of a UUID in pure Python.
    blanks: list[UUID] = []

    def refill_blanks() -> UUID:
        blanks.extend(make_uuids(repeat(0, _BLANKS_PER_REFILL), _BLANKS_PER_REFILL))
        return blanks.pop()

    # Next millisecond boundary of the unshifted clock, in float seconds:
    # comparing time() with it is cheaper than dividing time_ns() every call.
    # Float rounding near a boundary only delays the tick by under 1 µs.
    next_tick = 0.0

    def next_uuid_from_clock(*, shift: Shift | None = None) -> UUID:
        return with_clock(read_clock(0 if shift is None else shift_to_ms(shift)))

    def next_uuid(*, shift: Shift | None = None) -> UUID:
        nonlocal counter, base
        if shift is not None:
            return next_uuid_from_clock(shift=shift)
        now_raw = time()
        acquire()
        try:
            if now_raw < next_tick:
                # Same millisecond as before (or the clock went back): count on.
                counter += 1
                if counter & low_mask:
                    base += unit  # the usual case: no carry, no overflow
                else:
                    base = after_carry()
            else:
                base = at_clock_tick(now_raw)
            try:
                value = base | tails.pop()
            except IndexError:
                value = base | refill_tails()
            try:
                uuid = blanks.pop()
            except IndexError:
                uuid = refill_blanks()
        finally:
            release()
        _set_int(uuid, value)
        return uuid

    def at_clock_tick(now_raw: float) -> int:
        """The wall clock reached a new millisecond; return the base. Lock held."""
        nonlocal next_tick
        raw_ms = int(now_raw * 1000.0)
        now = raw_ms + shift_ms
        if now > MAX_TIMESTAMP_MS:
            raise ValueError(f"timestamp {now} ms does not fit the 48-bit UUIDv7 field")
        next_tick = (raw_ms + 1) / 1000.0
        return new_millisecond(now) if now > last_ms else next_in_millisecond()

    def new_millisecond(now: int) -> int:
        """Start millisecond ``now``; return its zero-random base. Lock held."""
        nonlocal last_ms, counter
        last_ms = now
        counter = random_bits_of(seed_shift)
        return layout.compose(now, counter, 0)

    def next_in_millisecond() -> int:
        """Count on within the stored millisecond; return the new base. Lock held."""
        nonlocal counter
        counter += 1
        return base + unit if counter & low_mask else after_carry()

    def after_carry() -> int:
        """The counter carried out of rand_b or overflowed: re-compose. Lock held."""
        nonlocal counter
        if counter > counter_max:
            counter -= 1
            return layout.compose(advance(last_ms), counter, 0)  # next millisecond
        return layout.compose(last_ms, counter, 0)

    def with_clock(now: int) -> UUID:
        """Slow path: injected clock or per-call shift."""
        nonlocal base
        acquire()
        try:
            base = new_millisecond(now) if now > last_ms else next_in_millisecond()
            value = base | spread_random(random_bits_of(tail_shift))
        finally:
            release()
        return make_uuid(value)

    def run_values(ms: int, first: int, run: int) -> Iterator[int]:
        """Integers of ``run`` values sharing timestamp ``ms``, counters from ``first``."""
        tails: Iterator[int]
        if random_bits <= 62:
            # The random bits all sit below the variant bits: OR them in as is.
            tails = iter(random_words(run, random_bits))
        else:
            # Short counters (< 12 bits): random bits spill into rand_a.
            tails = iter([spread_random(random_bits_of(tail_shift)) for _ in range(run)])
        return map(or_, _counter_parts(layout, ms, first, run), tails)

    def batch(count: int, shift: Shift | None) -> list[int]:
        nonlocal counter, base
        extra = 0 if shift is None else shift_to_ms(shift)
        values: list[int] = []
        while len(values) < count:
            # Re-read the clock every chunk so big batches carry current time.
            now = read_clock(extra)
            size = min(count - len(values), _BATCH_CHUNK)
            acquire()
            try:
                while size:
                    ms = advance(now)
                    run = min(size, counter_max - counter + 1)
                    values.extend(run_values(ms, counter, run))
                    counter += run - 1
                    size -= run
                base = layout.compose(last_ms, counter, 0)
            finally:
                release()
        return values

    def reset() -> None:
        nonlocal last_ms, counter, base, next_tick
        acquire()
        try:
            last_ms, counter, base, next_tick = -1, counter_max, 0, 0.0
        finally:
            release()

    def after_fork() -> None:
        # A lock held by another thread at fork time stays locked forever in
        # the child: take a fresh one. Buffered random words are shared with
        # the parent: drop them (RFC 9562 §6.8).
        nonlocal lock, acquire, release
        lock = threading.Lock()
        acquire, release = lock.acquire, lock.release
        pool.clear()
        tails.clear()

    # The wall-clock hot path only serves generators without an injected clock.
    generator.__call__ = next_uuid if clock is None else next_uuid_from_clock
    generator._batch = batch
    generator._reset = reset
    generator._after_fork = after_fork
    generator._state = lambda: (last_ms, counter)


def _counter_parts(layout: Layout, ms: int, first: int, run: int) -> Iterator[int]:
    """UUID integers with zero random bits for consecutive counters, as C-level ranges.

    The counter straddles the variant bits, so consecutive counters are not
    one arithmetic progression; but between two carries into ``rand_a`` they
    are, which lets ``range`` produce them without a Python loop.
    """
    random_bits = layout.random_bits
    low_bits = max(0, 62 - random_bits)  # counter bits that land in rand_b
    if low_bits == 0:
        step = 1 << (random_bits + 2)  # the counter sits entirely in rand_a
        start = layout.compose(ms, first, 0)
        return iter(range(start, start + run * step, step))
    step = 1 << random_bits
    per_high = 1 << low_bits
    ranges = []
    counter, end = first, first + run
    while counter < end:
        stop = min(end, (counter // per_high + 1) * per_high)
        start = layout.compose(ms, counter, 0)
        ranges.append(range(start, start + (stop - counter) * step, step))
        counter = stop
    return chain.from_iterable(ranges)


_GENERATORS: weakref.WeakSet[UUIDv7Generator] = weakref.WeakSet()


def _reset_generators_in_child() -> None:
    for generator in list(_GENERATORS):
        generator._after_fork()


os.register_at_fork(after_in_child=_reset_generators_in_child)

default_generator = UUIDv7Generator()
"""The process-wide generator behind :func:`uuid7` and :func:`uuid7_batch`."""


# The default generator's own function, not a wrapper: one call less per UUID.
uuid7: _NextFunction = default_generator.__call__
uuid7.__doc__ = """Return a new UUIDv7 from the default generator (strictly increasing per process).

``shift`` (milliseconds or ``timedelta``) moves this value's clock reading.
"""


def uuid7_batch(count: int, *, shift: Shift | None = None) -> list[UUID]:
    """Return ``count`` strictly increasing UUIDv7 values from the default generator."""
    return default_generator.batch(count, shift=shift)
