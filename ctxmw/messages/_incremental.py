"""Where this call's input stops agreeing with the previous call's: the resume point of a memo.

A strategy that keeps what it derived from its previous input (``StrategyContext.memo``) only
redoes the work past the first message that changed. :func:`common_prefix` finds that message at
C speed: slices of the two lists are compared (``list ==`` tries identity before equality, so
the session's own transcript costs a pointer walk, and a framework that rebuilds equal dicts
every call still matches). :func:`resume_point` then steps back to the start of a tool group
that is still open there, whose pairing the new messages may change.

Nothing here keeps state: the callers store the previous input beside what they derived.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

__all__ = ["MAX_MEMO_MESSAGES", "Prefix", "common_prefix", "resume_point"]

MAX_MEMO_MESSAGES = 200_000
"""Inputs longer than this are not kept in a memo (each strategy keeps one list per owner)."""

Prefix = tuple[int, int]
"""``(same, equal)``: the previous input's first ``same`` messages are the same objects as this
call's; the first ``equal`` (``>= same``) are equal dicts."""


def common_prefix(previous: Sequence[Any], current: Sequence[Any]) -> Prefix:
    """How far ``current`` starts like ``previous``: by identity, and by equality."""
    m = min(len(previous), len(current))
    same = _first_false(list(map(operator.is_, previous[:m], current[:m])), m)
    if same == m:
        return m, m
    head, tail = list(previous[same:m]), list(current[same:m])
    if head == tail:
        return same, m
    lo, hi = 0, len(head)  # head[:lo] == tail[:lo] and head[:hi] != tail[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if head[lo:mid] == tail[lo:mid]:
            lo = mid
        else:
            hi = mid
    return same, same + lo


def resume_point(messages: Sequence[Any], k: int) -> int:
    """The index to re-read from when ``messages[:k]`` are unchanged.

    If the messages just before ``k`` are a tool group's assistant message and its results, the
    group is still open: a result after ``k`` may answer it. Re-reading starts at that group.
    """
    i = k - 1
    while i >= 0 and _transparent(messages[i]):
        i -= 1
    if i >= 0 and _opens_group(messages[i]):
        return i
    return k


def _first_false(flags: list[bool], default: int) -> int:
    try:
        return flags.index(False)
    except ValueError:
        return default


def _transparent(msg: Any) -> bool:
    # The indexer skips non-dicts and reads tool messages without closing the group.
    return not isinstance(msg, dict) or msg.get("role") == "tool"


def _opens_group(msg: Any) -> bool:
    return msg.get("role") == "assistant" and isinstance(msg.get("tool_calls"), list)
