"""ctxmw.acompletion: a drop-in for litellm.acompletion, one round or the tool loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ctxmw
from ctxmw import StrategyContext
from ctxmw.runtime.transcript import TranscriptFile
from ctxmw.telemetry.levers import conversation_key
from ctxmw.testing import FakeCompletion, text, tool_calls
from tests._lock import lock_is_free

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"
HISTORY = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def shout(messages: list[Any], ctx: StrategyContext) -> list[Any]:
    return [{**m, "content": m["content"].upper()} if m["role"] == "user" else m for m in messages]


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("agent*.jsonl"))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_exports_are_sorted_and_include_the_wrapper() -> None:
    assert ctxmw.__all__ == sorted(ctxmw.__all__)
    assert {"acompletion", "Session"} <= set(ctxmw.__all__)


async def test_without_tools_it_is_one_call_with_the_strategies_applied() -> None:
    response = text("Hello")
    fake = FakeCompletion(response)
    result = await ctxmw.acompletion(
        model=MODEL, messages=HISTORY, prompt_strategies=[shout], completion=fake, temperature=0.2
    )
    assert result is response
    sent = [HISTORY[0], {"role": "user", "content": "HI"}]
    assert fake.calls == [
        {
            "model": MODEL,
            "messages": sent,
            "temperature": 0.2,
            # OpenAI takes a prompt_cache_key: one per conversation, from its head (issue 15)
            "prompt_cache_key": conversation_key(sent),
        }
    ]
    assert HISTORY[1]["content"] == "Hi"  # the caller's messages are untouched


async def test_dict_tools_are_passed_through_and_not_run() -> None:
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    response = tool_calls(("lookup", {}))
    fake = FakeCompletion(response)
    result = await ctxmw.acompletion(
        MODEL, HISTORY, tools=[tool], completion=fake, prompt_strategies="none"
    )
    assert result is response
    assert fake.calls[0]["tools"] == [tool]
    assert len(fake.calls) == 1


async def test_litellm_errors_pass_through_unwrapped() -> None:
    litellm = ctxmw._litellm.load_litellm()  # after ctxmw: the cost map stays local
    error = litellm.RateLimitError(message="slow down", llm_provider="openai", model=MODEL)
    with pytest.raises(litellm.RateLimitError) as info:
        await ctxmw.acompletion(
            MODEL, HISTORY, completion=FakeCompletion(error), prompt_strategies="none"
        )
    assert info.value is error


async def test_with_callables_it_runs_the_loop() -> None:
    fake = FakeCompletion(tool_calls(("add", {"a": 2, "b": 3})), text("5"))
    result = await ctxmw.acompletion(
        MODEL, HISTORY, tools=[add], completion=fake, prompt_strategies="none"
    )
    assert result.choices[0].message.content == "5"
    assert fake.calls[1]["messages"][-1]["content"] == "5"


async def test_save_file_gets_the_history_and_the_answer(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    first = await ctxmw.acompletion(
        MODEL,
        HISTORY,
        save_file=save_file,
        completion=FakeCompletion(text("Hello!")),
        prompt_strategies="none",
    )
    assert read_jsonl(save_file) == [*HISTORY, {"role": "assistant", "content": "Hello!"}]
    # The litellm habit: pass the whole history again, the response's Message object included.
    history = [*HISTORY, first.choices[0].message, {"role": "user", "content": "Bye"}]
    await ctxmw.acompletion(
        MODEL,
        history,
        save_file=save_file,
        completion=FakeCompletion(text("Bye!")),
        prompt_strategies="none",
    )
    assert [m["content"] for m in read_jsonl(save_file)] == [
        "Be brief.",
        "Hi",
        "Hello!",
        "Bye",
        "Bye!",
    ]
    assert not (tmp_path / "agent.1.jsonl").exists()


async def test_an_edited_history_is_a_new_revision_of_the_same_file(tmp_path: Path) -> None:
    # Deliberately changed (issue 11): a diverged history used to archive the file as
    # agent.1.jsonl, agent.2.jsonl...; it is now a revision inside the one save_file.
    save_file = tmp_path / "agent.jsonl"
    await ctxmw.acompletion(
        MODEL,
        HISTORY,
        save_file=save_file,
        completion=FakeCompletion(text("A")),
        prompt_strategies="none",
    )
    old = save_file.read_text()
    edited = [HISTORY[0], {"role": "user", "content": "Hi, edited"}]
    await ctxmw.acompletion(
        MODEL,
        edited,
        save_file=save_file,
        completion=FakeCompletion(text("B")),
        prompt_strategies="none",
    )
    assert save_file.read_text().startswith(old)  # nothing overwritten
    session = ctxmw.Session(MODEL, save_file=save_file)
    assert [m["content"] for m in await session.load()] == ["Be brief.", "Hi, edited", "B"]
    await ctxmw.acompletion(
        MODEL,
        HISTORY[:1],
        save_file=save_file,
        completion=FakeCompletion(text("C")),
        prompt_strategies="none",
    )
    assert names(tmp_path) == ["agent.jsonl", "agent.jsonl.ledger.jsonl"]
    revisions = await TranscriptFile(save_file).revisions()
    assert [[m["content"] for m in r] for r in [*revisions.earlier, revisions.current]] == [
        ["Be brief.", "Hi", "A"],
        ["Be brief.", "Hi, edited", "B"],
        ["Be brief.", "C"],
    ]


async def test_stream_is_returned_and_saved_once_read(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(text("Hello there"))
    stream = await ctxmw.acompletion(
        MODEL, HISTORY, save_file=save_file, stream=True, completion=fake, prompt_strategies="none"
    )
    assert not lock_is_free(tmp_path / "agent.jsonl")
    assert not save_file.exists()
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Hello there"
    assert read_jsonl(save_file)[-1] == {"role": "assistant", "content": "Hello there"}
    assert lock_is_free(tmp_path / "agent.jsonl")


async def test_a_stream_closed_early_saves_nothing_and_releases(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    stream = await ctxmw.acompletion(
        MODEL,
        HISTORY,
        save_file=save_file,
        stream=True,
        completion=FakeCompletion(text("x")),
        prompt_strategies="none",
    )
    await stream.__anext__()
    await stream.aclose()
    assert not save_file.exists()
    assert lock_is_free(tmp_path / "agent.jsonl")


async def test_stream_with_python_tools_is_a_usage_error() -> None:
    with pytest.raises(ctxmw.UsageError, match="stream=True"):
        await ctxmw.acompletion(
            MODEL,
            HISTORY,
            tools=[add],
            stream=True,
            completion=FakeCompletion(),
            prompt_strategies="none",
        )


async def test_unknown_strategy_is_reported_before_any_call() -> None:
    fake = FakeCompletion(text("x"))
    with pytest.raises(ctxmw.UnknownStrategyError, match="no_such"):
        await ctxmw.acompletion(MODEL, HISTORY, completion=fake, prompt_strategies="no_such")
    assert fake.calls == []


async def test_an_unknown_strategy_in_the_metadata_is_named_there() -> None:
    fake = FakeCompletion(text("x"))
    options = {"ctxmw": {"prompt_strategies": "shorten_tool"}}
    with pytest.raises(ctxmw.UnknownStrategyError) as info:
        await ctxmw.acompletion(MODEL, HISTORY, completion=fake, metadata=options)
    assert 'in the metadata["ctxmw"]["prompt_strategies"] of the call' in str(info.value)
    assert "Did you mean 'shorten_tools'?" in str(info.value)
    assert fake.calls == []


async def test_stateless_call_returns_a_failed_note_to_the_inbox(tmp_path: Path) -> None:
    inbox = ctxmw.inbox
    save_file = tmp_path / "agent.jsonl"
    await inbox.deliver(save_file, "Operator note")
    fake = FakeCompletion(ConnectionError("down"), text("ok"))
    with pytest.raises(ConnectionError):
        await ctxmw.acompletion(
            MODEL, HISTORY, save_file=save_file, completion=fake, prompt_strategies=["inbox"]
        )
    await ctxmw.acompletion(
        MODEL, HISTORY, save_file=save_file, completion=fake, prompt_strategies=["inbox"]
    )
    assert fake.prompts[1][-1] == {"role": "user", "content": "Operator note"}


async def test_a_stateless_caller_need_not_replay_the_loop_rounds(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(tool_calls(("add", {"a": 2, "b": 3})), text("5"), text("Still 5."))
    first = await ctxmw.acompletion(
        MODEL, HISTORY, tools=[add], save_file=save_file, completion=fake, prompt_strategies="none"
    )
    # The caller only ever saw the final answer; the file also holds the tool round.
    history = [*HISTORY, first.choices[0].message, {"role": "user", "content": "Sure?"}]
    await ctxmw.acompletion(
        MODEL, history, tools=[add], save_file=save_file, completion=fake, prompt_strategies="none"
    )
    assert not (tmp_path / "agent.1.jsonl").exists()
    # Deliberately changed (issue 11): the loop's round is marked as ctxmw's in the file by a
    # record line, so the file is read as a transcript, not line by line.
    assert [m["role"] for m in await ctxmw.Session(MODEL, save_file=save_file).load()] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert [m["role"] for m in fake.prompts[2]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]


async def test_tool_calls_without_python_tools_are_returned_after_exactly_one_call() -> None:
    response = tool_calls(("lookup", {"q": "x"}))
    fake = FakeCompletion(response, text("never sent"))
    result = await ctxmw.acompletion(MODEL, HISTORY, completion=fake, prompt_strategies="none")
    assert result is response
    assert len(fake.calls) == 1
    assert fake.remaining == 1
