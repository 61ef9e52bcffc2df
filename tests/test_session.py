"""Session: the tool loop, the strategies on every round, the transcript, resuming."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

import ctxmw
from ctxmw import MaxRoundsExceeded, SaveFileBusy, Session, StrategyContext
from ctxmw.testing import FakeCompletion, text, tool_call, tool_calls
from tests._lock import lock_is_free

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class Probe:
    """A strategy that records what it receives and replaces every tool output by 'X'."""

    def __init__(self) -> None:
        self.seen: list[list[dict[str, Any]]] = []
        self.contexts: list[StrategyContext] = []
        self.outputs: list[list[dict[str, Any]]] = []

    def __call__(self, messages: list[dict[str, Any]], ctx: StrategyContext) -> list[Any]:
        self.seen.append(json.loads(json.dumps(messages)))
        self.contexts.append(ctx)
        out = [{**m, "content": "X"} if m.get("role") == "tool" else m for m in messages]
        self.outputs.append(json.loads(json.dumps(out)))
        return out


def three_rounds() -> FakeCompletion:
    return FakeCompletion(
        tool_calls(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})),
        tool_calls(("add", {"a": 10, "b": 20})),
        text("The sums are 3, 7 and 30."),
    )


async def test_strategies_run_once_per_round_on_the_full_transcript(tmp_path: Path) -> None:
    probe, fake = Probe(), three_rounds()
    save_file = tmp_path / "agent.jsonl"
    session = Session(
        MODEL, save_file=save_file, tools=[add], completion=fake, prompt_strategies=[probe]
    )
    reply = await session.ask("Add these up.")

    assert reply.choices[0].message.content == "The sums are 3, 7 and 30."
    assert len(probe.seen) == 3 == len(fake.calls)
    assert [ctx.round for ctx in probe.contexts] == [0, 1, 2]
    assert all(ctx.save_file == save_file and ctx.model == MODEL for ctx in probe.contexts)
    stored = read_jsonl(save_file)
    # Each round the strategy got the full-fidelity transcript so far, never the last prompt.
    assert probe.seen[0] == stored[:1]
    assert probe.seen[1] == stored[:4]
    assert probe.seen[2] == stored[:6]
    assert [m["content"] for m in stored if m["role"] == "tool"] == ["3", "7", "30"]
    # What the model received is the strategy's output.
    assert fake.prompts == probe.outputs
    assert [m["content"] for m in fake.prompts[2] if m["role"] == "tool"] == ["X", "X", "X"]
    assert session.messages == stored


async def test_transcript_is_written_after_every_round(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    lengths: list[int] = []

    def spy(messages: list[Any], ctx: StrategyContext) -> list[Any]:
        lengths.append(len(read_jsonl(save_file)) if save_file.exists() else 0)
        return messages

    session = Session(
        MODEL, save_file=save_file, tools=[add], completion=three_rounds(), prompt_strategies=[spy]
    )
    await session.ask("go")
    assert lengths == [0, 4, 6]
    assert len(read_jsonl(save_file)) == 7


async def test_tools_get_schemas_and_the_model_sees_results(tmp_path: Path) -> None:
    fake = three_rounds()
    await Session(MODEL, tools=[add], completion=fake, prompt_strategies="none").ask("go")
    schema = fake.calls[0]["tools"][0]["function"]
    assert schema["name"] == "add"
    assert schema["description"] == "Add two integers."
    assert schema["parameters"]["properties"]["a"] == {
        "description": "the first.",
        "type": "integer",
    }
    assert fake.calls[1]["messages"][-2:] == [
        {
            "role": "tool",
            "tool_call_id": fake.calls[1]["messages"][-3]["tool_calls"][0]["id"],
            "content": "3",
        },
        {
            "role": "tool",
            "tool_call_id": fake.calls[1]["messages"][-3]["tool_calls"][1]["id"],
            "content": "7",
        },
    ]


async def test_session_resumes_from_its_save_file(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    first = Session(
        MODEL, save_file=save_file, tools=[add], completion=three_rounds(), prompt_strategies="none"
    )
    await first.ask("go")
    fake = FakeCompletion(text("Still 30."))
    second = Session(
        MODEL, save_file=save_file, tools=[add], completion=fake, prompt_strategies="none"
    )
    assert await second.load() == first.messages
    await second.ask("And the last one?")
    assert fake.prompts[0] == [*first.messages, {"role": "user", "content": "And the last one?"}]
    assert len(read_jsonl(save_file)) == 9


async def test_system_message_is_written_first_only_on_an_empty_transcript(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(text("a"), text("b"))
    session = Session(
        MODEL, save_file=save_file, system="Be brief.", completion=fake, prompt_strategies="none"
    )
    await session.ask("one")
    await session.ask("two")
    roles = [m["role"] for m in read_jsonl(save_file)]
    assert roles == ["system", "user", "assistant", "user", "assistant"]


async def test_max_rounds_names_the_save_file_and_keeps_the_transcript(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(*[tool_calls(("add", {"a": i, "b": 1})) for i in range(3)], text("4"))
    session = Session(
        MODEL,
        save_file=save_file,
        tools=[add],
        completion=fake,
        max_rounds=3,
        prompt_strategies="none",
    )
    with pytest.raises(MaxRoundsExceeded) as info:
        await session.ask("count")
    assert str(save_file) in str(info.value)
    assert info.value.save_file == str(save_file)
    stored = read_jsonl(save_file)
    assert len(stored) == 1 + 3 * 2
    assert ctxmw.validate(stored) is None
    # Resuming continues where the loop stopped.
    resumed = Session(
        MODEL, save_file=save_file, tools=[add], completion=fake, prompt_strategies="none"
    )
    reply = await resumed.run()
    assert reply.choices[0].message.content == "4"
    assert fake.prompts[-1] == stored


async def test_max_rounds_comes_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXMW_MAX_ROUNDS", "2")
    fake = FakeCompletion(*[tool_calls(("add", {"a": 1, "b": 1})) for _ in range(2)])
    with pytest.raises(MaxRoundsExceeded, match="no save_file"):
        await Session(MODEL, tools=[add], completion=fake, prompt_strategies="none").ask("x")
    assert len(fake.calls) == 2


async def test_provider_error_before_a_round_completes_writes_nothing(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(RuntimeError("provider down"), text("hello"))
    session = Session(MODEL, save_file=save_file, completion=fake, prompt_strategies="none")
    with pytest.raises(RuntimeError, match="provider down"):
        await session.ask("hi")
    assert not save_file.exists()
    assert session.messages == []
    await session.ask("hi")
    assert [m["role"] for m in read_jsonl(save_file)] == ["user", "assistant"]


async def test_a_call_to_a_dict_tool_is_returned_to_the_caller(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    weather = {
        "type": "function",
        "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}},
    }
    call = tool_call("weather", {}, id="w1")
    fake = FakeCompletion(
        tool_calls(call, tool_call("add", {"a": 1, "b": 1}, id="a1")), text("Sunny, and 2.")
    )
    session = Session(
        MODEL, save_file=save_file, tools=[weather, add], completion=fake, prompt_strategies="none"
    )
    reply = await session.ask("weather?")
    assert reply.choices[0].finish_reason == "tool_calls"
    assert fake.calls[0]["tools"][0] == weather
    assert read_jsonl(save_file)[-1]["tool_calls"][0]["id"] == "w1"  # saved, not executed
    results = [
        {"role": "tool", "tool_call_id": "w1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "a1", "content": "2"},
    ]
    final = await session.run(results)
    assert final.choices[0].message.content == "Sunny, and 2."
    assert ctxmw.validate(read_jsonl(save_file)) is None


async def test_two_writers_on_one_save_file_are_refused(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    entered, release = anyio.Event(), anyio.Event()

    async def slow(x: int) -> int:
        """Wait for the test."""
        entered.set()
        await release.wait()
        return x

    first = Session(
        MODEL,
        save_file=save_file,
        tools=[slow],
        completion=FakeCompletion(tool_calls(("slow", {"x": 1})), text("done")),
        prompt_strategies="none",
    )
    second = Session(
        MODEL, save_file=save_file, completion=FakeCompletion(text("x")), prompt_strategies="none"
    )
    async with anyio.create_task_group() as group:
        group.start_soon(first.ask, "go")
        await entered.wait()
        with pytest.raises(SaveFileBusy, match=r"agent\.jsonl"):
            await second.ask("me too")
        release.set()
    assert lock_is_free(tmp_path / "agent.jsonl")
    await second.ask("now")  # free again, and it sees the first session's turn
    assert [m["role"] for m in second.messages][:4] == ["user", "assistant", "tool", "assistant"]


async def test_concurrent_sessions_share_nothing() -> None:
    async def run(n: int) -> list[dict[str, Any]]:
        fake = FakeCompletion(tool_calls(("add", {"a": n, "b": n})), text(f"answer {n}"))
        session = Session(MODEL, tools=[add], completion=fake, prompt_strategies="none")
        await session.ask(f"double {n}")
        return session.messages

    results: dict[int, list[dict[str, Any]]] = {}

    async def keep(n: int) -> None:
        results[n] = await run(n)

    async with anyio.create_task_group() as group:
        for n in range(20):
            group.start_soon(keep, n)
    for n, messages in results.items():
        assert messages[0]["content"] == f"double {n}"
        assert messages[2]["content"] == str(2 * n)
        assert messages[-1]["content"] == f"answer {n}"


async def test_session_reloads_a_file_another_writer_changed(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    mine = Session(
        MODEL,
        save_file=save_file,
        completion=FakeCompletion(text("1"), text("3")),
        prompt_strategies="none",
    )
    other = Session(
        MODEL, save_file=save_file, completion=FakeCompletion(text("2")), prompt_strategies="none"
    )
    await mine.ask("a")
    await other.ask("b")
    await mine.ask("c")
    assert [m["content"] for m in read_jsonl(save_file)] == ["a", "1", "b", "2", "c", "3"]


async def test_save_file_is_owner_only(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    await Session(
        MODEL, save_file=save_file, completion=FakeCompletion(text("x")), prompt_strategies="none"
    ).ask("y")
    assert save_file.stat().st_mode & 0o777 == 0o600


async def test_invalid_max_rounds_is_a_usage_error() -> None:
    with pytest.raises(ctxmw.UsageError, match="max_rounds=0"):
        Session(MODEL, max_rounds=0, prompt_strategies="none")


async def test_run_after_a_round_0_error_sends_the_staged_input(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(RuntimeError("provider down"), text("hello"))
    session = Session(MODEL, save_file=save_file, completion=fake, prompt_strategies="none")
    with pytest.raises(RuntimeError, match="provider down"):
        await session.ask("hi")
    assert session.pending_input == [{"role": "user", "content": "hi"}]
    await session.run()
    assert fake.calls[1]["messages"] == [{"role": "user", "content": "hi"}]
    assert [m["role"] for m in read_jsonl(save_file)] == ["user", "assistant"]
    assert session.pending_input == []


async def test_new_input_after_a_round_0_error_follows_the_unsent_input() -> None:
    fake = FakeCompletion(RuntimeError("provider down"), text("hello"))
    session = Session(MODEL, completion=fake, prompt_strategies="none")
    with pytest.raises(RuntimeError, match="provider down"):
        await session.ask("hi")
    await session.ask("are you there?")
    assert [m["content"] for m in fake.calls[1]["messages"]] == ["hi", "are you there?"]


async def test_a_session_without_python_tools_returns_tool_calls_after_one_call() -> None:
    response = tool_calls(("lookup", {}))
    fake = FakeCompletion(response, text("never sent"))
    session = Session(MODEL, completion=fake, prompt_strategies="none")
    assert await session.ask("look it up") is response
    assert len(fake.calls) == 1
