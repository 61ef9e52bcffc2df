"""Read-backs beside the caller's own tool calls: the caller gets its own calls only; the next
prompts carry the read-backs, byte for byte, across calls and across a restart."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import ctxmw
from ctxmw.runtime import wrapper
from ctxmw.runtime.conversations import Conversations
from ctxmw.testing import FakeCompletion, readback, text, tool_call, tool_calls
from tests._readback import (
    MODEL,
    TOOL,
    answered_lines,
    caller_copy,
    file_lines,
    handle_of,
    history,
    no_readback_anywhere,
    original,
)

pytestmark = pytest.mark.anyio

CHAIN = "shorten_tools_economic"  # handles on; no moving cache marks to compare around


def mixed(messages: list[dict[str, Any]]) -> Any:
    """A reply calling the caller's ``read`` and reading lines 2-3 of result c1 back."""
    handle = handle_of(messages, "c1")
    return tool_calls(tool_call("read", {"n": 5}, id="own1"), readback(handle, 2, 3, id="rb1"))


def result_of(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": f"result of {call_id}"}


def spliced_at(prompt: list[dict[str, Any]]) -> int:
    """Where the reply carrying the read-back sits in a prompt."""
    return next(i for i, m in enumerate(prompt) if "rb1" in json.dumps(m.get("tool_calls")))


def check_splice(prompt: list[dict[str, Any]], messages: list[dict[str, Any]]) -> None:
    i = spliced_at(prompt)
    assert [c["id"] for c in prompt[i]["tool_calls"]] == ["own1", "rb1"]
    assert [m.get("tool_call_id") for m in prompt[i + 1 : i + 3]] == ["own1", "rb1"]
    lines = original(messages, handle_of(messages, "c1")).splitlines()
    assert answered_lines(prompt[i + 2]["content"]) == lines[1:3]
    ctxmw.validate(prompt)


async def three_calls(options: dict[str, Any]) -> tuple[FakeCompletion, list[Any]]:
    """A mixed reply, the caller's result for it, then one more turn; returns the histories."""
    messages = history(3)
    fake = FakeCompletion(mixed(messages), text("ok"), text("fine"))
    kwargs = {"tools": [TOOL], "completion": fake, "prompt_strategies": CHAIN, **options}
    first = await ctxmw.acompletion(MODEL, messages, **kwargs)
    message = first.choices[0].message
    assert [c.id for c in message.tool_calls] == ["own1"]
    assert first.choices[0].finish_reason == "tool_calls"
    second_history = [*messages, caller_copy(first), result_of("own1")]
    kept = copy.deepcopy(second_history)
    second = await ctxmw.acompletion(MODEL, second_history, **kwargs)
    assert second_history == kept  # never mutated
    third_history = [*second_history, caller_copy(second), {"role": "user", "content": "more"}]
    await ctxmw.acompletion(MODEL, third_history, **kwargs)
    return fake, [messages, second_history, third_history]


async def test_the_next_prompts_carry_the_read_back_pair_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake, (messages, _, later) = await three_calls({"save_file": save_file})
    first, second, third = fake.prompts
    assert no_readback_anywhere(first)
    check_splice(second, messages)
    assert json.dumps(third[: len(second)]) == json.dumps(second)  # the prefix holds
    lines = file_lines(save_file)
    assert {"ctxmw": "readback", "count": 2, "splice": True} in lines
    # Another process resuming the save_file sends the same prompt.
    monkeypatch.setattr(wrapper, "_conversations", Conversations())
    again = FakeCompletion(text("fine"))
    await ctxmw.acompletion(
        MODEL, later, tools=[TOOL], completion=again, prompt_strategies=CHAIN, save_file=save_file
    )
    assert json.dumps(again.prompts[0]) == json.dumps(third)


async def test_without_a_save_file_the_conversation_keeps_the_pair_in_memory() -> None:
    fake, (messages, _, _) = await three_calls({"session": "mixed-in-memory"})
    _, second, third = fake.prompts
    check_splice(second, messages)
    assert json.dumps(third[: len(second)]) == json.dumps(second)


async def test_a_caller_that_drops_the_reply_gets_a_valid_prompt_without_the_pair(
    tmp_path: Path,
) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake, (messages, _, _) = await three_calls({"save_file": save_file})
    fake.queue(text("restarted"))
    restarted = [*messages, {"role": "user", "content": "start over"}]
    await ctxmw.acompletion(
        MODEL,
        restarted,
        tools=[TOOL],
        completion=fake,
        prompt_strategies=CHAIN,
        save_file=save_file,
    )
    assert no_readback_anywhere(fake.prompts[-1])
    ctxmw.validate(fake.prompts[-1])


async def test_a_session_whose_caller_answers_its_calls_carries_the_pair() -> None:
    messages = history(3)
    fake = FakeCompletion(mixed(messages), text("ok"))
    session = ctxmw.Session(MODEL, tools=[TOOL], completion=fake, prompt_strategies=CHAIN)
    await session.run(messages)
    reply = await session.run([result_of("own1")])
    assert reply.choices[0].message.content == "ok"
    check_splice(fake.prompts[1], messages)
    assert no_readback_anywhere(session.messages)


async def test_the_tool_loop_runs_its_own_call_and_carries_the_pair() -> None:
    def read(n: int) -> str:
        """Read a file."""
        return f"result of own1 ({n})"

    messages = history(3)
    fake = FakeCompletion(mixed(messages), text("ok"))
    session = ctxmw.Session(MODEL, tools=[read], completion=fake, prompt_strategies=CHAIN)
    reply = await session.run(messages)
    assert reply.choices[0].message.content == "ok"
    check_splice(fake.prompts[1], messages)
    assert no_readback_anywhere(session.messages)
