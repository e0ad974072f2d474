"""UUIDv7 generation speed: sqla_ids against the alternatives, in one run.

Per call: ``sqla_ids.uuid7()`` vs ``uuid.uuid4()``, ``uuid6.uuid7()``,
``uuid_utils.compat.uuid7()`` (Rust, returns ``uuid.UUID``) and
``uuid_utils.uuid7()`` (its own native type; reference only, not a
``uuid.UUID``). Batch: ``sqla_ids.uuid7_batch(N)`` vs a loop of ``uuid7()``.

Each candidate runs in interleaved rounds and keeps its best round, which
filters out the noise of a shared machine. Run::

    python benchmarks/uuid7_generation.py            # 200k per round, batch of 1M
    python benchmarks/uuid7_generation.py --quick    # a few seconds
"""

from __future__ import annotations

import argparse
import importlib
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from sqla_ids import uuid7, uuid7_batch
from sqla_ids.tools.report import print_table, write_bar_chart


def _optional(module: str, attribute: str) -> Callable[[], object] | None:
    try:
        return getattr(importlib.import_module(module), attribute)  # type: ignore[no-any-return]
    except ImportError:
        return None


def per_call_candidates() -> dict[str, Callable[[], object] | None]:
    """The per-call generators to compare, ``None`` where not installed."""
    return {
        "sqla_ids.uuid7()": uuid7,
        "uuid.uuid4()": uuid.uuid4,
        "uuid6.uuid7()": _optional("uuid6", "uuid7"),
        "uuid_utils.compat.uuid7()": _optional("uuid_utils.compat", "uuid7"),
        "uuid_utils.uuid7() [native type]": _optional("uuid_utils", "uuid7"),
    }


def time_per_call(function: Callable[[], object], count: int) -> float:
    """Seconds per call over ``count`` calls (a tight loop, as users would write)."""
    calls = range(count)
    started = time.perf_counter()
    for _ in calls:
        function()
    return (time.perf_counter() - started) / count


def time_list(function: Callable[[], object], count: int) -> float:
    """Seconds per value for ``[function() for _ in range(count)]``."""
    started = time.perf_counter()
    [function() for _ in range(count)]
    return (time.perf_counter() - started) / count


def time_batch(count: int) -> float:
    """Seconds per value for one ``uuid7_batch(count)``."""
    started = time.perf_counter()
    uuid7_batch(count)
    return (time.perf_counter() - started) / count


def best_of(rounds: int, measures: dict[str, Callable[[], float]]) -> dict[str, float]:
    """Run the measures interleaved ``rounds`` times; keep each one's best."""
    best = dict.fromkeys(measures, float("inf"))
    for _ in range(rounds):
        for name, measure in measures.items():
            best[name] = min(best[name], measure())
    return best


def report(title: str, results: dict[str, float], reference: str) -> None:
    """Print ns/op, ops/s and each row's time relative to the reference row."""
    rows = [
        (name, seconds * 1e9, 1e-6 / seconds, f"{seconds / results[reference]:.2f}x")
        for name, seconds in results.items()
    ]
    print_table(title, ("generator", "ns/op", "M ops/s", "time vs ours"), rows)


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run both comparisons, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200_000, help="calls per round (per-call table)")
    parser.add_argument("--batch", type=int, default=1_000_000, help="batch size")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--svg", type=Path, help="also write a bar chart to this SVG file")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.batch, args.rounds = 5_000, 20_000, 2

    candidates = {name: f for name, f in per_call_candidates().items() if f is not None}
    missing = [name for name, f in per_call_candidates().items() if f is None]
    per_call = best_of(
        args.rounds,
        {name: (lambda f=f: time_per_call(f, args.n)) for name, f in candidates.items()},
    )
    report(
        f"Per call ({args.n:,} calls x {args.rounds} rounds, best round)",
        per_call,
        "sqla_ids.uuid7()",
    )
    if missing:
        print(f"(not installed: {', '.join(missing)}; pip install 'sqla-ids[bench]')")

    batch = best_of(
        max(2, args.rounds // 2),
        {
            f"sqla_ids.uuid7_batch({args.batch:,})": lambda: time_batch(args.batch),
            f"[uuid7() for _ in range({args.batch:,})]": lambda: time_list(uuid7, args.batch),
        },
    )
    report("Batch vs a list of per-call values", batch, f"sqla_ids.uuid7_batch({args.batch:,})")
    if args.svg:
        bars = [(name, 1e-6 / seconds) for name, seconds in {**per_call, **batch}.items()]
        write_bar_chart(args.svg, "UUID generation, million values per second", bars, "M/s")
        print(f"\nchart written to {args.svg}")


if __name__ == "__main__":
    main()
