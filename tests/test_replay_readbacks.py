"""Replay charges for reading back, and can send the constant head real agents send.

Hand-made transcripts: six file reads, then an answer quoting one line of one of them. The
default's tiers are tiny (one call full) and it moves at every call, so the first five reads
are compacted with a read-back handle by the time of the answer.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from ctxmw.replay import ReplayResult, prompts, replay
from ctxmw.replay.loss import ReferenceIndex
from ctxmw.replay.readbacks import head_message, readback_rounds
from ctxmw.telemetry.counters import ApproxCounter
from ctxmw.types import Messages

TINY = {
    "cache_rule": "none",  # nothing is cached, so the boundary moves at every call
    "economic_full_tool_calls": 1,
    "economic_compacted_tool_calls": 10,
    "economic_compacted_result_chars": 200,
}
POINT = 13  # the answer's call point


def reads_then_answer(answer: str) -> Messages:
    messages: Messages = [{"role": "user", "content": "Where is the value set?"}]
    for k in range(6):
        call = {
            "id": f"c{k}",
            "type": "function",
            "function": {"name": "Read", "arguments": json.dumps({"file_path": f"src/m{k}.py"})},
        }
        lines = "\n".join(f"{i:>6}→alpha_{k}_{i}_beta = {i}" for i in range(1, 80))
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": lines})
    messages.append({"role": "assistant", "content": f"It is set by {answer}."})
    return messages


def replayed(answer: str, **options: Any) -> ReplayResult:
    settings = {**TINY, **options.pop("settings", {})}
    return anyio.run(
        lambda: replay(
            {"t": reads_then_answer(answer)},
            ["default"],
            counter=ApproxCounter(),
            optimal=False,
            settings=settings,
            **options,
        )
    )


def test_a_reference_only_behind_a_handle_costs_one_more_call() -> None:
    figures = replayed("alpha_0_55_beta").strategies["default"]
    last = figures.calls[-1]
    assert last.message_index == POINT
    assert (last.loss.recoverable, last.loss.gone) == (1, 0)
    assert figures.readback_calls == 1
    assert last.readback is not None
    assert last.readback.calls == 1
    for key in ("auto", "breakpoints", "end_breakpoint"):
        assert figures.cost[key] == pytest.approx(
            figures.cost_without_readbacks[key] + last.readback.cost[key]
        )
    # The read-back call reads the point's whole prompt from the cache and writes the read-back.
    split = last.readback.splits["end_breakpoint"]
    assert split.reads == last.prompt_tokens - 3  # ApproxCounter's reply primer is not cached
    assert split.writes == last.readback.prompt_tokens - last.prompt_tokens
    assert last.readback.output_tokens > 0


def test_a_reference_shown_in_full_costs_nothing_more() -> None:
    figures = replayed("alpha_5_55_beta").strategies["default"]
    assert figures.readback_calls == 0
    assert figures.cost == figures.cost_without_readbacks


def test_a_reference_gone_for_good_costs_nothing_more_but_is_hidden() -> None:
    figures = replayed("alpha_0_55_beta", settings={"readback": False}).strategies["default"]
    assert figures.readback_calls == 0
    assert figures.calls[-1].loss.gone == 1


def rounds_for(answer: str, max_chars: int, **options: Any) -> list[Messages]:
    messages = reads_then_answer(answer)
    prompts = anyio.run(lambda: _prompt_at(messages, **options))
    lost = ReferenceIndex(messages).measure(POINT, prompts).lost
    shown = {i: m for i, m in enumerate(messages) if m.get("role") == "tool"}
    shown = {
        i: next(p for p in prompts if p.get("tool_call_id") == m["tool_call_id"])
        for i, m in shown.items()
    }
    return readback_rounds(messages, POINT, lost, shown, max_chars)


async def _prompt_at(messages: Messages, **options: Any) -> Messages:
    async for point, prompt in prompts(messages, "default", settings={**TINY, **options}):
        if point == POINT:
            return prompt
    raise AssertionError("no such call point")


def test_the_read_back_reads_the_gap_its_header_names() -> None:
    rounds = rounds_for("alpha_0_55_beta", 8000)
    assert len(rounds) == 1
    call, answer = rounds[0]
    args = json.loads(call["tool_calls"][0]["function"]["arguments"])
    assert (args["start"], args["end"]) == (8, 79)  # the gap: lines 1-7 are shown
    assert "    55→alpha_0_55_beta = 55" in answer["content"].split("\n")
    assert answer["tool_call_id"] == call["tool_calls"][0]["id"]


def test_a_gap_longer_than_a_page_takes_a_call_per_page() -> None:
    rounds = rounds_for("alpha_0_55_beta", 500)  # about 20 lines a page
    starts = [json.loads(r[0]["tool_calls"][0]["function"]["arguments"])["start"] for r in rounds]
    assert len(rounds) == 3
    assert starts[0] == 8
    assert starts == sorted(starts)
    assert "    55→alpha_0_55_beta = 55" in rounds[-1][1]["content"].split("\n")


def test_the_json_names_read_backs_and_the_cost_without_them() -> None:
    entry = replayed("alpha_0_55_beta").to_json()["strategies"]["default"]
    assert entry["readback_calls"] == 1
    assert entry["cost"]["auto"] > entry["cost_without_readbacks"]["auto"]


def test_the_head_is_sent_whole_at_every_call() -> None:
    bare = replayed("nothing").strategies["none"].calls
    headed = replayed("nothing", head_tokens=2000).strategies["none"].calls
    counter = ApproxCounter()
    head = counter.message_tokens("x", head_message(2000, counter, "x"))
    assert abs(head - 2000) <= 10
    growth = {b.prompt_tokens - a.prompt_tokens for a, b in zip(bare, headed, strict=True)}
    assert growth == {head}


def test_a_result_previewed_when_it_arrives_is_read_back_at_once() -> None:
    # offload shows the newest read only as a preview: the model reads on from where it stops,
    # though its next message quotes nothing of it.
    chain = "offload,shorten_tools_economic,inbox,cache_breakpoints"
    options = {"offload_threshold": 100, "offload_preview_chars": 200}
    result = anyio.run(
        lambda: replay(
            {"t": reads_then_answer("nothing")},
            [chain, "default"],
            counter=ApproxCounter(),
            optimal=False,
            settings={**TINY, **options},
        )
    )
    previewed = result.strategies[chain].calls
    assert all(c.readback is not None and c.readback.calls == 1 for c in previewed[1:])
    assert result.strategies["default"].readback_calls == 0  # late handles: fresh results whole
