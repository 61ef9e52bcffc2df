"""Anthropic-native tool blocks inside OpenAI-format messages.

litellm passes Anthropic's content blocks through: an assistant message whose content list holds
``{"type": "tool_use", "id": ...}`` blocks, answered by the *next* message, a user message whose
content holds ``{"type": "tool_result", "tool_use_id": ...}`` blocks. Anthropic rejects a
tool_use whose result is not in the very next message, so the pair is one unit: the validator
checks it and the folding strategies never cut between the two messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["block_problems", "tool_result_ids", "tool_use_ids"]


def tool_use_ids(message: Any) -> list[str]:
    """Ids of the ``tool_use`` blocks of a message's content (none for other messages)."""
    return _ids(message, "tool_use", "id")


def tool_result_ids(message: Any) -> list[str]:
    """``tool_use_id`` of each ``tool_result`` block of a message's content."""
    return _ids(message, "tool_result", "tool_use_id")


def block_problems(messages: Sequence[Any]) -> list[tuple[int, str]]:
    """``(index, description)`` of every tool_use block not answered by the next message, and of
    every tool_result block that answers no tool_use of the message just before it."""
    problems: list[tuple[int, str]] = []
    open_uses: dict[str, int] = {}
    for i, msg in enumerate(messages):
        for use_id in tool_result_ids(msg):
            if open_uses.pop(use_id, None) is None:
                problems.append(
                    (i, f"tool_result block answers {use_id!r}, which is not a tool_use block "
                     "of the message just before it")
                )  # fmt: skip
        for use_id, at in open_uses.items():
            problems.append(
                (at, f"tool_use block {use_id!r} has no tool_result in the next message")
            )
        open_uses = dict.fromkeys(tool_use_ids(msg), i)
    for use_id, at in open_uses.items():
        problems.append((at, f"tool_use block {use_id!r} has no tool_result before the end"))
    return problems


def _ids(message: Any, kind: str, key: str) -> list[str]:
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [
        str(block.get(key))
        for block in content
        if isinstance(block, dict) and block.get("type") == kind
    ]
