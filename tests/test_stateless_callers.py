"""The caller's history is the truth: ctxmw under callers that re-send, edit and restart history.

These are the failures agent frameworks met (issue 11), with the scripted fake as the model:
each prompt is compared with what the caller passed, and the save_file stays one file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ctxmw
from ctxmw.testing import FakeCompletion, text, tool_calls

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"
SYSTEM = {"role": "system", "content": "Be brief."}
USER = {"role": "user", "content": "Add 2 and 3."}


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if not p.name.endswith(".lock"))


def as_sent(message: Any) -> dict[str, Any]:
    """A message as the wire sees it (a litellm Message dumped, None dropped)."""
    dump = message.model_dump() if hasattr(message, "model_dump") else dict(message)
    return {k: v for k, v in dump.items() if v is not None}


def framework_copy(message: Any) -> dict[str, Any]:
    """How a framework re-sends an assistant message: content None beside tool calls."""
    data = as_sent(message)
    out = {"role": data["role"], "content": data.get("content") or None}
    if data.get("tool_calls"):
        out["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": dict(c["function"])}
            for c in data["tool_calls"]
        ]
    return out


async def call(history: list[Any], fake: FakeCompletion, save_file: Path, **kw: Any) -> Any:
    return await ctxmw.acompletion(
        MODEL, history, save_file=save_file, completion=fake, prompt_strategies="none", **kw
    )


def with_empty_content(response: Any) -> Any:
    """llama.cpp's habit: content "" beside tool calls."""
    response.choices[0].message.content = ""
    return response


async def test_an_assistant_message_resent_with_content_none_is_sent_once(
    tmp_path: Path,
) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion()
    history: list[Any] = [SYSTEM, USER]
    passed: list[list[Any]] = []
    for turn in range(10):
        fake.queue(with_empty_content(tool_calls(("add", {"a": turn, "b": 1}))), text("Done."))
        passed.append(list(history))
        first = await call(history, fake, save_file, tools=[TOOL])
        history += [framework_copy(first.choices[0].message)]
        call_id = history[-1]["tool_calls"][0]["id"]
        history += [{"role": "tool", "tool_call_id": call_id, "content": str(turn + 1)}]
        passed.append(list(history))
        second = await call(history, fake, save_file, tools=[TOOL])
        history += [framework_copy(second.choices[0].message), {"role": "user", "content": "Again"}]
    assert fake.prompts == passed
    for prompt in fake.prompts:
        ctxmw.validate(prompt)
    assert files(tmp_path) == ["agent.jsonl", "agent.jsonl.ledger.jsonl"]
    roles = [m["role"] for m in await ctxmw.Session(MODEL, save_file=save_file).load()]
    assert roles.count("assistant") == 20


TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}


async def test_a_turn_restarted_after_a_provider_error_sends_only_the_callers_history(
    tmp_path: Path,
) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(
        with_empty_content(tool_calls(("add", {"a": 2, "b": 3}))),
        ConnectionError("provider down"),
        text("Let me try again."),
    )
    first = await call([SYSTEM, USER], fake, save_file, tools=[TOOL])
    call_message = framework_copy(first.choices[0].message)
    result = {"role": "tool", "tool_call_id": call_message["tool_calls"][0]["id"], "content": "5"}
    with pytest.raises(ConnectionError):
        await call([SYSTEM, USER, call_message, result], fake, save_file, tools=[TOOL])
    # The framework restarts the turn from the history before it.
    await call([SYSTEM, USER], fake, save_file, tools=[TOOL])
    assert fake.prompts[2] == [SYSTEM, USER]
    ctxmw.validate(fake.prompts[2])
    current = await ctxmw.Session(MODEL, save_file=save_file).load()
    assert [m["role"] for m in current] == ["system", "user", "assistant"]
    assert current[-1]["content"] == "Let me try again."
    assert files(tmp_path) == ["agent.jsonl", "agent.jsonl.ledger.jsonl"]


async def test_tool_items_the_caller_removed_are_not_resent(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(tool_calls(("add", {"a": 2, "b": 3})), text("5."), text("Fine."))
    first = await call([SYSTEM, USER], fake, save_file, tools=[TOOL])
    call_message = framework_copy(first.choices[0].message)
    secret = {
        "role": "tool",
        "tool_call_id": call_message["tool_calls"][0]["id"],
        "content": "SECRET 5",
    }
    second = await call([SYSTEM, USER, call_message, secret], fake, save_file, tools=[TOOL])
    # A privacy filter drops the tool items before the next turn.
    filtered = [
        SYSTEM,
        USER,
        framework_copy(second.choices[0].message),
        {"role": "user", "content": "Thanks"},
    ]
    await call(filtered, fake, save_file, tools=[TOOL])
    assert fake.prompts[2] == filtered
    assert "SECRET" not in json.dumps(fake.prompts[2])


async def test_a_moving_system_prompt_leaves_one_transcript_and_one_ledger(
    tmp_path: Path,
) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion()
    history: list[Any] = [USER]
    for n in range(100):
        fake.queue(text(f"answer {n}"))
        system = {"role": "system", "content": f"Current time: 10:{n:02d}."}
        reply = await call([system, *history], fake, save_file)
        assert fake.prompts[-1] == [system, *history]
        history += [framework_copy(reply.choices[0].message), {"role": "user", "content": str(n)}]
    assert files(tmp_path) == ["agent.jsonl", "agent.jsonl.ledger.jsonl"]
    # Each call records the one message that moved, not the whole history again.
    lines = save_file.read_text().splitlines()
    assert len(lines) < 100 * 5
    current = await ctxmw.Session(MODEL, save_file=save_file).load()
    assert current[0]["content"] == "Current time: 10:99."
    assert len(current) == 1 + len(history) - 1


async def test_the_loops_own_rounds_are_restored_for_a_caller_that_saw_only_the_answer(
    tmp_path: Path,
) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(tool_calls(("add", {"a": 2, "b": 3})), text("5"), text("Still 5."))
    first = await call([SYSTEM, USER], fake, save_file, tools=[add])
    history = [
        SYSTEM,
        USER,
        framework_copy(first.choices[0].message),
        {"role": "user", "content": "Sure?"},
    ]
    await call(history, fake, save_file, tools=[add])
    assert [m["role"] for m in fake.prompts[2]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    ctxmw.validate(fake.prompts[2])
