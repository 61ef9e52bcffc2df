"""The inbox contract: delivered notes are persisted, kept for the turn, or delivered again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ctxmw
from ctxmw import Aborted, Session, Settings, StrategyContext
from ctxmw.testing import FakeCompletion, text, tool_calls

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class StandInInbox:
    """Follows the inbox's contract: appends queued notes, reports them in ctx.stats."""

    def __init__(self) -> None:
        self.queued: list[str] = []
        self.abort_after_delivery = False

    def __call__(self, messages: list[Any], ctx: StrategyContext) -> list[Any]:
        notes = [{"role": "user", "content": text} for text in self.queued]
        self.queued.clear()
        if notes:
            ctx.stats["inbox"] = {"delivered": notes, "files": []}
        if self.abort_after_delivery:
            raise Aborted("stop")
        return [*messages, *notes]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def contents(messages: list[dict[str, Any]]) -> list[Any]:
    return [m.get("content") for m in messages]


async def test_notes_stay_in_the_turn_but_not_in_the_transcript(tmp_path: Path) -> None:
    inbox, save_file = StandInInbox(), tmp_path / "agent.jsonl"
    fake = FakeCompletion(
        tool_calls(("add", {"a": 1, "b": 1})), tool_calls(("add", {"a": 2, "b": 2})), text("done")
    )
    session = Session(
        MODEL, save_file=save_file, tools=[add], completion=fake, prompt_strategies=[inbox]
    )
    inbox.queued.append("NOTE")
    await session.ask("go")
    # Round 0 carried the note at the end; rounds 1 and 2 still have it, at the same place.
    assert contents(fake.prompts[0]) == ["go", "NOTE"]
    assert contents(fake.prompts[1])[:3] == ["go", "NOTE", None]
    assert contents(fake.prompts[2])[:3] == ["go", "NOTE", None]
    assert "NOTE" not in contents(read_jsonl(save_file))
    # The next turn no longer shows it.
    fake.queue(text("ok"))
    await session.ask("again")
    assert "NOTE" not in contents(fake.prompts[3])


async def test_inbox_persist_writes_notes_before_the_answer(tmp_path: Path) -> None:
    inbox, save_file = StandInInbox(), tmp_path / "agent.jsonl"
    fake = FakeCompletion(tool_calls(("add", {"a": 1, "b": 1})), text("done"))
    session = Session(
        MODEL,
        save_file=save_file,
        tools=[add],
        completion=fake,
        prompt_strategies=[inbox],
        settings=Settings(inbox_persist=True),
    )
    await session.ask("go")
    inbox.queued.append("LATE NOTE")
    fake.queue(text("noted"))
    await session.ask("more")
    stored = read_jsonl(save_file)
    assert contents(stored)[-3:] == ["more", "LATE NOTE", "noted"]
    assert fake.prompts[-1] == stored[:-1]


async def test_a_note_whose_call_failed_is_delivered_on_the_next_attempt(tmp_path: Path) -> None:
    inbox, save_file = StandInInbox(), tmp_path / "agent.jsonl"
    fake = FakeCompletion(ConnectionError("provider down"), text("got it"))
    session = Session(MODEL, save_file=save_file, completion=fake, prompt_strategies=[inbox])
    inbox.queued.append("URGENT")
    with pytest.raises(ConnectionError):
        await session.ask("hello")
    assert contents(session.pending_notes) == ["URGENT"]
    await session.ask("hello")
    assert contents(fake.prompts[1]) == ["hello", "URGENT"]
    assert session.pending_notes == []


async def test_a_failure_in_a_later_round_keeps_only_the_unseen_notes(tmp_path: Path) -> None:
    inbox = StandInInbox()
    fake = FakeCompletion(
        tool_calls(("add", {"a": 1, "b": 1})), TimeoutError("slow provider"), text("fine")
    )
    session = Session(MODEL, tools=[add], completion=fake, prompt_strategies=[inbox])
    inbox.queued.append("SEEN")
    original = inbox.__call__

    def deliver_second_in_round_1(messages: list[Any], ctx: StrategyContext) -> list[Any]:
        if ctx.round == 1 and len(fake.calls) == 1:
            inbox.queued.append("UNSEEN")
        return original(messages, ctx)

    session.strategies = [("inbox", deliver_second_in_round_1)]
    with pytest.raises(TimeoutError):
        await session.ask("go")
    assert contents(session.pending_notes) == ["UNSEEN"]
    await session.run()
    assert contents(fake.prompts[-1])[-1] == "UNSEEN"


async def test_notes_consumed_before_an_abort_are_kept(tmp_path: Path) -> None:
    inbox = StandInInbox()
    session = Session(MODEL, completion=FakeCompletion(text("x")), prompt_strategies=[inbox])
    inbox.queued.append("BEFORE ABORT")
    inbox.abort_after_delivery = True
    with pytest.raises(Aborted):
        await session.ask("go")
    assert contents(session.pending_notes) == ["BEFORE ABORT"]


# With the real inbox.


async def test_real_inbox_delivers_a_file_dropped_between_rounds(tmp_path: Path) -> None:
    inbox = ctxmw.inbox
    save_file = tmp_path / "agent.jsonl"

    async def drop_note(text: str) -> str:
        """Drop a note in the agent's own inbox."""
        await inbox.deliver(save_file, text)
        return "dropped"

    fake = FakeCompletion(
        tool_calls(("add", {"a": 1, "b": 1})),
        tool_calls(("drop_note", {"text": "Message from the operator"})),
        text("done"),
    )
    session = Session(
        MODEL,
        save_file=save_file,
        tools=[add, drop_note],
        completion=fake,
        prompt_strategies=["inbox"],
    )
    await session.ask("go")
    assert "Message from the operator" not in contents(fake.prompts[1])
    assert contents(fake.prompts[2])[-1] == "Message from the operator"


async def test_real_inbox_note_is_redelivered_after_a_provider_error(tmp_path: Path) -> None:
    inbox = ctxmw.inbox
    save_file = tmp_path / "agent.jsonl"
    await inbox.deliver(save_file, "Please also check the logs.")
    fake = FakeCompletion(ConnectionError("provider down"), text("Checked."))
    session = Session(MODEL, save_file=save_file, completion=fake, prompt_strategies=["inbox"])
    with pytest.raises(ConnectionError):
        await session.ask("status?")
    await session.ask("status?")
    assert contents(fake.prompts[1]) == ["status?", "Please also check the logs."]
