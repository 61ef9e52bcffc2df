"""Cost x none and retention, with and without ``offload``, replayed on one synthetic session.

Not a test: run ``python benchmarks/bench_offload.py [N_CALLS]`` (default 1000). Every row comes
from the same replay run of the same transcript (``ctxmw.replay``, litellm's prices for
claude-sonnet-4-5, about four bytes a token), so the ratios compare like with like. The model
never calls ``ctxmw_expand`` in a replay (the answers are the recorded ones): the cost of reading
an offloaded result back is not in these figures, and an offloaded result counts as
"compacted" in ctxmw's retention; the last column says how many results the model can still
read back whole (their handle is in the prompt, in a preview or in a compacted preview).
"""

from __future__ import annotations

import sys
import time

import anyio

from ctxmw.replay import replay, synthetic_transcript
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.strategies.offload import MARK
from ctxmw.telemetry.counters import ApproxCounter
from ctxmw.types import Messages, StrategyContext

LISTS = [
    "shorten_tools_epoch_increment",
    "offload",
    "offload,shorten_tools_epoch_increment",
]
THRESHOLDS = (2000, 500)


async def offloaded_at_the_end(messages: Messages, spec: str, threshold: int) -> int:
    """Tool results whose handle the model sees at the last call (readable back whole), in
    full preview or in a preview the epoch strategies compacted."""
    from ctxmw.settings import Settings

    settings = Settings(offload_threshold=threshold)
    ctx = StrategyContext(settings=settings, model="anthropic/claude-sonnet-4-5", memo={})
    prompt = await apply_strategies(messages, resolve_strategies(spec, settings), ctx)
    return sum(1 for m in prompt if m.get("role") == "tool" and MARK in str(m.get("content", "")))


async def main(n_calls: int) -> None:
    transcript = synthetic_transcript(n_calls)
    header = (
        f"{'strategies':40} {'threshold':>9} {'tokens':>12} {'peak':>8} {'auto x none':>11} "
        f"{'bp x none':>9} {'full':>5} {'compacted':>9} {'offloaded':>9}"
    )
    print(f"synthetic session: {n_calls} tool calls; offload_threshold in tokens")
    print(header)
    started = time.perf_counter()
    for threshold in THRESHOLDS:
        result = await replay(
            {"synthetic": transcript},
            LISTS,
            counter=ApproxCounter(),
            settings={"offload_threshold": threshold},
        )
        figures = result.to_json()["strategies"]
        for name, entry in figures.items():
            if threshold != THRESHOLDS[0] and "offload" not in name:
                continue  # the rows without offload do not depend on its threshold
            shown = "-" if "offload" not in name else str(threshold)
            ratio = entry["cost_ratio_to_none"]
            kept = await offloaded_at_the_end(transcript, name, threshold)
            print(
                f"{name:40} {shown:>9} {entry['prompt_tokens_total']:>12,} "
                f"{entry['prompt_tokens_peak']:>8,} {ratio['auto']:>10.2f}x "
                f"{ratio['breakpoints']:>8.2f}x {entry['retained_full']:>5} "
                f"{entry['retained_compacted']:>9} {kept:>9}"
            )
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
