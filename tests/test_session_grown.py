"""A session's working list grows from turn to turn, and the strategies know its head unseen.

A turn's working list only grows, and its commits append what it added to the transcript: when
the transcript is still that list's twin, the next turn goes on with the same list, and the
strategy chain, told so (``History.grows``), takes the head of the copy it kept without comparing
it message by message. Whatever happens between turns (inbox notes that are not written, another
writer, a failed call, a tool loop), the prompts are the ones a session that copies the
transcript every turn sends.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxmw
from ctxmw.history import _history as history
from ctxmw.inbox import deliver
from ctxmw.runtime.session import Session
from ctxmw.testing import FakeCompletion, Scripted, text, tool_call, tool_calls

MODEL = "openai/gpt-4o-mini"
SETTINGS = {"economic_full_tool_calls": 1, "economic_compacted_tool_calls": 2}
OPS = ("ask", "tool", "note", "other_writer", "error")


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class CopyingSession(Session):
    """The reference: a new copy of the transcript every turn (the chain compares it)."""

    def _working(self) -> list[Any]:
        return list(self._record.messages)


def script(ops: list[str]) -> list[Scripted]:
    out: list[Scripted] = []
    for n, op in enumerate(ops):
        if op == "tool":
            out.append(tool_calls(tool_call("add", {"a": n, "b": 1}, id=f"call_{n}")))
        if op == "error":
            out.append(RuntimeError("provider down"))
        out.append(text(f"answer {n}: " + "x" * 40))
    return out


async def run(kind: type[Session], folder: Path, ops: list[str]) -> list[list[dict[str, Any]]]:
    save_file = folder / "agent.jsonl"
    fake = FakeCompletion(*script(ops))
    session = kind(
        MODEL,
        save_file=save_file,
        completion=fake,
        tools=[add],
        settings=SETTINGS,
        clock=lambda: 1000.0,
    )
    for n, op in enumerate(ops):
        if op == "note":
            await deliver(save_file, f"note {n}")
        if op == "other_writer":
            other = Session(MODEL, save_file=save_file, completion=FakeCompletion(text("hi")))
            await other.ask(f"from elsewhere {n}")
        if op == "error":
            with pytest.raises(RuntimeError, match="provider down"):
                await session.ask(f"question {n}")
        await session.ask(f"question {n}")
    return fake.prompts


@given(st.lists(st.sampled_from(OPS), min_size=2, max_size=10))
@settings(max_examples=25, deadline=None)
def test_the_grown_list_sends_what_a_copied_transcript_sends(ops: list[str]) -> None:
    async def both() -> None:
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            grown = await run(Session, Path(a), ops)
            copied = await run(CopyingSession, Path(b), ops)
            assert grown == copied

    anyio.run(both)


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The chain's identity passes over its input (how many messages each looked at)."""
    passes: list[int] = []
    real = history.identical_prefix

    def counted(previous: Any, current: Any, upto: int) -> int:
        passes.append(upto)
        return real(previous, current, upto)

    monkeypatch.setattr(history, "identical_prefix", counted)
    return passes


@pytest.mark.anyio
async def test_consecutive_turns_compare_no_head(tmp_path: Path, compared: list[int]) -> None:
    fake = FakeCompletion(*[text(f"answer {n}") for n in range(6)])
    session = ctxmw.Session(MODEL, save_file=tmp_path / "agent.jsonl", completion=fake)
    for n in range(6):
        await session.ask(f"question {n}")
    assert compared == []  # was one pass over the whole transcript per turn after the first
    assert [m["content"] for m in fake.prompts[-1] if m["role"] == "user"] == [
        f"question {n}" for n in range(6)
    ]


@pytest.mark.anyio
async def test_a_transcript_changed_by_another_writer_is_compared_again(
    tmp_path: Path, compared: list[int]
) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(text("one"), text("two"))
    session = ctxmw.Session(MODEL, save_file=save_file, completion=fake)
    await session.ask("first")
    await ctxmw.Session(MODEL, save_file=save_file, completion=FakeCompletion(text("b"))).ask("x")
    await session.ask("second")
    assert compared == [1]  # reloaded: a new list, compared with the kept copy (the last input)
    assert [m["content"] for m in fake.prompts[-1]] == ["first", "one", "x", "b", "second"]
