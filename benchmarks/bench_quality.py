"""Cost and loss side by side: what each strategy list costs and what it hides from the model.

Not a test: run ``nice -n 15 python benchmarks/bench_quality.py [--quick] [--jobs 2]``. Every
figure is measured in this run with ``ctxmw.replay`` (litellm's prices of ``--model``): cost as a
ratio to ``none`` under every caching model replay knows (worst conversation and aggregate),
and the share of references (:mod:`ctxmw.replay.loss`: at every call, the distinctive strings of
the recorded next action that first appeared in a tool result) that the prompt no longer showed
(hidden) or showed only behind an offload handle (recoverable), worst and mean per session.

Four sets: the two real Claude Code sessions in ``../shared/data/transcripts`` (long real), the
generated long coding sessions of 150-1,000 calls (:func:`ctxmw.replay.coding.coding_session`),
the real mini-swe-agent runs (short real), and generated SWE-bench-like runs of 30-120 calls
(:func:`ctxmw.replay.coding.swe_run`, many seeds). Then one line per goal of the issue, met or
not, with its figures; then where the default's hidden references came from (how their tool
result was shown, how old it was, what kind of string), the input of the default's redesign.

The default's columns follow ``bench_economics.py``: its ``auto`` cost is replayed with
``cache_rule=openai``, its ``breakpoints`` cost with ``economic_head_mark=True`` and everything
else with ``economic_head_mark=False``; its hidden share is the largest of the three replays.
``--quick``: fewer conversations, 4-byte tokens (a few minutes).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import mean
from typing import Any

import anyio
from bench_economics import END_ONLY, REAL, CountOnce

from ctxmw.replay import ReplayResult, load_transcript, replay
from ctxmw.replay.caching import CACHING_MODELS
from ctxmw.replay.coding import coding_session, swe_run
from ctxmw.telemetry.counters import ApproxCounter, LiteLLMCounter, TokenCounter
from ctxmw.types import Messages

DEFAULT = "default"
OFFLOAD = "offload,shorten_tools_economic,inbox,cache_breakpoints"
BASELINES = ("shorten_tools_epoch_increment", "clear_tool_results")
LISTS = [DEFAULT, *BASELINES, "shorten_tools_epoch", "shorten_tools", "compact", OFFLOAD]
SETS = ("long real", "long generated", "short real", "short generated")
FULL = {"long": ((150, 300, 600, 1000), 2), "swe": 30}
QUICK = {"long": ((150, 400), 1), "swe": 8}
AGES = (5, 10, 20, 40, 80)


@dataclass
class Row:
    """One conversation: cost per list and caching model, its optimum, what each list hid."""

    set: str
    name: str
    calls: int
    peak: int
    references: int
    cost: dict[str, dict[str, float]]
    optimal: dict[str, float]
    hidden: dict[str, float]
    recoverable: dict[str, float]
    lost: list[tuple[str, int, str, bool]] = field(default_factory=list)
    """The default's hidden references: (string, age in tool results, source shown, recoverable)."""

    def ratio(self, name: str, key: str) -> float:
        return self.cost[name][key] / self.cost["none"][key]


async def measure(set_name: str, name: str, messages: Messages, model: str, counter: Any) -> Row:
    """Replay one conversation through every list (and the default's two other columns)."""
    one = {name: messages}
    main = await replay(one, LISTS, model=model, counter=counter, settings=END_ONLY)
    kw: dict[str, Any] = {"model": model, "counter": counter, "optimal": False}
    auto = await replay(one, [DEFAULT], settings={"cache_rule": "openai"}, **kw)
    marked = await replay(one, [DEFAULT], settings={"economic_head_mark": True}, **kw)
    row = _row(set_name, main, messages)
    row.cost[DEFAULT]["auto"] = auto.strategies[DEFAULT].cost["auto"]
    row.cost[DEFAULT]["breakpoints"] = marked.strategies[DEFAULT].cost["breakpoints"]
    for other in (auto, marked):
        s = other.strategies[DEFAULT]
        row.hidden[DEFAULT] = max(row.hidden[DEFAULT], s.hidden_share)
    return row


def _row(set_name: str, main: ReplayResult, messages: Messages) -> Row:
    figures = main.strategies
    best = main.optimal
    assert best is not None
    return Row(
        set_name,
        main.transcripts[0],
        main.calls,
        figures["none"].prompt_tokens_peak,
        figures["none"].references,
        {name: dict(s.cost) for name, s in figures.items()},
        dict(best.cost),
        {name: s.hidden_share for name, s in figures.items()},
        {name: s.recoverable_share for name, s in figures.items()},
        _lost(main, messages),
    )


def _lost(main: ReplayResult, messages: Messages) -> list[tuple[str, int, str, bool]]:
    results = [0]
    for msg in messages:
        results.append(results[-1] + (msg.get("role") == "tool"))
    return [
        (
            item.text,
            results[c.message_index] - results[item.source],
            item.source_shown,
            item.recoverable,
        )
        for c in main.strategies[DEFAULT].calls
        for item in c.loss.lost
    ]


async def load(quick: bool) -> dict[str, dict[str, Messages]]:
    """The four sets, by name: each a mapping of conversation names to messages."""
    plan = QUICK if quick else FULL
    lengths, seeds = plan["long"]
    sets: dict[str, dict[str, Messages]] = {name: {} for name in SETS}
    for n in lengths:  # type: ignore[union-attr]
        for seed in range(seeds):  # type: ignore[arg-type]
            sets["long generated"][f"coding:{n}:seed={seed}"] = coding_session(n, seed=seed)
    for seed in range(plan["swe"]):  # type: ignore[arg-type]
        sets["short generated"][f"swe:seed={seed}"] = swe_run(seed)
    if not REAL.is_dir():
        print(f"(no real transcripts at {REAL}: generated sets only)", file=sys.stderr)
        return sets
    for path in sorted(REAL.glob("*.jsonl")):
        found = await load_transcript(path)
        target = "long real" if path.name.startswith("cc_") else "short real"
        for name, messages in list(found.items())[: 4 if quick else None]:
            sets[target][name.rsplit("/", 1)[-1]] = messages
    return sets


def run(sets: dict[str, dict[str, Messages]], model: str, quick: bool, jobs: int) -> list[Row]:
    work = [(s, n, m) for s, convos in sets.items() for n, m in convos.items()]
    if jobs > 1:
        return _in_parallel(work, model, quick, jobs)
    counter = _counter(quick)
    rows, started = [], time.perf_counter()
    for set_name, name, messages in work:
        rows.append(anyio.run(measure, set_name, name, messages, model, counter))
        print(
            f"  ({len(rows)}/{len(work)} {name}: {time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
        )
    return rows


def _counter(quick: bool) -> TokenCounter:
    return CountOnce(ApproxCounter() if quick else LiteLLMCounter())


def _one(set_name: str, name: str, messages: Messages, model: str, quick: bool) -> Row:
    return anyio.run(measure, set_name, name, messages, model, _counter(quick))


def _in_parallel(
    work: list[tuple[str, str, Messages]], model: str, quick: bool, jobs: int
) -> list[Row]:
    from concurrent.futures import ProcessPoolExecutor, as_completed

    order = sorted(range(len(work)), key=lambda i: -len(work[i][2]))
    done: dict[int, Row] = {}
    with ProcessPoolExecutor(jobs) as pool:
        futures = {pool.submit(_one, *work[i], model, quick): i for i in order}
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            print(f"  ({len(done)}/{len(work)} {work[futures[future]][1]})", file=sys.stderr)
    return [done[i] for i in range(len(work))]


# --- the report ---------------------------------------------------------------------------


def report(rows: Sequence[Row], elapsed: float) -> None:
    print(f"{len(rows)} conversations, {elapsed:.0f} s")
    for set_name in SETS:
        subset = [r for r in rows if r.set == set_name]
        if subset:
            _table(set_name, subset)
    goals(rows)
    for set_name in SETS:
        subset = [r for r in rows if r.set == set_name]
        if subset:
            why(set_name, subset)


def _table(set_name: str, rows: Sequence[Row]) -> None:
    calls = sorted(r.calls for r in rows)
    peaks = sorted(r.peak for r in rows)
    refs = sum(r.references for r in rows)
    print(
        f"\n{set_name}: {len(rows)} conversation(s), {calls[0]}-{calls[-1]} calls, none's peak "
        f"{peaks[0]:,}-{peaks[-1]:,} tokens, {refs:,} references"
    )
    head = "".join(f"{k:>16}" for k in CACHING_MODELS)
    print(f"{'x none: worst / aggregate':<30}{head}{'hidden':>18}{'recoverable':>18}")
    for name in rows[0].cost:
        cells = "".join(
            f"{max(r.ratio(name, k) for r in rows):>9.3f} /{_agg(rows, name, k):>6.3f}"
            for k in CACHING_MODELS
        )
        hidden = [r.hidden[name] for r in rows]
        recov = [r.recoverable[name] for r in rows]
        print(
            f"{_short(name):<30}{cells}{max(hidden):>10.2%} /{mean(hidden):>6.2%}"
            f"{max(recov):>10.2%} /{mean(recov):>6.2%}"
        )
    best = "".join(
        f"{max(r.optimal[k] / r.cost['none'][k] for r in rows):>9.3f} /"
        f"{sum(r.optimal[k] for r in rows) / _sum(rows, 'none', k):>6.3f}"
        for k in CACHING_MODELS
    )
    print(f"{'optimum (default tiers)':<30}{best}")
    print(f"{'':<30}{'(hidden, recoverable: worst / mean per conversation)':>84}")
    gap = "  ".join(f"{k} {_opt(rows, DEFAULT, k):.3f}" for k in CACHING_MODELS)
    print(f"default x optimum, aggregate: {gap}")


def _short(name: str) -> str:
    return "offload,default" if name == OFFLOAD else name


def _sum(rows: Sequence[Row], name: str, key: str) -> float:
    return sum(r.cost[name][key] for r in rows)


def _agg(rows: Sequence[Row], name: str, key: str) -> float:
    return _sum(rows, name, key) / _sum(rows, "none", key)


def _opt(rows: Sequence[Row], name: str, key: str) -> float:
    return _sum(rows, name, key) / sum(r.optimal[key] for r in rows)


def _verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def goals(rows: Sequence[Row]) -> None:
    print("\ngoals (the default):")
    long = [r for r in rows if r.set.startswith("long")]
    short = [r for r in rows if r.set.startswith("short")]
    if long:
        _long_goal(long)
    if short:
        _short_goal(short)
    for set_name in SETS:
        subset = [r for r in rows if r.set == set_name]
        if subset:
            gaps = {k: _opt(subset, DEFAULT, k) for k in CACHING_MODELS}
            each = ", ".join(f"{k} {v:.3f}" for k, v in gaps.items())
            ok = max(gaps.values()) <= 1.10
            print(f"  {set_name}: within 1.10x of the optimum of its tiers: {each}  {_verdict(ok)}")


def _long_goal(long: Sequence[Row]) -> None:
    worst = {k: max(r.ratio(DEFAULT, k) for r in long) for k in CACHING_MODELS}
    cost_ok = max(worst.values()) <= 0.50
    hidden = max(r.hidden[DEFAULT] for r in long)
    above = {b: sum(r.hidden[DEFAULT] >= r.hidden[b] for r in long) for b in BASELINES}
    ok = cost_ok and hidden <= 0.01 and not any(above.values())
    each = ", ".join(f"{k} {v:.3f}" for k, v in worst.items())
    print(f"  long sessions ({len(long)}): cost <= 0.50x none per session: worst {each}")
    print(f"    hidden <= 1.0% per session: worst {hidden:.2%}")
    for b in BASELINES:
        print(f"    hides less than {b} on each session: as much or more on {above[b]}/{len(long)}")
    print(f"    {_verdict(ok)}")


def _short_goal(short: Sequence[Row]) -> None:
    worst = {k: max(r.ratio(DEFAULT, k) for r in short) for k in CACHING_MODELS}
    agg = {k: _agg(short, DEFAULT, k) for k in CACHING_MODELS}
    over = sum(r.ratio(DEFAULT, k) > 1.02 for r in short for k in CACHING_MODELS)
    hidden = max(r.hidden[DEFAULT] for r in short)
    ok = max(worst.values()) <= 1.02 and max(agg.values()) <= 0.95 and hidden <= 0.005
    print(
        f"  short runs ({len(short)}): every conversation <= 1.02x none: worst "
        + ", ".join(f"{k} {v:.3f}" for k, v in worst.items())
        + f" ({over} of {len(short) * len(CACHING_MODELS)} pairs over)"
    )
    print("    aggregate <= 0.95x none: " + ", ".join(f"{k} {v:.3f}" for k, v in agg.items()))
    print(f"    hidden <= 0.5% per conversation: worst {hidden:.2%}")
    print(f"    {_verdict(ok)}")


# --- why the default hides what it hides ------------------------------------------------------

_KINDS = (
    ("line ref", re.compile(r"[A-Za-z].*:\d+")),
    ("path", re.compile(r"/")),
    ("number", re.compile(r"^[\d.:\-]+$")),
    ("dotted name", re.compile(r"\.")),
    ("snake_case", re.compile(r"_")),
    ("CamelCase", re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")),
)


def kind_of(text: str) -> str:
    return next((name for name, pattern in _KINDS if pattern.search(text)), "other")


def why(set_name: str, rows: Sequence[Row]) -> None:
    lost = [item for r in rows for item in r.lost]
    refs = sum(r.references for r in rows)
    print(f"\nwhy the default hides ({set_name}): {len(lost)} of {refs} references hidden")
    if not lost:
        return
    shown = Counter(item[2] for item in lost)
    recov = sum(item[3] for item in lost)
    print(f"  their tool result was: {_shares(shown, len(lost))}; recoverable {recov}")
    print(f"  age of that result (tool results before the call): {_shares(_ages(lost), len(lost))}")
    print(f"  kind of string: {_shares(Counter(kind_of(i[0]) for i in lost), len(lost))}")
    worst = max(rows, key=lambda r: r.hidden[DEFAULT])
    sample = list(dict.fromkeys(item[0] for item in worst.lost))[:8]
    print(f"  worst session {worst.name} ({worst.hidden[DEFAULT]:.2%}), e.g.: {', '.join(sample)}")


def _ages(lost: Sequence[tuple[str, int, str, bool]]) -> Counter[str]:
    ages: Counter[str] = Counter()
    for _, age, _, _ in lost:
        bound = next((b for b in AGES if age <= b), None)
        ages[f"<={bound}" if bound is not None else f">{AGES[-1]}"] += 1
    return ages


def _shares(counts: Counter[str], total: int) -> str:
    return ", ".join(
        f"{k} {n} ({n / total:.0%})" for k, n in sorted(counts.items(), key=lambda kv: -kv[1])
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer conversations, 4-byte tokens")
    parser.add_argument("--model", default="anthropic/claude-sonnet-4-5")
    parser.add_argument(
        "--jobs", type=int, default=1, help="conversations at once, one process each"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sets = anyio.run(load, args.quick)
    total = sum(len(s) for s in sets.values())
    print(f"replaying {total} conversations through {len(LISTS) + 1} lists", file=sys.stderr)
    rows = run(sets, args.model, args.quick, args.jobs)
    report(rows, time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
