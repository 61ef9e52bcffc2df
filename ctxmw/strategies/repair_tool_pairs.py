"""``repair_tool_pairs``: drop what breaks tool-call pairing, for imported broken histories.

In a session, the input it last found clean is kept in the memo: a call re-checks only from the
last point before the first changed message where no tool group or tool_use block is open (the
pairing rules are local from such a point on), so a clean growing transcript costs its new
messages. A problem anywhere sends it back to the full scan, which names every problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxmw.history import keep, resume, resume_point
from ctxmw.messages.blocks import tool_use_ids
from ctxmw.messages.validate import Pairing, scan
from ctxmw.strategies._registry import register_strategy
from ctxmw.types import Messages, StrategyContext

__all__ = ["repair_tool_pairs"]

_CLEAN = "repair_tool_pairs:clean"


@register_strategy("repair_tool_pairs")
def repair_tool_pairs(messages: Messages, ctx: StrategyContext) -> Messages:
    """Drop orphaned tool calls and results so the transcript validates."""
    if _clean(messages, ctx.memo):
        return messages
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


def _clean(messages: Messages, memo: dict[str, Any] | None) -> bool:
    """True when ``messages`` has no pairing problem, read from the kept clean input on."""
    start, was_clean = resume(memo, _CLEAN, messages)
    start = _clean_point(messages, start) if was_clean else 0
    clean = not scan(messages[start:] if start else messages).problems
    if clean:
        keep(memo, _CLEAN, messages, True)
    elif memo is not None:
        memo.pop(_CLEAN, None)
    return clean


def _clean_point(messages: Sequence[Any], k: int) -> int:
    """The last index at or before ``k`` where a clean prefix leaves nothing open.

    A group still open there (its results may follow) or a tool_use block in the message before
    (its tool_result belongs to the next one) moves the point back.
    """
    point = resume_point(messages, k)
    while point > 0 and tool_use_ids(messages[point - 1]):
        point = resume_point(messages, point - 1)
    return point


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
