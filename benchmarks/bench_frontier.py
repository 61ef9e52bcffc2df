"""The cost/loss frontier of the default's design: one row per design tried, measured side by side.

Not a test: run ``nice -n 15 python benchmarks/bench_frontier.py [--quick] [--jobs 2]``. Each
design is the default strategy list with some settings changed (its tiers, the size of a
compacted result, its form); the baselines are the other strategy lists. Every conversation of
``bench_quality.py``'s four sets is replayed through each (``ctxmw.replay``, litellm's prices of
``--model``), and one row per design prints: cost as a ratio to ``none`` (aggregate over the long
sessions, under each caching model; the ``auto`` column replayed with ``cache_rule=openai``), the
worst and mean hidden share per long session (and the mean share only behind an offload handle),
and the same for the short runs. The rows are the
points of the frontier ``docs/design/economics.md`` shows.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from statistics import mean
from typing import Any

import anyio
from bench_economics import END_ONLY, CountOnce
from bench_quality import load

from ctxmw.replay import replay
from ctxmw.replay.caching import CACHING_MODELS
from ctxmw.telemetry.counters import ApproxCounter, LiteLLMCounter
from ctxmw.types import Messages

F = "economic_full_tool_calls"
C = "economic_compacted_tool_calls"
LINES = "economic_compacted_result_chars"  # 0: head and tail of short_output_length characters
OUT = "short_output_length"
OFFLOAD = "offload,shorten_tools_economic,inbox,cache_breakpoints"


def _tiers(full: int, compacted: int, lines: int, head_tail: int = 400) -> dict[str, int]:
    return {F: full, C: compacted, LINES: lines, OUT: head_tail}


DESIGNS: dict[str, tuple[str, Mapping[str, Any]]] = {
    "5 full, 40 compacted, 400 chars head+tail": ("default", _tiers(5, 40, 0)),
    "10 full, 40 compacted, 400 chars head+tail": ("default", _tiers(10, 40, 0)),
    "20 full, 80 compacted, 400 chars head+tail": ("default", _tiers(20, 80, 0)),
    "30 full, 100 compacted, 400 chars head+tail": ("default", _tiers(30, 100, 0)),
    "5 full, 40 compacted, 1,200 chars of lines": ("default", _tiers(5, 40, 1200)),
    "20 full, 60 compacted, 800 chars of lines": ("default", _tiers(20, 60, 800)),
    "20 full, 80 compacted, 800 chars of lines": ("default", _tiers(20, 80, 800)),
    "20 full, 80 compacted, 1,200 chars of lines (default)": ("default", {}),
    "offload first, then the default": (OFFLOAD, {}),
    "shorten_tools_epoch_increment": ("shorten_tools_epoch_increment", {}),
    "clear_tool_results": ("clear_tool_results", {}),
}
"""Each design tried: the strategy list and the settings it changes."""


def measure(args: tuple[str, str, Messages, str, Mapping[str, Any], str, bool]) -> tuple[Any, ...]:
    """One conversation through one design: cost per caching model, none's, hidden share."""
    set_name, name, messages, chain, overrides, model, quick = args

    async def go() -> tuple[Any, ...]:
        counter = CountOnce(ApproxCounter() if quick else LiteLLMCounter())
        one = {name: messages}
        kw: dict[str, Any] = {"model": model, "counter": counter, "optimal": False}
        main = await replay(one, [chain], settings={**END_ONLY, **overrides}, **kw)
        auto = await replay(one, [chain], settings={"cache_rule": "openai", **overrides}, **kw)
        s, a = main.strategies[chain], auto.strategies[chain]
        cost = {**s.cost, "auto": a.cost["auto"]}
        none = main.strategies["none"].cost
        hidden = max(s.hidden_share, a.hidden_share)
        return set_name, cost, none, hidden, max(s.recoverable_share, a.recoverable_share)

    return anyio.run(go)


def row(label: str, results: Sequence[tuple[Any, ...]]) -> str:
    cells = [label]
    for group in ("long", "short"):
        rs = [r for r in results if r[0].startswith(group)]
        for k in CACHING_MODELS:
            cells.append(f"{sum(r[1][k] for r in rs) / sum(r[2][k] for r in rs):.3f}")
        hidden = [r[3] for r in rs]
        cells.append(f"{max(hidden):.2%} / {mean(hidden):.2%}")
        if group == "long":
            cells.append(f"{mean(r[4] for r in rs):.2%}")
    return "| " + " | ".join(cells) + " |"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer conversations, 4-byte tokens")
    parser.add_argument("--model", default="anthropic/claude-sonnet-4-5")
    parser.add_argument("--jobs", type=int, default=1, help="processes")
    args = parser.parse_args(argv)
    sets = anyio.run(load, args.quick)
    work = [(s, n, m) for s, convos in sets.items() for n, m in convos.items()]
    models = " | ".join(CACHING_MODELS)
    head = f"long: {models} | hidden worst / mean | recoverable | short: {models}"
    print(f"| design | {head} | hidden worst / mean |")
    print("|---" * (4 + 2 * len(CACHING_MODELS)) + "|")
    started = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        for label, (chain, overrides) in DESIGNS.items():
            jobs = [(s, n, m, chain, overrides, args.model, args.quick) for s, n, m in work]
            print(row(label, list(pool.map(measure, jobs))), flush=True)
            print(f"  ({label}: {time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
