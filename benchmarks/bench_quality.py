"""Cost and loss side by side, read-backs charged: what each strategy list and each design of the
default costs, and what it hides from the model.

Not a test: run ``nice -n 15 python benchmarks/bench_quality.py [--quick] [--jobs 2]``. Every
figure is measured in this run with ``ctxmw.replay`` (litellm's prices of ``--model``): cost as a
ratio to ``none`` under every caching model replay knows, a read-back (the model calling
``ctxmw_expand`` for what its next action needs and the prompt shows only behind a handle)
charged as one more call (:mod:`ctxmw.replay.readbacks`), and the share of references
(:mod:`ctxmw.replay.loss`) the prompt no longer showed (hidden) or showed only behind a handle
(recoverable).

Four sets: the two real Claude Code sessions in ``../shared/data/transcripts`` (long real), the
generated long coding sessions of 150-1,000 calls (:func:`ctxmw.replay.coding.coding_session`),
the real mini-swe-agent runs (short real), and generated SWE-bench-like runs of 30-120 calls
(:func:`ctxmw.replay.coding.swe_run`). Printed: a table per set; the long sessions again with a
constant head of :data:`HEAD` tokens (the system prompt and tools real agents send); the
frontier over the long sessions (one point per registered list and per design of the default
tried, under breakpoint caching, hidden shares included: a point is on it when no other is as
cheap, hides as little and keeps the short runs as cheap, one of the three strictly); the
goals, met or not; where the default's hidden references came from.

The default's columns: ``auto`` replayed with ``cache_rule=openai``, ``breakpoints`` as the
default chain runs (``cache_breakpoints`` marks the head), ``end_breakpoint`` with
``economic_head_mark=False`` (a client marking only each prompt's end); its hidden share is the
largest of the three. ``--quick``: fewer conversations, 4-byte tokens.
"""

from __future__ import annotations

import argparse
import pickle
import re
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
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
ECONOMIC = (DEFAULT, OFFLOAD)
BASELINES = ("shorten_tools_epoch_increment", "clear_tool_results")
LISTS = [DEFAULT, *BASELINES, "shorten_tools_epoch", "shorten_tools", "compact", OFFLOAD]
SETS = ("long real", "long generated", "short real", "short generated")
FULL = {"long": ((150, 300, 600, 1000), 2), "swe": 30}
QUICK = {"long": ((150, 400, 1000), 1), "swe": 8}
AGES = (5, 10, 20, 40, 80)
HEAD = 18_000
"""Tokens of the constant head of the second long table (Claude Code sends 15-20k)."""
BREAKPOINTS = "breakpoints"
"""The caching model the long-session goals and the frontier are stated under."""

_D = DEFAULT
DESIGNS: dict[str, tuple[str, Mapping[str, Any]]] = {
    "old default: 20 full, 1,200 chars, no handles": (
        _D,
        {
            "economic_full_tool_calls": 20,
            "economic_compacted_result_chars": 1200,
            "readback": False,
            "economic_guard": 1.05,
        },
    ),
    "no read-back handles": (_D, {"readback": False}),
    "2 full": (_D, {"economic_full_tool_calls": 2}),
    "5 full": (_D, {"economic_full_tool_calls": 5}),
    "10 full": (_D, {"economic_full_tool_calls": 10}),
    "150 chars": (_D, {"economic_compacted_result_chars": 150}),
    "600 chars": (_D, {"economic_compacted_result_chars": 600}),
    "1,200 chars": (_D, {"economic_compacted_result_chars": 1200}),
    "40 compacted": (_D, {"economic_compacted_tool_calls": 40}),
    "60 compacted": (_D, {"economic_compacted_tool_calls": 60}),
    "120 compacted": (_D, {"economic_compacted_tool_calls": 120}),
    "break-even 1.0": (_D, {"economic_break_even": 1.0}),
    "break-even 2.0": (_D, {"economic_break_even": 2.0}),
    "break-even 4.0": (_D, {"economic_break_even": 4.0}),
    "guard 1.02": (_D, {"economic_guard": 1.02}),
    "no guard": (_D, {"economic_guard": None}),
    "offload over 8,000 tokens first": (OFFLOAD, {"offload_threshold": 8000}),
}
"""The designs tried: the strategy list and the settings each changes (the frontier's points)."""


@dataclass
class Figures:
    """One strategy list (or design) on one conversation."""

    cost: dict[str, float]
    hidden: float
    recoverable: float
    readbacks: int
    hidden_here: float = 0.0
    """The hidden share under breakpoint caching alone (``hidden`` of the default's lists is the
    largest of the three caching models): the frontier and dominance compare every point on it."""


@dataclass
class Row:
    """One conversation: every list and design, its optimum, what the default hid and why."""

    set: str
    name: str
    calls: int
    peak: int
    references: int
    none: dict[str, float]
    lists: dict[str, Figures]
    optimal: dict[str, float]
    designs: dict[str, Figures] = field(default_factory=dict)
    head: dict[str, Figures] = field(default_factory=dict)
    head_none: dict[str, float] = field(default_factory=dict)
    lost: list[tuple[str, int, str, bool]] = field(default_factory=list)
    """The default's hidden references: (string, age in tool results, source shown, recoverable)."""

    def ratio(self, name: str, key: str) -> float:
        return self.lists[name].cost[key] / self.none[key]


def _figures(result: ReplayResult, name: str) -> Figures:
    s = result.strategies[name]
    return Figures(
        dict(s.cost), s.hidden_share, s.recoverable_share, s.readback_calls, s.hidden_share
    )


async def measure(set_name: str, name: str, messages: Messages, model: str, counter: Any) -> Row:
    """Replay one conversation through every list, the default's columns and, for a long
    session, every design and the lists with a head."""
    one = {name: messages}
    kw: dict[str, Any] = {"model": model, "counter": counter, "optimal": False}
    main = await replay(one, LISTS, model=model, counter=counter)
    auto = await replay(one, ECONOMIC, settings={"cache_rule": "openai"}, **kw)
    ends = await replay(one, ECONOMIC, settings=END_ONLY, **kw)
    lists = {n: _figures(main, n) for n in main.strategies if n != "none"}
    for n in ECONOMIC:
        lists[n].cost["auto"] = auto.strategies[n].cost["auto"]
        lists[n].cost["end_breakpoint"] = ends.strategies[n].cost["end_breakpoint"]
        others = (auto.strategies[n], ends.strategies[n])
        lists[n].hidden = max(lists[n].hidden, *(s.hidden_share for s in others))
    none = main.strategies["none"]
    assert main.optimal is not None
    row = Row(
        set_name,
        name,
        main.calls,
        none.prompt_tokens_peak,
        none.references,
        dict(none.cost),
        lists,
        dict(main.optimal.cost),
        lost=_lost(main, messages),
    )
    for label, (chain, overrides) in DESIGNS.items():
        tried = await replay(one, [chain], settings=overrides, **kw)
        row.designs[label] = _figures(tried, chain)
    if set_name.startswith("long"):
        headed = await replay(one, [DEFAULT, *BASELINES, OFFLOAD], head_tokens=HEAD, **kw)
        row.head = {n: _figures(headed, n) for n in (DEFAULT, *BASELINES, OFFLOAD)}
        row.head_none = dict(headed.strategies["none"].cost)
    return row


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
    """Every conversation, longest first, ``jobs`` processes at once; progress on stderr."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    work = [(s, n, m) for s, convos in sets.items() for n, m in convos.items()]
    order = sorted(range(len(work)), key=lambda i: -len(work[i][2]))
    done: dict[int, Row] = {}
    started = time.perf_counter()
    with ProcessPoolExecutor(max(jobs, 1)) as pool:
        futures = {pool.submit(_one, *work[i], model, quick): i for i in order}
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            elapsed = time.perf_counter() - started
            what = work[futures[future]][1]
            print(f"  ({len(done)}/{len(work)} {what}: {elapsed:.0f} s)", file=sys.stderr)
    return [done[i] for i in range(len(work))]


def _counter(quick: bool) -> TokenCounter:
    return CountOnce(ApproxCounter() if quick else LiteLLMCounter())


def _one(set_name: str, name: str, messages: Messages, model: str, quick: bool) -> Row:
    return anyio.run(measure, set_name, name, messages, model, _counter(quick))


# --- the report ---------------------------------------------------------------------------


def report(rows: Sequence[Row], elapsed: float) -> None:
    print(f"{len(rows)} conversations, {elapsed:.0f} s")
    for set_name in SETS:
        subset = [r for r in rows if r.set == set_name]
        if subset:
            _table(set_name, subset)
    long = [r for r in rows if r.set.startswith("long")]
    if long:
        _head_table(long)
        _frontier(long, [r for r in rows if r.set.startswith("short")])
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
    print(
        f"{'x none: worst / aggregate':<30}{head}{'read-backs':>11}"
        f"{'hidden':>16}{'recoverable':>16}"
    )
    for name in rows[0].lists:
        label = _short(name)
        cells = "".join(
            f"{max(r.ratio(name, k) for r in rows):>9.3f} /{_agg(rows, name, k):>6.3f}"
            for k in CACHING_MODELS
        )
        hidden = [r.lists[name].hidden for r in rows]
        recov = [r.lists[name].recoverable for r in rows]
        reads = sum(r.lists[name].readbacks for r in rows)
        print(
            f"{label:<30}{cells}{reads:>11,}{max(hidden):>8.2%} /{mean(hidden):>6.2%}"
            f"{max(recov):>8.2%} /{mean(recov):>6.2%}"
        )
    best = "".join(
        f"{max(r.optimal[k] / r.none[k] for r in rows):>9.3f} /"
        f"{sum(r.optimal[k] for r in rows) / sum(r.none[k] for r in rows):>6.3f}"
        for k in CACHING_MODELS
    )
    print(f"{'optimum (the default design)':<30}{best}")
    print(f"{'':<30}{'(hidden, recoverable: worst / mean per conversation)':>91}")
    gap = "  ".join(f"{k} {_opt(rows, k):.3f}" for k in CACHING_MODELS)
    print(f"default x its optimum, aggregate: {gap}")


def _agg(rows: Sequence[Row], name: str, key: str) -> float:
    return sum(r.lists[name].cost[key] for r in rows) / sum(r.none[key] for r in rows)


def _opt(rows: Sequence[Row], key: str) -> float:
    return sum(r.lists[DEFAULT].cost[key] for r in rows) / sum(r.optimal[key] for r in rows)


def _head_table(rows: Sequence[Row]) -> None:
    k = BREAKPOINTS
    print(f"\nlong sessions with a constant head of {HEAD:,} tokens ({k}), x none per session:")
    for name in rows[0].head:
        cells = "  ".join(f"{r.head[name].cost[k] / r.head_none[k]:.3f}" for r in rows)
        agg = sum(r.head[name].cost[k] for r in rows) / sum(r.head_none[k] for r in rows)
        hidden = [r.head[name].hidden for r in rows]
        print(
            f"  {_short(name):<30} aggregate {agg:.3f}  hidden worst {max(hidden):.2%} mean "
            f"{mean(hidden):.2%}  each: {cells}"
        )


def _points(row: Row) -> dict[str, Figures]:
    """Every point of the frontier on one long session: the lists, then the designs."""
    return {**row.lists, **{f"design: {label}": f for label, f in row.designs.items()}}


def _dominates(a: Figures, b: Figures) -> bool:
    """``a`` is no dearer and hides no more than ``b``, and strictly better in one."""
    k = BREAKPOINTS
    no_worse = a.cost[k] <= b.cost[k] and a.hidden_here <= b.hidden_here
    return no_worse and (a.cost[k] < b.cost[k] or a.hidden_here < b.hidden_here)


def _frontier(rows: Sequence[Row], short: Sequence[Row]) -> None:
    k = BREAKPOINTS
    print(f"\nthe frontier over the {len(rows)} long sessions ({k}, read-backs charged):")
    print(
        f"  {'point':<46}{'aggregate':>10}{'worst':>8}{'hidden worst / mean':>21}"
        f"{'read-backs':>11}{'short runs: worst':>19}"
    )
    names = list(_points(rows[0]))
    summary: dict[str, tuple[float, ...]] = {}
    strict: dict[str, tuple[float, ...]] = {}
    for name in names:
        figs = [_points(r)[name] for r in rows]
        agg = sum(f.cost[k] for f in figs) / sum(r.none[k] for r in rows)
        worst = max(f.cost[k] / r.none[k] for f, r in zip(figs, rows, strict=True))
        hidden = [f.hidden_here for f in figs]
        reads = sum(f.readbacks for f in figs)
        brief = max(
            (_points(r)[name].cost[m] / r.none[m] for r in short for m in CACHING_MODELS),
            default=float("nan"),
        )
        summary[name] = (round(agg, 3), round(mean(hidden), 4), round(brief, 3))
        strict[name] = (*summary[name], round(max(hidden), 4))
        print(
            f"  {_short(name):<46}{agg:>10.3f}{worst:>8.3f}{max(hidden):>12.2%} /"
            f"{mean(hidden):>6.2%}{reads:>11,}{brief:>19.3f}"
        )
    for label, points in (("", summary), (", worst hidden", strict)):
        front = [n for n in names if not any(_beats(o, points[n]) for o in points.values())]
        print(
            f"  on the frontier (aggregate cost, mean hidden, worst short run{label}; as "
            f"printed): {', '.join(map(_short, front))}"
        )


def _beats(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """``a`` is no worse than ``b`` on every figure and better on one."""
    return all(x <= y for x, y in zip(a, b, strict=True)) and a != b


def _short(name: str) -> str:
    return name.replace(OFFLOAD, "offload,default")


def _verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def goals(rows: Sequence[Row]) -> None:
    print("\ngoals (the default, read-backs charged):")
    long = [r for r in rows if r.set.startswith("long")]
    short = [r for r in rows if r.set.startswith("short")]
    if long:
        _long_goal(long)
        _dominance_goal(long)
    if short:
        _short_goal(short)
    for set_name in SETS:
        subset = [r for r in rows if r.set == set_name]
        if subset:
            gaps = {k: _opt(subset, k) for k in CACHING_MODELS}
            each = ", ".join(f"{k} {v:.3f}" for k, v in gaps.items())
            ok = max(gaps.values()) <= 1.10
            print(
                f"  {set_name}: within 1.10x of the optimum of its design: {each}  {_verdict(ok)}"
            )


def _long_goal(long: Sequence[Row]) -> None:
    k = BREAKPOINTS
    hidden = {r.name: r.lists[DEFAULT].hidden for r in long}
    worst_hidden = max(hidden.values())
    print(
        f"  long sessions ({len(long)}): hidden <= 1.0% each: worst {worst_hidden:.2%} "
        f"({max(hidden, key=hidden.__getitem__)})  {_verdict(worst_hidden <= 0.01)}"
    )
    average = mean(hidden.values())
    print(f"    hidden <= 0.5% on average: {average:.2%}  {_verdict(average <= 0.005)}")
    agg = _agg(long, DEFAULT, k)
    print(f"    cost <= 0.60x none in aggregate ({k}): {agg:.3f}  {_verdict(agg <= 0.60)}")
    each = {r.name: r.ratio(DEFAULT, k) for r in long}
    over = [f"{n} {v:.3f}" for n, v in each.items() if v > 0.80]
    worst = max(each.values())
    print(
        f"    cost <= 0.80x none on each ({k}): worst {worst:.3f}; over: "
        f"{', '.join(over) or 'none'}  {_verdict(not over)}"
    )
    head_agg = sum(r.head[DEFAULT].cost[k] for r in long) / sum(r.head_none[k] for r in long)
    head_worst = max(r.head[DEFAULT].cost[k] / r.head_none[k] for r in long)
    head_hidden = max(r.head[DEFAULT].hidden for r in long)
    print(
        f"    beside, with a {HEAD:,}-token head: aggregate {head_agg:.3f}, worst "
        f"{head_worst:.3f}, hidden worst {head_hidden:.2%}"
    )


def _dominance_goal(long: Sequence[Row]) -> None:
    found = []
    for r in long:
        default = r.lists[DEFAULT]
        found += [
            f"{r.name}: {_short(n)}"
            for n, f in _points(r).items()
            if n != DEFAULT and _dominates(f, default)
        ]
    print(
        "  no registered list and no design tried dominates the default on a long session "
        f"({BREAKPOINTS}): {'; '.join(found) or 'none does'}  {_verdict(not found)}"
    )


def _short_goal(short: Sequence[Row]) -> None:
    worst = {k: max(r.ratio(DEFAULT, k) for r in short) for k in CACHING_MODELS}
    over = sum(r.ratio(DEFAULT, k) > 1.02 for r in short for k in CACHING_MODELS)
    hidden = max(r.lists[DEFAULT].hidden for r in short)
    ok = max(worst.values()) <= 1.02 and hidden <= 0.005
    print(
        f"  short runs ({len(short)}): every run <= 1.02x none under every caching model: worst "
        + ", ".join(f"{k} {v:.3f}" for k, v in worst.items())
        + f" ({over} of {len(short) * len(CACHING_MODELS)} pairs over)"
    )
    print(f"    hidden <= 0.5% on each: worst {hidden:.2%}  {_verdict(ok)}")


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
    gone = [item for item in lost if not item[3]]
    print(
        f"\nwhy the default hides ({set_name}): {len(gone)} of {refs} references hidden, "
        f"{len(lost) - len(gone)} recoverable by read-back"
    )
    if not gone:
        return
    shown = Counter(item[2] for item in gone)
    print(f"  their tool result was: {_shares(shown, len(gone))}")
    print(f"  age of that result (tool results before the call): {_shares(_ages(gone), len(gone))}")
    print(f"  kind of string: {_shares(Counter(kind_of(i[0]) for i in gone), len(gone))}")
    worst = max(rows, key=lambda r: r.lists[DEFAULT].hidden)
    sample = list(dict.fromkeys(item[0] for item in worst.lost if not item[3]))[:8]
    print(f"  worst {worst.name} ({worst.lists[DEFAULT].hidden:.2%}), e.g.: {', '.join(sample)}")


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
    parser.add_argument("--save", metavar="FILE", help="also keep the measured rows in FILE")
    parser.add_argument("--load", metavar="FILE", help="report the rows --save kept, no replay")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sets = anyio.run(load, args.quick)
    total = sum(len(s) for s in sets.values())
    print(
        f"replaying {total} conversations ({len(LISTS) + 1} lists, {len(DESIGNS)} designs)",
        file=sys.stderr,
    )
    if args.load:
        with open(args.load, "rb") as f:
            rows = pickle.load(f)
    else:
        rows = run(sets, args.model, args.quick, args.jobs)
    if args.save:
        with open(args.save, "wb") as f:
            pickle.dump(rows, f)
    report(rows, time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
