"""The offline optimum: exact against brute force over every schedule, and wired into replay."""

from __future__ import annotations

import itertools
import json
import re
from bisect import bisect_right
from typing import Any

import anyio
import pytest

from ctxmw import Settings
from ctxmw.messages.pairs import index_tools
from ctxmw.replay import call_points, replay
from ctxmw.replay.caching import (
    auto_split,
    body_tokens,
    breakpoint_minimum,
    end_breakpoint_split,
    model_prices,
)
from ctxmw.replay.loss import ReferenceIndex
from ctxmw.replay.optimal import optimal_schedule
from ctxmw.replay.readbacks import readback_rounds
from ctxmw.replay.synthetic import synthetic_transcript
from ctxmw.strategies._epochs import apply_plan
from ctxmw.strategies.shorten_tools_economic import boundary_plan
from ctxmw.telemetry.counters import ApproxCounter
from ctxmw.telemetry.prefix import PrefixTracker
from ctxmw.types import Messages, StrategyContext

MODEL = "anthropic/claude-sonnet-4-5"
TIERS = {
    "economic_full_tool_calls": 2,
    "economic_compacted_tool_calls": 3,
    "short_output_length": 60,
    "economic_compacted_result_chars": 60,
}


def schedule_cost(messages: Messages, moves: tuple[int, ...], s: Settings) -> dict[str, float]:
    """Price one schedule (the call points where the boundary moves) as replay prices it, its
    compacted results rendered as the default renders them (lines, read-back handles), and a
    read-back call wherever the next action needs what only a handle shows."""
    prices, counter = model_prices(MODEL), ApproxCounter()
    tracker, minimum = PrefixTracker(counter), breakpoint_minimum(MODEL)
    references = ReferenceIndex(messages)
    cost = {"auto": 0.0, "end_breakpoint": 0.0}
    for point in call_points(messages):
        sent = messages[:point]
        index = index_tools(sent)
        done = [p for p in moves if p <= point]
        prompt = sent
        if done:
            boundary = bisect_right([c.result_index for c in index.calls], done[-1] - 1)
            plan = boundary_plan(len(index.calls), boundary, 0, 1, s)
            ctx = StrategyContext(settings=s)
            lines, handles = s.economic_compacted_result_chars, s.readback
            prompt = apply_plan(sent, index, plan, ctx, "brute", lines=lines, handles=handles)
        r = tracker.observe(MODEL, prompt)
        cost["auto"] += prices.cost(r.prompt_tokens, auto_split(r))
        split = end_breakpoint_split(r, body_tokens(r), minimum)
        cost["end_breakpoint"] += prices.cost(r.prompt_tokens, split)
        lost = references.measure(point, prompt).lost
        shown = {
            i: m
            for m in prompt
            for i in range(len(sent))
            if m.get("role") == "tool" and sent[i].get("tool_call_id") == m.get("tool_call_id")
        }
        rounds = readback_rounds(messages, point, lost, shown, s.readback_max_chars)
        fork, extended = PrefixTracker(counter), list(prompt)
        fork.observe(MODEL, extended)
        for extra in rounds:
            extended += extra
            r = fork.observe(MODEL, extended)
            out = counter.message_tokens(MODEL, extra[0]) * prices.output
            cost["auto"] += prices.cost(r.prompt_tokens, auto_split(r)) + out
            split = end_breakpoint_split(r, body_tokens(r), minimum)
            cost["end_breakpoint"] += prices.cost(r.prompt_tokens, split) + out
    return cost


@pytest.mark.slow  # every one of the 2^T schedules
@pytest.mark.parametrize("seed", [4, 5])
def test_optimum_is_the_cheapest_of_every_schedule(seed: int) -> None:
    messages = synthetic_transcript(14, seed=seed)
    s = Settings(**TIERS)
    points = call_points(messages)
    assert 8 <= len(points) <= 9  # 2^9 schedules at most
    costs = [
        schedule_cost(messages, moves, s)
        for k in range(len(points) + 1)
        for moves in itertools.combinations(points, k)
    ]
    best = optimal_schedule(
        messages,
        points,
        model=MODEL,
        prices=model_prices(MODEL),
        counter=ApproxCounter(),
        settings=s,
        window=200_000,
        minimum=breakpoint_minimum(MODEL),
    )
    for key in ("auto", "end_breakpoint"):
        assert best.cost[key] == pytest.approx(min(c[key] for c in costs), rel=1e-9)
    assert max(best.moves.values()) >= 1  # not vacuous: the cheapest schedule does move
    # breakpoints is a lower bound: never above what the end-of-prompt marks cost.
    assert best.cost["breakpoints"] <= best.cost["end_breakpoint"] + 1e-12


def reads_citing_older_reads(n: int) -> Messages:
    """File reads; from the fourth on, each read's arguments cite a line three reads back."""
    messages: Messages = [{"role": "user", "content": "Trace the value."}]
    for k in range(n):
        args: dict[str, str] = {"file_path": f"src/m{k}.py"}
        if k >= 3:
            args["from"] = f"alpha_{k - 3}_{30 + k}_beta"
        call = {"id": f"c{k}", "type": "function", "function": {"name": "Read"}}
        call["function"]["arguments"] = json.dumps(args)
        body = "\n".join(f"{i:>6}→alpha_{k}_{i}_beta = {i}" for i in range(1, 60))
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": body})
    messages.append({"role": "assistant", "content": "Done."})
    return messages


def test_optimum_with_read_backs_is_the_cheapest_of_every_schedule() -> None:
    messages = reads_citing_older_reads(7)
    s = Settings(**{**TIERS, "economic_compacted_result_chars": 200})
    points = call_points(messages)
    costs = [
        schedule_cost(messages, moves, s)
        for k in range(len(points) + 1)
        for moves in itertools.combinations(points, k)
    ]
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "prices": model_prices(MODEL),
        "counter": ApproxCounter(),
        "settings": s,
        "window": 200_000,
        "minimum": breakpoint_minimum(MODEL),
    }
    best = optimal_schedule(messages, points, references=ReferenceIndex(messages), **kwargs)
    for key in ("auto", "end_breakpoint"):
        assert best.cost[key] == pytest.approx(min(c[key] for c in costs), rel=1e-9)
    # Not vacuous: some schedule pays read-backs, so pricing them changes the optimum.
    blind = optimal_schedule(messages, points, **kwargs)
    assert best.cost["end_breakpoint"] > blind.cost["end_breakpoint"]


@pytest.fixture(scope="module")
def figures() -> dict[str, Any]:
    transcripts = {"a": synthetic_transcript(150, seed=1), "b": synthetic_transcript(30, seed=2)}
    result = anyio.run(
        lambda: replay(transcripts, ["default", "shorten_tools_epoch"], counter=ApproxCounter())
    )
    return result.to_json()


def test_default_means_the_default_list(figures: dict[str, Any]) -> None:
    assert list(figures["strategies"]) == ["none", "default", "shorten_tools_epoch"]


def test_no_schedule_of_the_same_tiers_beats_the_optimum(figures: dict[str, Any]) -> None:
    ratio = figures["strategies"]["default"]["cost_ratio_to_optimal"]
    assert ratio["auto"] >= 1.0
    assert ratio["end_breakpoint"] >= 1.0
    assert figures["optimal"]["cost_ratio_to_none"]["auto"] <= 1.0


def test_per_transcript_holds_each_conversation(figures: dict[str, Any]) -> None:
    per = figures["per_transcript"]
    assert [entry["transcript"] for entry in per] == ["a", "b"]
    for key in ("auto", "breakpoints", "end_breakpoint"):
        total = sum(entry["strategies"]["default"]["cost"][key] for entry in per)
        assert total == pytest.approx(figures["strategies"]["default"]["cost"][key], abs=1e-5)
        best = sum(entry["optimal"]["cost"][key] for entry in per)
        assert best == pytest.approx(figures["optimal"]["cost"][key], abs=1e-5)
    assert set(per[0]["strategies"]["default"]) == set(figures["strategies"]["default"])


def test_the_table_shows_the_limit_as_a_row() -> None:
    from ctxmw.replay.format import format_table

    result = anyio.run(
        lambda: replay([synthetic_transcript(30, seed=2)], ["default"], counter=ApproxCounter())
    )
    rows: dict[str, str] = {}
    for line in format_table(result).splitlines():  # the cost table comes first
        rows.setdefault(line.split("  ")[0].strip(), line)
    assert "optimal (the limit)" in rows
    # Every cost cell: the dollars, x none, then x optimal (1.00x on the limit's own row).
    assert re.search(r"\$[\d.,]+ [\d.]+x [\d.]+x", rows["default"])
    cells = re.findall(r"\$[\d.,]+ [\d.]+x ([\d.]+x)", rows["optimal (the limit)"])
    assert cells == ["1.00x"] * 3
