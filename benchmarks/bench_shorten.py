"""Time per call of shorten_tools_epoch_increment beside json.dumps of the same transcript.

Not a test: run ``python benchmarks/bench_shorten.py``. Both are measured in the same run, on
the same transcript, so the ratio is meaningful on any machine. "warm" is the steady state of a
session (the transcript's strings were seen on the previous call); "cold" clears ctxmw's caches
before every call.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

from ctxmw import Settings, StrategyContext
from ctxmw._compact import _compact_arguments, _shorten_long
from ctxmw._synthetic import synthetic_transcript
from ctxmw._tools import _canonical
from ctxmw.strategies import shorten_tools_epoch_increment
from ctxmw.types import Messages


def transcript(n_messages: int) -> Messages:
    """The synthetic agent session, cut to about ``n_messages`` messages."""
    calls = max(1, round(n_messages / 1.64))  # the generator makes ~1.64 messages per call
    return synthetic_transcript(calls)


def per_call(
    fn: Callable[[], object], repeat: int, before: Callable[[], None] | None = None
) -> float:
    times = []
    for _ in range(repeat):
        if before:
            before()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def clear_caches() -> None:
    for cached in (_shorten_long, _compact_arguments, _canonical):
        cached.cache_clear()


def main() -> None:
    settings = Settings()
    print(
        f"{'messages':>8} {'calls':>6} {'strategy warm':>14} {'strategy cold':>14} "
        f"{'json.dumps':>11} {'warm/dumps':>10} {'cold/dumps':>10}"
    )
    for n in (100, 1_000, 5_000):
        msgs = transcript(n)
        calls = sum(m["role"] == "tool" for m in msgs)
        repeat = max(5, 2_000 // n)

        def strategy(msgs: Messages = msgs) -> object:
            return shorten_tools_epoch_increment(msgs, StrategyContext(settings=settings))

        strategy()  # warm the caches, as the previous call of a session would have
        warm = per_call(strategy, repeat)
        cold = per_call(strategy, repeat, before=clear_caches)
        dumps = per_call(lambda msgs=msgs: json.dumps(msgs), repeat)
        print(
            f"{len(msgs):>8} {calls:>6} {warm * 1e3:>12.2f}ms {cold * 1e3:>12.2f}ms "
            f"{dumps * 1e3:>9.2f}ms {warm / dumps:>10.2f} {cold / dumps:>10.2f}"
        )


if __name__ == "__main__":
    main()
