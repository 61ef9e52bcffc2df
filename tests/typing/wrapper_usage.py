"""User-style code that must type-check under mypy strict (it is not run by pytest)."""

from __future__ import annotations

from typing import Any

import ctxmw
from ctxmw.testing import FakeCompletion, text, tool_calls


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


async def agent() -> str:
    fake = FakeCompletion(tool_calls(("add", {"a": 1, "b": 2})), text("3"))
    session = ctxmw.Session(
        "openai/gpt-4o-mini", tools=[add], completion=fake, prompt_strategies="none"
    )
    reply: Any = await session.ask("1 + 2?")
    once: Any = await ctxmw.acompletion(
        model="openai/gpt-4o-mini",
        messages=[{"role": "user", "content": "hi"}],
        prompt_strategies=["shorten_tools"],
        completion=FakeCompletion(text("hello")),
    )
    return str(reply.choices[0].message.content) + str(once.choices[0].message.content)
