"""Time per call of shorten_tools_epoch_increment beside json.dumps of the same transcript.

Not a test: run ``python benchmarks/bench_shorten.py``. Both are measured in the same run, on
the same transcript, so the ratio is meaningful on any machine. "warm" is the steady state of a
session (its memo saw the same transcript on the previous call); "cold" starts every call with an
empty memo (a one-off ``prepare_prompt``); "session" is a Session's call: the memo has seen the
transcript without its last tool round, so only the new messages are indexed and shortened.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from ctxmw import Settings, StrategyContext
from ctxmw.messages._memo import session_memo
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
        memo: dict[str, Any] = {}
        warm_memo: dict[str, Any] = {}

        def strategy(msgs: Messages = msgs, memo: dict[str, Any] | None = None) -> object:
            # As the chain runs it: the strategy's caches live in the memo given (a fresh one
            # for a one-off call).
            with session_memo(memo) as active:
                return shorten_tools_epoch_increment(
                    msgs, StrategyContext(settings=settings, memo=active)
                )

        def prime(before: Messages = before, memo: dict[str, Any] = memo) -> None:
            strategy(before, memo)  # the session's previous call, one tool round earlier

        strategy(memo=warm_memo)  # the previous call of a session on the same transcript
        session = per_call(lambda memo=memo: strategy(memo=memo), repeat, before=prime)
        warm = per_call(lambda memo=warm_memo: strategy(memo=memo), repeat)
        cold = per_call(strategy, repeat)
        dumps = per_call(lambda msgs=msgs: json.dumps(msgs), repeat)
        ms = [f"{t * 1e3:>7.2f}ms" for t in (session, warm, cold, dumps)]
        ratios = f"{session / dumps:>13.2f} {warm / dumps:>10.2f} {cold / dumps:>10.2f}"
        print(f"{len(msgs):>8} {calls:>6} {ms[0]} {ms[1]} {ms[2]} {ms[3]:>11} {ratios}")


if __name__ == "__main__":
    main()
