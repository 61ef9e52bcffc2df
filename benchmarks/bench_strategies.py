"""Per-call strategy time with the conversation's memo kept, beside a fresh memo, in one run.

Run: ``nice -n 10 .venv/bin/python benchmarks/bench_strategies.py`` (``--sizes 2000,10000``).

For each transcript size and each strategy list, a conversation of ``--calls`` calls is
prepared twice, side by side: each call appends one tool round to the history (a new list, the
old dicts kept, as a stateless caller or a ``Session`` does) and runs the chain, once with one
memo kept across the calls and once with a fresh memo per call (what a call costs without the
incremental core). A third column rebuilds every dict on every call (``copy.deepcopy``, what
agent frameworks do) with the memo kept; the copy itself is not timed. The median CPU time per
call (``time.process_time``: on a shared machine wall time is mostly waiting) is printed with
the ratio kept / fresh; both prompts are checked equal on every call.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from _agent import round_of, transcript

import ctxmw  # noqa: F401  # ctxmw first: it keeps litellm offline
from ctxmw.settings import Settings
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.types import StrategyContext

LINES = 16  # each result 600 characters

MODEL = "openai/gpt-4o-mini"
LISTS = (
    "default",
    "shorten_tools_epoch_increment",
    "shorten_tools_economic,cache_breakpoints",
    "repair_tool_pairs,shorten_tools",
)


async def conversation(
    size: int, chain: str, calls: int, model: str | None
) -> tuple[float, float, float]:
    """Median CPU ms per call: memo kept, fresh memo, memo kept with rebuilt dicts."""
    settings = Settings()
    named = resolve_strategies(None if chain == "default" else chain, settings)
    history = transcript(size, LINES)
    kept: dict[str, Any] = {}
    rebuilt_memo: dict[str, Any] = {}
    times: tuple[list[float], list[float], list[float]] = ([], [], [])
    for k in range(calls + 1):
        history = [*history, *round_of(10**6 + k, LINES)]
        rebuilt = copy.deepcopy(history)
        outs = []
        for memo, sent, spent in (
            (kept, history, times[0]),
            ({}, history, times[1]),
            (rebuilt_memo, rebuilt, times[2]),
        ):
            ctx = StrategyContext(settings=settings, model=model, memo=memo)
            started = time.process_time()
            outs.append(await apply_strategies(sent, named, ctx))
            if k:  # the first call of a conversation reads everything: a warm-up
                spent.append(time.process_time() - started)
        if not outs[0] == outs[1] == outs[2]:
            raise SystemExit(f"{chain} at {size}: the kept memo changed the prompt")
    kept_ms, fresh_ms, rebuilt_ms = (statistics.median(t) * 1e3 for t in times)
    return kept_ms, fresh_ms, rebuilt_ms


async def run(sizes: list[int], calls: int, lists: list[str]) -> None:
    print(f"{'messages':>9} {'strategies':<42} {'kept':>8} {'fresh':>8} {'rebuilt':>8} ratio")
    for size in sizes:
        for chain in lists:
            kept, fresh, rebuilt = await conversation(size, chain, calls, MODEL)
            print(
                f"{size:>9} {chain:<42} {kept:>6.2f}ms {fresh:>6.2f}ms {rebuilt:>6.2f}ms "
                f"{kept / fresh:.3f}x"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,10000", help="comma-separated message counts")
    parser.add_argument("--calls", type=int, default=15, help="calls per conversation")
    parser.add_argument(
        "--lists",
        default=";".join(LISTS),
        help="strategy lists separated by ';' (each a comma-separated prompt_strategies)",
    )
    args = parser.parse_args()
    sizes = [int(part) for part in args.sizes.split(",") if part.strip()]
    lists = [part.strip() for part in args.lists.split(";") if part.strip()]
    anyio.run(run, sizes, args.calls, lists)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
