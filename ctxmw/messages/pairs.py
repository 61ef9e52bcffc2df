"""Tool-call bookkeeping over a transcript: which call each result answers, in which group.

One linear pass, no copies. Calls pair with results by id; material that does not pair (a result
with no call, a call with no result, a malformed entry) is recorded as such and left alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxmw.messages._memo import memoised
from ctxmw.messages.canonical import canonical_json
from ctxmw.messages.form import call_arguments, call_name

__all__ = ["Call", "ToolIndex", "call_key", "index_tools"]


@dataclass(frozen=True, slots=True)
class Call:
    """One completed call: a tool_call and the tool message that answers it.

    Attributes:
        f: forward number, 1..N, in the order of the result messages.
        id: the tool_call id.
        name: the function name ('' when missing).
        arguments: the raw arguments (JSON text, as sent).
        call_index: index of the assistant message holding the tool_call.
        result_index: index of the tool message.
    """

    f: int
    id: str
    name: str
    arguments: Any
    call_index: int
    result_index: int


@dataclass(slots=True)
class ToolIndex:
    """Completed calls of a transcript and the groups they belong to.

    Attributes:
        calls: completed calls in forward order (``calls[f - 1].f == f``).
        groups: assistant message index -> the forward number of each of its tool_calls, in
            order, or None for an entry that has no result (or is malformed).
        result_of: tool message index -> forward number of the call it answers.
        last_user_index: index of the newest user message (-1 if none).
    """

    calls: list[Call] = field(default_factory=list)
    groups: dict[int, list[int | None]] = field(default_factory=dict)
    result_of: dict[int, int] = field(default_factory=dict)
    last_user_index: int = -1


def index_tools(
    messages: Sequence[Any], memo: dict[str, Any] | None = None, owner: str = ""
) -> ToolIndex:
    """Pair every tool result with its call; one pass over ``messages``.

    Args:
        messages: the transcript (or a strategy's input).
        memo: a session's scratch space (``StrategyContext.memo``). When the previous call of
            ``owner`` saw a list whose elements start this one (the same objects, as a session's
            transcript only grows), only the new messages are read; anything else re-reads all.
        owner: who keeps the memo entry (a strategy's name): each owner sees its own inputs.
    """
    if memo is None:
        return _Indexer().feed(messages, 0).index
    key = f"tool_index:{owner}"
    seen: tuple[list[Any], _Indexer] | None = memo.get(key)
    if seen is not None and len(messages) >= len(seen[0]) and _extends(messages, seen[0]):
        indexer = seen[1].feed(messages, len(seen[0]))
    else:
        indexer = _Indexer().feed(messages, 0)
    memo[key] = (list(messages), indexer)
    return indexer.index


def _extends(messages: Sequence[Any], previous: list[Any]) -> bool:
    # list == compares identical objects by identity first: for a grown transcript this is a
    # pointer walk in C, not a deep comparison.
    return list(messages[: len(previous)]) == previous


class _Indexer:
    """The index of the messages read so far, and the calls still waiting for a result."""

    def __init__(self) -> None:
        self.index = ToolIndex()
        self.pending: dict[str, tuple[int, int, dict[str, Any]]] = {}

    def feed(self, messages: Sequence[Any], start: int) -> _Indexer:
        index, pending = self.index, self.pending
        for i in range(start, len(messages)):
            msg = messages[i]
            if not isinstance(msg, dict):
                continue
            role = msg.get("role")
            if role == "assistant":
                _open_group(index, pending, i, msg.get("tool_calls"))
            elif role == "tool":
                _close_call(index, pending, i, msg.get("tool_call_id"))
            elif role == "user":
                index.last_user_index = i
        return self


def _open_group(
    index: ToolIndex, pending: dict[str, tuple[int, int, dict[str, Any]]], i: int, tool_calls: Any
) -> None:
    if not isinstance(tool_calls, list) or not tool_calls:
        return
    index.groups[i] = [None] * len(tool_calls)
    for pos, tc in enumerate(tool_calls):
        call_id = tc.get("id") if isinstance(tc, dict) else None
        if isinstance(call_id, str) and call_id not in pending:
            pending[call_id] = (i, pos, tc)


def _close_call(
    index: ToolIndex, pending: dict[str, tuple[int, int, dict[str, Any]]], i: int, call_id: Any
) -> None:
    if not isinstance(call_id, str) or call_id not in pending:
        return
    call_index, pos, tc = pending.pop(call_id)
    f = len(index.calls) + 1
    index.calls.append(Call(f, call_id, call_name(tc), call_arguments(tc), call_index, i))
    index.groups[call_index][pos] = f
    index.result_of[i] = f


def call_key(call: Call) -> str:
    """Identity of a call for repeat detection: tool name plus canonical arguments, id ignored."""
    args = call.arguments
    return _canonical(call.name, args) if isinstance(args, str) else f"{call.name}\0{args!r}"


@memoised()
def _canonical(name: str, arguments: str) -> str:
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return f"{name}\0{arguments}"
    return f"{name}\0{canonical_json(parsed)}"
