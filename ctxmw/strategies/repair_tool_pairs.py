"""``repair_tool_pairs``: drop what breaks tool-call pairing, for imported broken histories."""

from __future__ import annotations

from typing import Any

from ctxmw.messages.validate import Pairing, scan
from ctxmw.strategies._registry import register_strategy
from ctxmw.types import Messages, StrategyContext

__all__ = ["repair_tool_pairs"]


@register_strategy("repair_tool_pairs")
def repair_tool_pairs(messages: Messages, ctx: StrategyContext) -> Messages:
    """Drop orphaned tool calls and results so the transcript validates."""
    pairing = scan(messages)
    if not pairing.problems:
        return messages
    out = [
        new for i, msg in enumerate(messages) if (new := _repair_one(i, msg, pairing)) is not None
    ]
    dropped = len(messages) - len(out)
    ctx.stats["repair_tool_pairs"] = {"problems": len(pairing.problems), "dropped": dropped}
    ctx.logger.warning(
        "repair_tool_pairs: %d pairing problem(s); first at message %d: %s",
        len(pairing.problems),
        *pairing.problems[0],
    )
    return out


def _repair_one(i: int, msg: Any, pairing: Pairing) -> Any:
    if i in pairing.malformed:
        return None
    role = msg["role"]
    if role == "tool":
        return msg if i in pairing.results else None
    if role != "assistant" or msg.get("tool_calls") is None:
        return msg
    if i in pairing.bad_tool_calls:
        return _without_calls(msg)
    ids: set[object] = set()
    kept = []
    for tc in msg["tool_calls"]:
        call_id = tc.get("id") if isinstance(tc, dict) else None
        # Only the first occurrence of an id can have been answered; a duplicate never is.
        if isinstance(call_id, str) and (i, call_id) in pairing.answered and call_id not in ids:
            ids.add(call_id)
            kept.append(tc)
    if len(kept) == len(msg["tool_calls"]):
        return msg
    return {**msg, "tool_calls": kept} if kept else _without_calls(msg)


def _without_calls(msg: dict[str, Any]) -> Any:
    rest = {k: v for k, v in msg.items() if k != "tool_calls"}
    return rest if rest.get("content") else None
