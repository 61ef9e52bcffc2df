"""A folder as ctxmw leaves it after a session: ``agent.jsonl`` beside its ledger."""

from __future__ import annotations

from pathlib import Path

import anyio

from ctxmw import Session
from ctxmw.testing import FakeCompletion, text, tool_calls


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def session_folder(folder: Path) -> list[Path]:
    """Run a two-round session saving into ``folder``; the ``*.jsonl`` files, sorted."""

    async def go() -> None:
        fake = FakeCompletion(tool_calls(("add", {"a": 1, "b": 2})), text("3"))
        session = Session(
            "openai/gpt-4o-mini",
            save_file=folder / "agent.jsonl",
            tools=[add],
            completion=fake,
            prompt_strategies="none",
        )
        await session.ask("add 1 and 2")

    anyio.run(go)
    return sorted(folder.glob("*.jsonl"))
