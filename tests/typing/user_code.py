"""User-style code that must type-check under mypy --strict (CI runs mypy over this file)."""

from __future__ import annotations

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
