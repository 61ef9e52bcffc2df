"""User-style code that must type-check under mypy --strict (CI runs mypy over this file)."""

from __future__ import annotations

from typing import Any

import ctxmw
from ctxmw import Messages, StrategyContext


@ctxmw.register_strategy("typing_example_keep_last_user")
def keep_last_user(messages: Messages, ctx: StrategyContext) -> Messages:
    """Keep only the newest user message (an example, never used at runtime)."""
    users = [m for m in messages if m.get("role") == "user"]
    return users[-1:]


async def build_prompt(history: Messages) -> Messages:
    settings = ctxmw.Settings(epoch_size=30)
    return await ctxmw.prepare_prompt(
        history, ["shorten_tools_epoch_increment", keep_last_user], settings=settings
    )


@ctxmw.compressor("typing_example_lookup")
def compress_lookup(content: str, arguments: dict[str, Any]) -> str:
    """Keep the first line of a lookup result (an example, never used at runtime)."""
    return content.splitlines()[0] if content else content


def assemble_prompt(history: Messages, question: str) -> tuple[Messages, str]:
    segments = [
        ctxmw.Segment("system", "You are careful.", stable=True),
        ctxmw.Segment("history", history, trust="user", stable=True),
        ctxmw.Segment("query", question, trust="user"),
    ]
    assembly: ctxmw.Assembly = ctxmw.assemble(ctxmw.select_segments(segments), 8_000)
    report: ctxmw.Budget = ctxmw.budget(assembly.messages, "gpt-4o")
    return assembly.messages, report.band
