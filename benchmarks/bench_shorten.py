"""Time per call of shorten_tools_epoch_increment beside json.dumps of the same transcript.

Not a test: run ``python benchmarks/bench_shorten.py``. Both are measured in the same run, on
the same transcript, so the ratio is meaningful on any machine. "warm" is the steady state of a
session (the transcript's strings were seen on the previous call); "cold" clears ctxmw's caches
before every call; "session" is a Session's call: the strategy's per-session memo has seen the
transcript without its last tool round, so only the new messages are indexed.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

from ctxmw import Settings, StrategyContext
from ctxmw.messages.pairs import _canonical
from ctxmw.messages.shorten import _compact_arguments, _shorten_long
from ctxmw.replay.synthetic import synthetic_transcript
from ctxmw.strategies.shorten_tools_epoch_increment import shorten_tools_epoch_increment
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
        f"{'messages':>8} {'calls':>6} {'session':>9} {'warm':>9} {'cold':>9} "
        f"{'json.dumps':>11} {'session/dumps':>13} {'warm/dumps':>10} {'cold/dumps':>10}"
    )
    for n in (100, 1_000, 5_000):
        msgs = transcript(n)
        calls = sum(m["role"] == "tool" for m in msgs)
        repeat = max(5, 2_000 // n)
        before = msgs[: max(i for i, m in enumerate(msgs[:-1]) if m.get("tool_calls"))]
        memo: dict[str, object] = {}

        def strategy(msgs: Messages = msgs, memo: dict[str, object] | None = None) -> object:
            return shorten_tools_epoch_increment(
                msgs, StrategyContext(settings=settings, memo=memo)
            )

        def prime(before: Messages = before, memo: dict[str, object] = memo) -> None:
            strategy(before, memo)  # the session's previous call, one tool round earlier

        strategy()  # warm the caches, as the previous call of a session would have
        session = per_call(lambda memo=memo: strategy(memo=memo), repeat, before=prime)
        warm = per_call(strategy, repeat)
        cold = per_call(strategy, repeat, before=clear_caches)
        dumps = per_call(lambda msgs=msgs: json.dumps(msgs), repeat)
        ms = [f"{t * 1e3:>7.2f}ms" for t in (session, warm, cold, dumps)]
        ratios = f"{session / dumps:>13.2f} {warm / dumps:>10.2f} {cold / dumps:>10.2f}"
        print(f"{len(msgs):>8} {calls:>6} {ms[0]} {ms[1]} {ms[2]} {ms[3]:>11} {ratios}")


if __name__ == "__main__":
    main()
