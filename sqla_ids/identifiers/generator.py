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
from collections.abc import Callable, Iterable, Iterator, Sequence
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

    A per-call ``shift`` (of a non-zero number of whole milliseconds) makes
    values for another time, outside that sequence: they carry the shifted
    clock reading and a freshly seeded counter, and leave the generator's
    state as it was, so the values made without a shift afterwards carry the
    real time and continue the timestamp and counter of the previous
    unshifted one as if the shifted values had not been made. A shifted
    value is therefore ordered by its timestamp only, not against unshifted
    values or other shifted calls of the same millisecond; a shifted batch
    is strictly increasing in itself. The generator-wide ``shift`` moves
    every reading and keeps the order.

    In a forked child, the first value starts a new, randomly seeded counter
    (a millisecond after the last one if the clock has not moved on), so
    parent and child never continue the same timestamp and counter sequence.
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
        """Return ``count`` strictly increasing UUIDv7 values, much faster than a loop.

        With a per-call ``shift`` the batch is made as by a fresh generator
        shifted that much, leaving this one's state as it was (see the class).
        """
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"count must be a non-negative integer, got {count!r}")
        return make_uuids(self._batch(count, shift), count)


class _NextFunction(Protocol):
    def __call__(self, *, shift: Shift | None = None) -> UUID: ...


_BatchFunction = Callable[[int, "Shift | None"], list[int]]


def _read_clock(clock: Clock | None, offset_ms: int) -> int:
    """Shifted milliseconds from ``clock`` (the wall clock if ``None``); -1 if it fails."""
    try:
        now = time_ns() // 1_000_000 if clock is None else int(clock())
    except Exception:
        # Clock unavailable: treat it as standing still (RFC 9562 §6.2).
        return -1
    now += offset_ms
    if now < 0:
        raise ValueError(f"the shifted timestamp {now} ms lies before 1970")
    return _check_fits(now)


def _check_fits(now: int) -> int:
    """Return ``now`` if it fits the 48-bit timestamp field."""
    if now > MAX_TIMESTAMP_MS:
        raise ValueError(f"timestamp {now} ms does not fit the 48-bit UUIDv7 field")
    return now


def _counter_step(layout: Layout) -> tuple[int, int]:
    """``(unit, carry_mask)`` for counting on by adding to a UUID integer.

    Adding ``unit`` to a UUID integer adds one to its counter, unless the
    counter's bits below the variant bits are all set (``counter & carry_mask
    == carry_mask``): then the increment carries into ``rand_a`` across the
    variant bits, or overflows the counter (``counter_max`` has them all set).
    """
    random_bits = layout.random_bits
    low_bits = max(0, 62 - random_bits)  # counter bits that land in rand_b
    if low_bits:
        return 1 << random_bits, (1 << low_bits) - 1
    return 1 << (random_bits + 2), layout.counter_max


def _pool_bits(pool: RandomPool, shift: int) -> int:
    """``64 - shift`` random bits from ``pool`` (two words when ``shift`` < 0)."""
    if shift >= 0:
        return pool.word() >> shift
    # More than 64 random bits (counters shorter than 10 bits): two words.
    return (pool.word() << -shift) | (pool.word() >> (64 + shift))


def _tail_makers(
    layout: Layout, pool: RandomPool
) -> tuple[Callable[[], int], Callable[[int], Sequence[int]]]:
    """Return makers of one and of many random tails.

    A tail is fresh random bits placed around the variant bits, ready to OR
    into a UUID integer whose random bits are zero.
    """
    random_bits = layout.random_bits
    tail_shift = 64 - random_bits

    def random_tail() -> int:
        return layout.compose(0, 0, _pool_bits(pool, tail_shift)) ^ VERSION_VARIANT

    def random_tails(count: int) -> Sequence[int]:
        if random_bits <= 62:
            # The random bits all sit below the variant bits: masked words as is.
            return random_words(count, random_bits)
        # Short counters (< 12 bits): random bits spill into rand_a.
        return [random_tail() for _ in range(count)]

    return random_tail, random_tails


def _detached(
    generator: UUIDv7Generator, extra_ms: int, pool: RandomPool, lock: threading.Lock
) -> UUIDv7Generator:
    """A throwaway twin of ``generator`` shifted ``extra_ms`` more, with its own fresh state.

    It shares the random pool (a fresh one costs a 4 KiB refill) and the lock
    that guards it.
    """
    twin: UUIDv7Generator = _new_object(UUIDv7Generator)
    twin._layout, twin._clock = generator._layout, generator._clock
    twin._shift_ms = generator._shift_ms + extra_ms
    _build_engine(twin, pool, lock)  # not registered for forks: it lives for one call
    return twin


def _refill_tails(tails: list[int], random_tails: Callable[[int], Sequence[int]]) -> int:
    """Refill the hot path's random tails; return one."""
    tails.extend(random_tails(_BLANKS_PER_REFILL))
    return tails.pop()


def _refill_blanks(blanks: list[UUID]) -> UUID:
    """Refill the hot path's blank UUID objects (made at C speed); return one."""
    blanks.extend(make_uuids(repeat(0, _BLANKS_PER_REFILL), _BLANKS_PER_REFILL))
    return blanks.pop()


def _build_engine(
    generator: UUIDv7Generator,
    shared_pool: RandomPool | None = None,
    shared_lock: threading.Lock | None = None,
) -> None:
    """Install the generator's closures; its mutable state lives in their cells.

    The state is the timestamp and counter of the last value (``last_ms``,
    ``counter``), moved on only by ``take``, the one state transition.
    Values shifted per call never reach it (their own seed, or a detached
    twin for batches); a fork leaves it exhausted, so ``take`` re-seeds. The
    per-call paths also keep the last value without its random bits
    (``base``), and the wall-clock hot path the end of the clock's current
    millisecond (``next_tick``), so that its common case -- same millisecond,
    no carry -- is three integer operations.
    """
    layout = generator.layout
    clock = generator._clock
    shift_ms = generator.shift_ms
    counter_max = layout.counter_max
    seed_shift = 64 - layout.seed_bits
    tail_shift = 64 - layout.random_bits
    unit, carry_mask = _counter_step(layout)
    pool = RandomPool() if shared_pool is None else shared_pool
    random_tail, random_tails = _tail_makers(layout, pool)
    lock = threading.Lock() if shared_lock is None else shared_lock
    acquire, release = lock.acquire, lock.release
    last_ms = -1
    counter = counter_max  # so that a first call without a clock reading fails
    base = 0  # == layout.compose(last_ms, counter, 0) once a value was made
    # Next millisecond boundary of the unshifted clock, in float seconds:
    # comparing time() with it is cheaper than dividing time_ns() every call.
    # Float rounding near a boundary only delays the tick by under 1 µs.
    next_tick = 0.0
    # Random tails and blank UUID objects (is_safe already set), made 512 at
    # a time: allocation is the largest single cost of a UUID in pure Python.
    tails: list[int] = []
    blanks: list[UUID] = []

    def take(now: int, wanted: int) -> int:
        """The state transition: take up to ``wanted`` values at clock reading ``now``.

        ``now`` is the shifted clock reading in milliseconds, -1 when there is
        none. The values get timestamp ``last_ms`` and the counters from the
        returned one to ``counter``: at least one value, fewer than ``wanted``
        when the millisecond is full. Lock held.
        """
        nonlocal last_ms, counter
        if now > last_ms:
            last_ms = now  # the clock moved on: a new millisecond
            first = pool.word() >> seed_shift
        elif last_ms < 0:
            raise ValueError("the clock is unavailable and no earlier timestamp is known")
        elif counter < counter_max:
            first = counter + 1  # same millisecond, or the clock stalled or went back
        elif last_ms >= MAX_TIMESTAMP_MS:
            raise ValueError("UUIDv7 timestamp space exhausted")
        else:
            last_ms += 1  # counter exhausted: borrow the next millisecond, never wait
            first = pool.word() >> seed_shift
        counter = first + wanted - 1
        if counter > counter_max:
            counter = counter_max
        return first

    def next_uuid(*, shift: Shift | None = None) -> UUID:
        nonlocal counter, base
        if shift is not None:
            return next_uuid_from_clock(shift=shift)
        now_raw = time()
        acquire()
        try:
            if now_raw < next_tick and (counter & carry_mask) != carry_mask:
                # Same millisecond as before, no carry: take_one's shortcut,
                # inlined (a call would cost more than the rest of this path).
                counter += 1
                base += unit
            else:
                base = tick_or_carry(now_raw)
            try:
                value = base | tails.pop()
            except IndexError:
                value = base | _refill_tails(tails, random_tails)
            try:
                uuid = blanks.pop()
            except IndexError:
                uuid = _refill_blanks(blanks)
        finally:
            release()
        _set_int(uuid, value)
        return uuid

    def tick_or_carry(now_raw: float) -> int:
        """The wall clock ticked, or the counter carries: return the next base. Lock held."""
        nonlocal next_tick
        if now_raw < next_tick:
            return take_one(-1)  # no new clock reading: count on
        raw_ms = int(now_raw * 1000.0)
        now = _check_fits(raw_ms + shift_ms)
        next_tick = (raw_ms + 1) / 1000.0
        return take_one(now)

    def take_one(now: int) -> int:
        """Take one value at clock reading ``now``; return its base. Lock held."""
        nonlocal counter, base
        if now <= last_ms and (counter & carry_mask) != carry_mask:
            # Counting on without a carry (last_ms >= 0 here, as counter_max
            # has all carry_mask bits set): the transition as an addition.
            counter += 1
            base += unit
        else:
            first = take(now, 1)
            base = layout.compose(last_ms, first, 0)
        return base

    def next_uuid_from_clock(*, shift: Shift | None = None) -> UUID:
        """Slow path: injected clock or per-call shift."""
        if shift is not None and (extra_ms := shift_to_ms(shift)):
            return make_uuid(shifted_value(extra_ms))
        now = _read_clock(clock, shift_ms)
        acquire()
        try:
            value = take_one(now) | random_tail()
        finally:
            release()
        return make_uuid(value)

    def shifted_value(extra_ms: int) -> int:
        """A value for the clock reading shifted ``extra_ms`` more, outside the state.

        It is the first value of a fresh state at that reading: a freshly
        seeded counter, guard bits clear.
        """
        now = _read_clock(clock, shift_ms + extra_ms)
        if now < 0:
            raise ValueError("the clock is unavailable: a value shifted per call needs a reading")
        acquire()  # guards the random pool, shared with the stream
        try:
            return layout.compose(now, pool.word() >> seed_shift, _pool_bits(pool, tail_shift))
        finally:
            release()

    def batch(count: int, shift: Shift | None) -> list[int]:
        nonlocal base
        if shift is not None and (extra_ms := shift_to_ms(shift)):
            return _detached(generator, extra_ms, pool, lock)._batch(count, None)
        values: list[int] = []
        while len(values) < count:
            # Re-read the clock every chunk so big batches carry current time.
            now = _read_clock(clock, shift_ms)
            size = min(count - len(values), _BATCH_CHUNK)
            acquire()
            try:
                while size:
                    first = take(now, size)
                    run = counter - first + 1
                    parts = _counter_parts(layout, last_ms, first, run)
                    values.extend(map(or_, parts, random_tails(run)))
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
        # the parent: drop them (RFC 9562 §6.8). The counter would go on
        # exactly as the parent's: mark it exhausted, so that the next value
        # re-seeds it -- at the clock's new millisecond, or one after the
        # last if the clock has not moved on (strict order is kept).
        nonlocal lock, acquire, release, counter, next_tick
        lock = threading.Lock()
        acquire, release = lock.acquire, lock.release
        pool.clear()
        tails.clear()
        counter = counter_max
        next_tick = 0.0

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

``shift`` (milliseconds or ``timedelta``) makes this one value for another
time: it carries the shifted clock reading and a fresh random counter, and
is not part of the increasing sequence; later calls without a shift carry
the real time again (see :class:`UUIDv7Generator`).
"""


def uuid7_batch(count: int, *, shift: Shift | None = None) -> list[UUID]:
    """Return ``count`` strictly increasing UUIDv7 values from the default generator.

    A ``shift`` applies to this batch only, as for :func:`uuid7`.
    """
    return default_generator.batch(count, shift=shift)
