"""Cost of the default (``shorten_tools_economic``) beside ``none``, the offline optimum, the
seed's strategies and ``clear_tool_results``, over generated sessions of every length and the
real transcripts in ``../shared/data/transcripts``.

Not a test: run ``python benchmarks/bench_economics.py [--quick]``. Every figure is a ratio of
two costs measured in the same run (replayed with ``ctxmw.replay``, litellm's prices of
``--model``), so it means the same on any machine.

The generator (see ``docs/design/economics.md``): session lengths on a log grid from 20 to
1,000 tool calls; per session, a head (system prompt and tool definitions) of 2k, 20k or 60k
characters (a bare agent, a framework agent, a Claude Code-like prompt); tool outputs lognormal
with a median of about 250 characters and a log-sd of 1.4-2.0, capped at 60,000 characters;
arguments lognormal (median 80 characters, log-sd 1.3); up to a fifth of the turns make 2-3
parallel calls; 5% of the calls repeat an earlier one; 40% of the assistant turns say something;
a user follow-up about every 50 calls. The medians and spreads are those of the two real
transcripts (output medians 214 and 283 characters, log-sd 2.0 and 1.5; argument medians 61 and
121), so 73 calls peak near 30k tokens and 200 calls near 100k, as in the issue's measurements.

The ``auto`` column replays the default with ``cache_rule=openai`` (the session's caching rule is
one of its inputs); the breakpoint columns with the model's own rule, the ``breakpoints`` column
with ``economic_head_mark=True`` (its client runs ``cache_breakpoints``, which marks the head: the
default chain does, and the schedule infers it), the ``end_breakpoint`` column with
``economic_head_mark=False`` (its client marks only each prompt's end, so a move rewrites the
head); the visible results are the latter replay's.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ctxmw.messages.canonical import canonical_bytes
from ctxmw.replay import ReplayResult, load_transcript, replay
from ctxmw.replay.caching import CACHING_MODELS
from ctxmw.telemetry.counters import ApproxCounter, LiteLLMCounter, TokenCounter
from ctxmw.types import Messages

END_ONLY = {"economic_head_mark": False}
"""The main replay's client marks only each prompt's end (the ``end_breakpoint`` column)."""
LISTS = [
    "default",
    "shorten_tools",
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment",
    "clear_tool_results",
]
FULL_LENGTHS = (20, 30, 45, 73, 110, 160, 240, 400, 650, 1000)
QUICK_LENGTHS = (20, 45, 73, 160, 400)
REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
_WORDS = [
    "def",
    "return",
    "self",
    "value",
    "config",
    "path",
    "error",
    "result",
    "request",
    "token",
    "cache",
    "prompt",
    "message",
    "tool",
    "call",
    "agent",
    "test",
    "file",
    "line",
    "module",
    "import",
    "class",
    "async",
    "await",
    "data",
    "index",
    "offset",
    "limit",
    "status",
    "user",
    "model",
    "epoch",
    "window",
    "prefix",
    "budget",
    "record",
    "session",
    "strategy",
    "output",
    "input",
    "json",
    "list",
]


def session(n_calls: int, seed: int) -> Messages:
    """One generated agent session of ``n_calls`` completed tool calls (module docstring)."""
    rng = random.Random(f"{n_calls}:{seed}")
    head = rng.choice((2_000, 20_000, 60_000))
    out_median, out_sd = math.exp(rng.gauss(math.log(250), 0.4)), rng.uniform(1.4, 2.0)
    parallel = rng.uniform(0.0, 0.2)
    msgs: Messages = [
        {"role": "system", "content": _text(rng, head)},
        {"role": "user", "content": _text(rng, rng.randrange(80, 600))},
    ]
    made: list[tuple[str, str]] = []
    done = 0
    while done < n_calls:
        width = min(rng.choice((2, 3)) if rng.random() < parallel else 1, n_calls - done)
        calls = []
        for _ in range(width):
            done += 1
            if made and rng.random() < 0.05:
                name, args = rng.choice(made)
            else:
                size = int(min(rng.lognormvariate(math.log(80), 1.3), 8_000))
                name = rng.choice(("bash", "read_file", "grep", "edit_file", "list_dir"))
                args = json.dumps({"input": _text(rng, size), "n": done})
                made.append((name, args))
            fn = {"name": name, "arguments": args}
            calls.append({"id": f"call_{done:05d}", "type": "function", "function": fn})
        say = _text(rng, int(rng.lognormvariate(math.log(60), 1.0))) if rng.random() < 0.4 else None
        msgs.append({"role": "assistant", "content": say, "tool_calls": calls})
        for tc in calls:
            size = int(min(rng.lognormvariate(math.log(out_median), out_sd), 60_000))
            msgs.append({"role": "tool", "tool_call_id": tc["id"], "content": _text(rng, size)})
        if rng.random() < 1 / 50:
            msgs.append({"role": "assistant", "content": _text(rng, 200)})
            msgs.append({"role": "user", "content": _text(rng, rng.randrange(40, 400))})
    msgs.append({"role": "assistant", "content": "Done."})
    return msgs


def _text(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    total = 0
    while total < chars:
        word = rng.choice(_WORDS)
        words.append(word if len(words) % 12 else "\n" + word)
        total += len(word) + 1
    return " ".join(words)[:chars]


class CountOnce:
    """A token counter that counts each distinct message once for the whole benchmark.

    Every replay (each strategy list, each variant) would otherwise tokenize the same messages
    again; with litellm's tokenizer that is most of the run.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self._counter = counter
        self._tokens: dict[tuple[str, bytes], int] = {}

    def message_tokens(self, model: str, message: Mapping[str, Any]) -> int:
        key = (model, canonical_bytes(message))
        if key not in self._tokens:
            self._tokens[key] = self._counter.message_tokens(model, message)
        return self._tokens[key]

    def tools_tokens(self, model: str, tools: Sequence[Mapping[str, Any]], has_system: bool) -> int:
        return self._counter.tools_tokens(model, tools, has_system)

    def overhead_tokens(self, model: str) -> int:
        return self._counter.overhead_tokens(model)


@dataclass
class Conversation:
    """One conversation's figures: cost per strategy and caching model, and what stays visible."""

    name: str
    calls: int
    peak: int
    cost: dict[str, dict[str, float]]
    optimal: dict[str, float]
    visible: dict[str, int]


async def measure(
    transcripts: dict[str, Messages],
    model: str,
    counter: TokenCounter,
    variants: Sequence[str] = (),
) -> list[Conversation]:
    """Replay every transcript; the default's ``auto`` column with the ``openai`` rule.

    One conversation at a time, with a progress line on stderr (the full run takes a while).
    Each variant (``KEY=VALUE``) adds a row: the default with that setting, in the same run.
    """
    rows = []
    started = time.perf_counter()
    for name, messages in transcripts.items():
        one = {name: messages}
        main = await replay(one, LISTS, model=model, counter=counter, settings=END_ONLY)
        row = _conversation(main)
        for variant in ("", *variants):
            await _default_row(row, one, model, counter, variant)
        rows.append(row)
        elapsed = time.perf_counter() - started
        print(f"  ({len(rows)}/{len(transcripts)} {name}: {elapsed:.0f} s)", file=sys.stderr)
    return rows


async def _default_row(
    row: Conversation, one: dict[str, Messages], model: str, counter: TokenCounter, variant: str
) -> None:
    """The default's costs (``auto`` with the ``openai`` rule, ``breakpoints`` told that the head
    is marked) with some settings changed.

    ``variant``: ``KEY=VALUE``, or several joined by commas (``KEY=VALUE,KEY=VALUE``).
    """
    overrides: dict[str, Any] = {}
    for part in variant.split(",") if variant else ():
        key, _, value = part.partition("=")
        overrides[key] = json.loads(value)
    label = f"default [{variant}]" if variant else "default"
    kwargs: dict[str, Any] = {"model": model, "counter": counter, "optimal": False}
    if overrides:  # the default itself is already in the main replay
        unmarked = {**END_ONLY, **overrides}
        figures = (await replay(one, ["default"], settings=unmarked, **kwargs)).strategies
        row.cost[label] = dict(figures["default"].cost)
        row.visible[label] = (
            figures["default"].retention.full + figures["default"].retention.compacted
        )
    auto = await replay(one, ["default"], settings={**overrides, "cache_rule": "openai"}, **kwargs)
    row.cost[label]["auto"] = auto.strategies["default"].cost["auto"]
    # The breakpoints column's client runs cache_breakpoints, which marks the head's end.
    marked = {"economic_head_mark": True, **overrides}
    bp = await replay(one, ["default"], settings=marked, **kwargs)
    row.cost[label]["breakpoints"] = bp.strategies["default"].cost["breakpoints"]


def _conversation(main: ReplayResult) -> Conversation:
    cost = {name: dict(s.cost) for name, s in main.strategies.items()}
    best = main.optimal
    assert best is not None
    visible = {
        name: s.retention.full + s.retention.compacted for name, s in main.strategies.items()
    }
    peak = main.strategies["none"].prompt_tokens_peak
    return Conversation(main.transcripts[0], main.calls, peak, cost, dict(best.cost), visible)


def report(rows: Sequence[Conversation], elapsed: float) -> None:
    """Print the figures per set and caching model, then the issue's goals, met or not."""
    short = [r for r in rows if r.calls < 150]
    long = [r for r in rows if r.calls >= 150 and r.peak >= 100_000]
    print(f"{len(rows)} conversations ({len(short)} short, {len(long)} long), {elapsed:.0f} s")
    for r in rows:
        ratios = " ".join(
            f"{k}={r.cost['default'][k] / r.cost['none'][k]:.3f}" for k in CACHING_MODELS
        )
        best = " ".join(f"{r.optimal[k] / r.cost['none'][k]:.3f}" for k in CACHING_MODELS)
        print(
            f"  {r.name:<42} calls {r.calls:>5} peak {r.peak:>8,}  default x none: {ratios}"
            f"  (optimum x none: {best})"
        )
        for label in (k for k in r.cost if k.startswith("default [")):
            each = " ".join(
                f"{k}={r.cost[label][k] / r.cost['none'][k]:.3f}" for k in CACHING_MODELS
            )
            print(f"    {label:<60} x none: {each}  visible {r.visible[label]}")
    for label, subset in (("short", short), ("long", long), ("all", rows)):
        if subset:
            _table(label, subset)
    _goals(rows, short, long)


def _table(label: str, rows: Sequence[Conversation]) -> None:
    print(f"\n{label} sessions ({len(rows)}): cost x none / x optimal, per caching model")
    print("(x optimal: the optimum of the default's tiers, for every row)")
    head = "".join(f"{k:>24}" for k in CACHING_MODELS)
    print(f"{'strategy':<40}{head}{'visible':>10}")
    for name in rows[0].cost:
        cells = "".join(
            f"{_sum(rows, name, k) / _sum(rows, 'none', k):>11.3f} / {_opt(rows, name, k):>6.3f}  "
            for k in CACHING_MODELS
        )
        print(f"{name:<40}{cells}{sum(r.visible[name] for r in rows):>10}")


def _sum(rows: Sequence[Conversation], name: str, key: str) -> float:
    return sum(r.cost[name][key] for r in rows)


def _opt(rows: Sequence[Conversation], name: str, key: str) -> float:
    return _sum(rows, name, key) / sum(r.optimal[key] for r in rows)


def _goals(
    rows: Sequence[Conversation], short: Sequence[Conversation], long: Sequence[Conversation]
) -> None:
    def verdict(ok: bool) -> str:
        return "MET" if ok else "NOT MET"

    print("\ngoals (default):")
    worst = max(r.cost["default"][k] / r.cost["none"][k] for r in rows for k in CACHING_MODELS)
    print(f"  per conversation <= 1.02x none: worst {worst:.3f}  {verdict(worst <= 1.02)}")
    for label in (k for k in rows[0].cost if k.startswith("default")):
        each = ", ".join(
            f"{k} {max(r.cost[label][k] / r.cost['none'][k] for r in rows):.3f}"
            for k in CACHING_MODELS
        )
        print(f"    {label}: worst {each}")
    if short:
        agg = max(_sum(short, "default", k) / _sum(short, "none", k) for k in CACHING_MODELS)
        print(f"  short sessions in aggregate <= 1.00x none: {agg:.3f}  {verdict(agg <= 1.0)}")
        for label in (k for k in rows[0].cost if k.startswith("default [")):
            each = ", ".join(
                f"{k} {_sum(short, label, k) / _sum(short, 'none', k):.3f}" for k in CACHING_MODELS
            )
            print(f"    {label}: {each}")
    if long:
        worst_long = max(
            r.cost["default"][k] / r.cost["none"][k] for r in long for k in CACHING_MODELS
        )
        print(
            f"  long sessions <= 0.55x none: worst {worst_long:.3f}  {verdict(worst_long <= 0.55)}"
        )
        for label in (k for k in rows[0].cost if k.startswith("default")):
            each = ", ".join(
                f"{k} {max(r.cost[label][k] / r.cost['none'][k] for r in long):.3f}"
                for k in CACHING_MODELS
            )
            print(f"    {label}: worst {each}")
    gap = max(_opt(rows, "default", k) for k in CACHING_MODELS)
    print(f"  within 1.10x of the optimum in aggregate: {gap:.3f}  {verdict(gap <= 1.10)}")
    cheaper = all(
        _sum(rows, "default", k) < _sum(rows, "clear_tool_results", k) for k in CACHING_MODELS
    )
    seen = sum(r.visible["default"] for r in rows)
    clear = sum(r.visible["clear_tool_results"] for r in rows)
    ratios = ", ".join(
        f"{k} {_sum(rows, 'default', k) / _sum(rows, 'clear_tool_results', k):.3f}"
        for k in CACHING_MODELS
    )
    ok = cheaper and seen >= 10 * clear
    print(
        f"  cheaper than clear_tool_results ({ratios} x) with >= 10x the results visible "
        f"({seen} vs {clear}): {verdict(ok)}"
    )
    # Below its 100k-token trigger clear_tool_results sends everything: where it acts.
    acts = [r for r in rows if r.visible["clear_tool_results"] < r.visible["none"]]
    if acts:
        cheaper = all(
            _sum(acts, "default", k) < _sum(acts, "clear_tool_results", k) for k in CACHING_MODELS
        )
        seen = sum(r.visible["default"] for r in acts)
        clear = sum(r.visible["clear_tool_results"] for r in acts)
        ok = cheaper and seen >= 10 * clear
        print(
            f"  the same where clear_tool_results clears ({len(acts)} conversations; "
            f"{seen} vs {clear} visible): {verdict(ok)}"
        )
        for label in (k for k in rows[0].cost if k.startswith("default [")):
            each = ", ".join(
                f"{k} {_sum(acts, label, k) / _sum(acts, 'clear_tool_results', k):.3f}"
                for k in CACHING_MODELS
            )
            seen = sum(r.visible[label] for r in acts)
            print(f"    {label}: {seen} visible; x clear_tool_results: {each}")


def _seeds(n_calls: int, quick: bool, seeds: int | None) -> int:
    """Sessions per length: one in --quick; else two, one past 400 calls (they take longest)."""
    if seeds is not None:
        return seeds
    return 1 if quick or n_calls > 400 else 2


async def _load(
    quick: bool, seeds: int | None, lengths: Sequence[int] | None, real: bool = True
) -> dict[str, Messages]:
    transcripts: dict[str, Messages] = {}
    for n in lengths or (QUICK_LENGTHS if quick else FULL_LENGTHS):
        for seed in range(_seeds(n, quick, seeds)):
            transcripts[f"generated:{n}:seed={seed}"] = session(n, seed)
    if not real:
        return transcripts
    for path in sorted(REAL.glob("*.jsonl")) if REAL.is_dir() else ():
        transcripts.update(await load_transcript(path))
    if not REAL.is_dir():
        print(f"(real transcripts not found at {REAL}; generated sessions only)", file=sys.stderr)
    return transcripts


def _one(name: str, messages: Messages, model: str, quick: bool, variants: list[str]) -> Any:
    counter = CountOnce(ApproxCounter() if quick else LiteLLMCounter())
    return anyio.run(measure, {name: messages}, model, counter, variants)[0]


def _in_parallel(
    transcripts: dict[str, Messages], model: str, quick: bool, variants: list[str], jobs: int
) -> list[Conversation]:
    """Every conversation in its own process (each counts its own tokens), in input order.

    The longest first, so the pool ends together; the figures do not depend on the order.
    """
    from concurrent.futures import ProcessPoolExecutor, as_completed

    order = sorted(transcripts, key=lambda n: -len(transcripts[n]))
    done: dict[str, Conversation] = {}
    with ProcessPoolExecutor(jobs) as pool:
        futures = {pool.submit(_one, n, transcripts[n], model, quick, variants): n for n in order}
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            print(f"  ({len(done)}/{len(order)} done)", file=sys.stderr)
    return [done[n] for n in transcripts]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="5 lengths, 4-byte tokens")
    parser.add_argument(
        "--seeds", type=int, default=None, help="sessions per length (default: 2, 1 past 400)"
    )
    parser.add_argument("--model", default="anthropic/claude-sonnet-4-5")
    parser.add_argument("--lengths", help="generated session lengths, comma-separated")
    parser.add_argument("--no-real", action="store_true", help="leave out the real transcripts")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="also replay the default with this setting (a JSON value; several joined by "
        "commas), side by side",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="conversations replayed at once, one process each"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    lengths = [int(n) for n in args.lengths.split(",")] if args.lengths else None
    transcripts: dict[str, Any] = anyio.run(
        _load, args.quick, args.seeds, lengths, not args.no_real
    )
    if args.jobs > 1:
        rows = _in_parallel(transcripts, args.model, args.quick, args.variant, args.jobs)
    else:
        counter: TokenCounter = CountOnce(ApproxCounter() if args.quick else LiteLLMCounter())
        rows = anyio.run(measure, transcripts, args.model, counter, args.variant)
    report(rows, time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
