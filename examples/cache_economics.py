"""The default strategy moves its boundary only when it pays: see it against the limit.

1. Replays a synthetic 100-call session under the default (``shorten_tools_economic``), the
   seed's fixed epochs and ``clear_tool_results``, and prints each one's cost beside ``none`` and
   beside the offline optimum (the cheapest boundary schedule of the default's tiers).
2. Runs the strategy with a session's memo and clock: after an idle gap longer than the
   provider's cache TTL the cache is cold, so the pending compaction is taken at no extra cost.

Offline: token counts are approximate (four bytes a token), prices are litellm's.
"""

from __future__ import annotations

import json
from typing import Any

import anyio

from ctxmw import Settings, StrategyContext
from ctxmw.replay import replay, synthetic_transcript
from ctxmw.strategies.shorten_tools_economic import shorten_tools_economic
from ctxmw.telemetry.counters import ApproxCounter

MODEL = "anthropic/claude-sonnet-4-5"


async def against_the_limit() -> None:
    result = await replay(
        {"synthetic": synthetic_transcript(100)},
        ["default", "shorten_tools_epoch", "clear_tool_results"],
        model=MODEL,
        counter=ApproxCounter(),
    )
    figures = result.to_json()
    print("cost per caching model, x none / x optimal:")
    for name, entry in figures["strategies"].items():
        none, best = entry["cost_ratio_to_none"], entry["cost_ratio_to_optimal"]
        cells = [
            f"{key} {none[key]:.2f} / {best[key]:.2f}"
            for key in ("auto", "breakpoints", "end_breakpoint")
        ]
        print(f"  {name:<20} {'  '.join(cells)}  full {entry['retained_full']}")
    moves = figures["optimal"]["moves"]
    print(f"  the optimum moves its boundary {moves['auto']} times (auto)")


def cold_cache() -> None:
    history = synthetic_transcript(70)
    memo: dict[str, Any] = {}
    settings = Settings()

    def call(messages: list[dict[str, Any]], now: float) -> str:
        ctx = StrategyContext(settings=settings, model=MODEL, memo=memo, now=now)
        prompt = shorten_tools_economic(messages, ctx)
        stats = ctx.stats.get("shorten_tools_economic", {})
        sent, full = len(json.dumps(prompt)), len(json.dumps(messages))
        return f"{sent:,} of {full:,} bytes sent, cold cache: {stats.get('cold', False)}"

    cut = len(history) - 6
    print("a call:                            ", call(history[:cut], now=0.0))
    print("the same a second later:           ", call(history[:cut], now=1.0))
    gap = 15 * 60  # 15 minutes idle: longer than Anthropic's 5-minute cache
    print("the next call, after 15 idle minutes:", call(history, now=gap))


anyio.run(against_the_limit)
cold_cache()
