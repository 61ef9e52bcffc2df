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

from ctxmw.replay import ReplayResult, replay
from ctxmw.replay.readbacks import head_message, readback_round
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


def test_the_read_back_reads_the_lines_the_answer_needs() -> None:
    messages = reads_then_answer("alpha_0_55_beta")
    figures = replayed("alpha_0_55_beta").strategies["default"]
    extra = readback_round(messages, POINT, figures.calls[-1].loss.lost, 8000)
    call, answer = extra
    args = json.loads(call["tool_calls"][0]["function"]["arguments"])
    assert (args["start"], args["end"]) == (35, 75)
    assert "    55→alpha_0_55_beta = 55" in answer["content"].split("\n")
    assert answer["tool_call_id"] == call["tool_calls"][0]["id"]


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
