"""The read-back round through ``acompletion``, ``completion`` and a ``Session``: ctxmw answers
``ctxmw_expand`` itself; the caller gets the final reply only; every internal call is recorded."""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import pytest

import ctxmw
from ctxmw.context.readback import READBACK_TOOL, READBACK_TOOL_NAME
from ctxmw.runtime import _readback
from ctxmw.runtime.transcript import TranscriptFile
from ctxmw.testing import FakeCompletion, handles, readback, text, tool_call, tool_calls
from tests._readback import (
    MODEL,
    SMALL,
    TOOL,
    answered_lines,
    caller_copy,
    file_lines,
    handle_asked,
    handle_of,
    history,
    ledger,
    original,
    reads_shown,
)

pytestmark = pytest.mark.anyio


def check_answered_round(fake: FakeCompletion, messages: list[dict[str, Any]]) -> None:
    """The second call is the first's prompt plus the read-back and its answer: the exact
    lines of the original; both declare the read-back tool after the caller's."""
    first, second = fake.calls
    n = len(first["messages"])
    assert second["messages"][:n] == first["messages"]
    asked, answer = second["messages"][n:]
    assert answer == {"role": "tool", "tool_call_id": asked["tool_calls"][0]["id"], **answer}
    lines = original(messages, handle_asked(asked)).splitlines()
    assert answered_lines(answer["content"]) == lines[1:4]
    assert first["tools"] == second["tools"] == [TOOL, READBACK_TOOL]


def check_recorded(save_file: Path, messages: list[dict[str, Any]], reply: dict[str, Any]) -> None:
    """The save_file holds the read-back round beside the reply, outside the conversation;
    the ledger has a line per call, the extra one marked ``readback``."""
    lines = file_lines(save_file)
    at = lines.index({"ctxmw": "readback", "count": 2})
    assert lines[at + 1]["tool_calls"][0]["function"]["name"] == READBACK_TOOL_NAME
    assert lines[at + 2]["role"] == "tool"
    assert lines[at + 3]["content"] == reply["content"]
    assert [line["readback"] for line in ledger(save_file)] == [False, True]


async def test_acompletion_answers_a_read_back_and_returns_the_final_reply(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    save_file = tmp_path / "agent.jsonl"
    messages = history(8)
    before = copy.deepcopy(messages)
    fake = FakeCompletion(reads_shown(2, 4), text("done"))
    with caplog.at_level(logging.INFO, logger="ctxmw"):
        response = await ctxmw.acompletion(
            MODEL,
            messages,
            tools=[TOOL],
            save_file=save_file,
            completion=fake,
            strategy_options=SMALL,
        )
    calls = [
        r.getMessage().split(" session=")[0] for r in caplog.records if "session=" in r.getMessage()
    ]
    assert calls == ["ctxmw call 1", "ctxmw call 2 readback"]
    assert response.choices[0].message.content == "done"
    assert response.choices[0].message.tool_calls is None
    assert response.choices[0].finish_reason == "stop"
    assert messages == before  # the caller's messages are never touched
    check_answered_round(fake, messages)
    check_recorded(save_file, messages, caller_copy(response))
    current = await TranscriptFile(save_file).load()
    assert current == [*messages, caller_copy(response)]  # the round is no message of it


def test_completion_answers_a_read_back_too(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    messages = history(8)
    fake = FakeCompletion(reads_shown(2, 4), text("done"))
    response = ctxmw.completion(
        MODEL, messages, tools=[TOOL], save_file=save_file, completion=fake, strategy_options=SMALL
    )
    assert response.choices[0].message.content == "done"
    assert response.choices[0].message.tool_calls is None
    check_answered_round(fake, messages)
    check_recorded(save_file, messages, caller_copy(response))


async def test_the_next_call_carries_no_read_back_round(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    messages = history(3)
    options: dict[str, Any] = {
        "save_file": save_file,
        "prompt_strategies": "shorten_tools_economic",
    }
    asks = tool_calls(readback(handle_of(messages, "c1"), 2, 4))  # a result shown whole
    fake = FakeCompletion(asks, text("done"), text("bye"))
    response = await ctxmw.acompletion(MODEL, messages, tools=[TOOL], completion=fake, **options)
    later = [*messages, caller_copy(response), {"role": "user", "content": "thanks"}]
    last = await ctxmw.acompletion(MODEL, later, tools=[TOOL], completion=fake, **options)
    first, _, third = fake.prompts
    assert third[:-2] == first  # the round answered inside the first call is not carried
    assert [m["role"] for m in third[-2:]] == ["assistant", "user"]
    assert (await TranscriptFile(save_file).load()) == [*later, caller_copy(last)]


async def test_a_session_with_python_tools_answers_read_backs_outside_its_transcript(
    tmp_path: Path,
) -> None:
    def read(n: int) -> str:
        """Read a file."""
        return "\n".join(f"row {n}.{i}" for i in range(40))

    def reads_first_result(call: dict[str, Any]) -> Any:
        return tool_calls(readback(handle_of(call["messages"], "own1"), 10, 12))

    fake = FakeCompletion(
        tool_calls(tool_call("read", {"n": 1}, id="own1")), reads_first_result, text("row 1.9")
    )
    session = ctxmw.Session(MODEL, save_file=tmp_path / "a.jsonl", tools=[read], completion=fake)
    reply = await session.ask("What is on line 10?")
    assert reply.choices[0].message.content == "row 1.9"
    answer = fake.calls[2]["messages"][-1]
    assert answered_lines(answer["content"]) == [f"row 1.{i}" for i in range(9, 12)]
    assert [m["role"] for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    assert READBACK_TOOL_NAME not in str(session.messages)
    assert [c["tools"][-1] for c in fake.calls] == [READBACK_TOOL] * 3


async def test_a_model_that_keeps_reading_back_is_bounded(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_readback, "_warned", set())
    messages = history(8)
    bound = _readback.READBACK_ROUNDS
    fake = FakeCompletion(*[reads_shown(1, 1)] * (bound + 2))
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        response = await ctxmw.acompletion(
            MODEL, messages, tools=[TOOL], completion=fake, strategy_options=SMALL, session="b"
        )
    assert len(fake.calls) == bound + 2  # the answered ones, one refused, then no more
    refused = fake.calls[bound + 1]["messages"][-1]
    assert "not answered" in refused["content"]
    answered = fake.calls[bound]["messages"][-1]
    shown = handles(fake.calls[0]["messages"])[0]
    assert answered_lines(answered["content"]) == original(messages, shown).splitlines()[:1]
    assert response.choices[0].message.tool_calls is None
    assert response.choices[0].finish_reason == "stop"
    assert caplog.text.count("kept calling ctxmw_expand") == 1


async def test_with_readback_off_nothing_is_declared_or_answered() -> None:
    messages = history(3)
    call = readback(handle_of(messages, "c0"), 1, 2)
    fake = FakeCompletion(tool_calls(call))
    response = await ctxmw.acompletion(
        MODEL, messages, tools=[TOOL], completion=fake, strategy_options={"readback": False}
    )
    assert fake.calls[0]["tools"] == [TOOL]
    assert response.choices[0].message.tool_calls[0].function.name == READBACK_TOOL_NAME


async def test_a_callers_tool_named_ctxmw_expand_is_refused_where_ctxmw_declares_it() -> None:
    own = {"type": "function", "function": {"name": READBACK_TOOL_NAME, "parameters": {}}}
    with pytest.raises(ctxmw.UsageError, match="already named 'ctxmw_expand'"):
        await ctxmw.acompletion(MODEL, history(1), tools=[own], completion=FakeCompletion())
    fake = FakeCompletion(text("ok"))
    off = {"readback": False}
    await ctxmw.acompletion(MODEL, history(1), tools=[own], completion=fake, settings=off)
    assert fake.calls[0]["tools"] == [own]
