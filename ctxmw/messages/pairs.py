"""Tool-call bookkeeping over a transcript: which call each result answers, in which group.

One linear pass, no copies. Calls pair with results by id within their tool group (the
assistant message and the tool messages right after it), the rule :func:`ctxmw.validate` checks:
an id reused by a later group pairs there. Material that does not pair (a result with no call, a
call with no result, a malformed entry) is recorded as such and left alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxmw.history import keep, resume, resume_point
from ctxmw.messages._memo import memoised
from ctxmw.messages.canonical import canonical_json
from ctxmw.messages.form import call_arguments, call_name

__all__ = ["Call", "ToolIndex", "call_key", "index_tools", "unique_call_ids"]


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
            order, or None for an entry that has no result (or is malformed). A tuple, replaced
            as results arrive.
        result_of: tool message index -> forward number of the call it answers.
        last_user_index: index of the newest user message (-1 if none).
        partial: assistant message indices of groups that hold (or held, while reading) an
            entry without a result: a superset, in message order.
    """

    calls: list[Call] = field(default_factory=list)
    groups: dict[int, tuple[int | None, ...]] = field(default_factory=dict)
    result_of: dict[int, int] = field(default_factory=dict)
    last_user_index: int = -1
    partial: dict[int, None] = field(default_factory=dict)
    _keys: list[str] = field(default_factory=list, repr=False)
    _first: dict[str, int] = field(default_factory=dict, repr=False)
    _repeats: list[int] = field(default_factory=list, repr=False)
    _scanned: int = field(default=0, repr=False)
    _protected: tuple[int, frozenset[int]] | None = field(default=None, repr=False)

    def keys(self) -> list[str]:
        """:func:`call_key` of every call, in forward order (kept, extended as calls come)."""
        keys = self._keys
        if len(keys) < len(self.calls):
            keys.extend(map(call_key, self.calls[len(keys) :]))
        return keys

    def repeats(self) -> list[int]:
        """Forward numbers of every occurrence after the first of a repeated call, ascending."""
        keys, first, repeats = self.keys(), self._first, self._repeats
        for f0 in range(self._scanned, len(keys)):
            key = keys[f0]
            if key in first:
                repeats.append(f0 + 1)
            else:
                first[key] = f0 + 1
        self._scanned = len(keys)
        return repeats

    def protected(self, pinned: int) -> frozenset[int]:
        """Forward numbers of the latest instance of every call repeated among calls 1..pinned."""
        if self._protected is not None and self._protected[0] == pinned:
            return self._protected[1]
        latest: dict[str, int] = {}
        twice: set[str] = set()
        for f, key in enumerate(self.keys()[:pinned], start=1):
            if key in latest:
                twice.add(key)
            latest[key] = f
        found = frozenset(latest[key] for key in twice)
        self._protected = (pinned, found)
        return found

    def _forget_calls_from(self, m: int) -> None:
        """Drop what was derived from calls ``m + 1`` on."""
        del self._keys[m:]
        if self._protected is not None and self._protected[0] > m:
            self._protected = None
        if self._scanned > m:
            self._first.clear()
            self._repeats.clear()
            self._scanned = 0


def index_tools(
    messages: Sequence[Any], memo: dict[str, Any] | None = None, owner: str = ""
) -> ToolIndex:
    """Pair every tool result with its call; one pass over ``messages``.

    Args:
        messages: the transcript (or a strategy's input).
        memo: a session's scratch space (``StrategyContext.memo``). The previous input of
            ``owner`` is kept there beside its index: only the messages past the first one that
            changed (by identity, else by equality) are read again, so an appended round costs
            its own messages and an edited middle message costs the messages after it.
        owner: who keeps the memo entry (a strategy's name): each owner sees its own inputs.
            The index returned to an owner is updated in place by that owner's next call.
    """
    if memo is None:
        return _Indexer().feed(messages, 0).index
    key = f"tool_index:{owner}"
    start, indexer = resume(memo, key, messages)
    if indexer is None:
        indexer = _Indexer().feed(messages, 0)
    else:
        start = resume_point(messages, start)
        indexer = indexer.truncate(start, messages) if start > 0 else _Indexer()
        indexer.feed(messages, start)
    keep(memo, key, messages, indexer)
    return indexer.index


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
            if role == "tool":
                _close_call(index, pending, i, msg.get("tool_call_id"))
                continue
            if pending:  # any other message ends the group: its open calls stay unanswered
                _unanswered(index, pending)
            if role == "assistant":
                _open_group(index, pending, i, msg.get("tool_calls"))
            elif role == "user":
                index.last_user_index = i
        if pending:
            index.partial.update((at, None) for at, _, _ in pending.values())
        return self

    def truncate(self, end: int, messages: Sequence[Any]) -> _Indexer:
        """Forget everything read from message ``end`` on (a resume point: no group open)."""
        index = self.index
        self.pending = {}
        while index.calls and index.calls[-1].result_index >= end:
            index.calls.pop()
        index._forget_calls_from(len(index.calls))
        while index.partial and next(reversed(index.partial)) >= end:
            index.partial.popitem()
        # Both mappings were filled in message order: their newest keys are their last.
        while index.groups and next(reversed(index.groups)) >= end:
            index.groups.popitem()
        while index.result_of and next(reversed(index.result_of)) >= end:
            index.result_of.popitem()
        if index.last_user_index >= end:
            index.last_user_index = _last_user(messages, end)
        return self


def _last_user(messages: Sequence[Any], end: int) -> int:
    for i in range(end - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, dict) and msg.get("role") == "user":
            return i
    return -1


def _unanswered(index: ToolIndex, pending: dict[str, tuple[int, int, dict[str, Any]]]) -> None:
    index.partial.update((at, None) for at, _, _ in pending.values())
    pending.clear()


def _open_group(
    index: ToolIndex, pending: dict[str, tuple[int, int, dict[str, Any]]], i: int, tool_calls: Any
) -> None:
    if not isinstance(tool_calls, list) or not tool_calls:
        return
    index.groups[i] = (None,) * len(tool_calls)
    for pos, tc in enumerate(tool_calls):
        call_id = tc.get("id") if isinstance(tc, dict) else None
        if isinstance(call_id, str) and call_id not in pending:
            pending[call_id] = (i, pos, tc)
    if len(pending) < len(tool_calls):
        index.partial[i] = None  # a malformed or duplicate entry never gets a result


def _close_call(
    index: ToolIndex, pending: dict[str, tuple[int, int, dict[str, Any]]], i: int, call_id: Any
) -> None:
    if not isinstance(call_id, str) or call_id not in pending:
        return
    call_index, pos, tc = pending.pop(call_id)
    f = len(index.calls) + 1
    index.calls.append(Call(f, call_id, call_name(tc), call_arguments(tc), call_index, i))
    members = index.groups[call_index]
    index.groups[call_index] = (*members[:pos], f, *members[pos + 1 :])
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


def unique_call_ids(messages: Sequence[Any]) -> tuple[list[Any], int]:
    """``messages`` with every tool_call id reused by a later group renamed, and the count.

    The second group to use ``call_0`` gets ``call_0~2`` (its results too), the third
    ``call_0~3``: tools that key results by id (replay's retention) then count each once.
    Unchanged messages are passed on as the same objects.
    """
    seen: set[str] = set()
    group: dict[str, str] = {}
    out: list[Any] = []
    renamed = 0
    for msg in messages:
        if isinstance(msg, dict) and msg.get("role") == "tool":
            old = msg.get("tool_call_id")
            new = group.get(old) if isinstance(old, str) else None
            out.append(msg if new is None or new == old else {**msg, "tool_call_id": new})
            continue
        group = {}
        calls = msg.get("tool_calls") if isinstance(msg, dict) else None
        if not isinstance(calls, list) or not calls:
            out.append(msg)
            continue
        new_calls = [_fresh(tc, seen, group) for tc in calls]
        renamed += sum(1 for a, b in zip(calls, new_calls, strict=True) if a is not b)
        same = all(a is b for a, b in zip(calls, new_calls, strict=True))
        out.append(msg if same else {**msg, "tool_calls": new_calls})
    return out, renamed


def _fresh(tc: Any, seen: set[str], group: dict[str, str]) -> Any:
    call_id = tc.get("id") if isinstance(tc, dict) else None
    if not isinstance(call_id, str) or call_id in group:
        return tc  # no id, or a duplicate inside one group: left for validate to report
    fresh, n = call_id, 1
    while fresh in seen:
        n += 1
        fresh = f"{call_id}~{n}"
    seen.add(fresh)
    group[call_id] = fresh
    return tc if fresh == call_id else {**tc, "id": fresh}
