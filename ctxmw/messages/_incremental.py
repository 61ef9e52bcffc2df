"""Where this call's input stops agreeing with the previous call's: the resume point of a memo.

A strategy that keeps what it derived from its previous input (``StrategyContext.memo``) only
redoes the work past the first message that changed. :func:`common_prefix` finds that message at
C speed: slices of the two lists are compared (``list ==`` tries identity before equality, so
the session's own transcript costs a pointer walk, and a framework that rebuilds equal dicts
every call still matches). :func:`same_prefix` tells where the objects stop being the same
ones, for a renderer that passes unchanged messages on as this call's own objects.
:func:`resume_point` steps back to the start of a tool group
that is still open there, whose pairing the new messages may change.

Nothing here keeps state: the callers store the previous input beside what they derived.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

__all__ = ["MAX_MEMO_MESSAGES", "common_prefix", "resume_point", "same_prefix"]

MAX_MEMO_MESSAGES = 200_000
"""Inputs longer than this are not kept in a memo (each strategy keeps one list per owner)."""


def common_prefix(previous: Sequence[Any], current: Sequence[Any]) -> int:
    """How many messages ``current`` starts with that equal ``previous``'s (identity first).

    Two byte strings (the renderer's tier runs) are compared byte by byte the same way.
    """
    m = min(len(previous), len(current))
    head: Sequence[Any]
    tail: Sequence[Any]
    if isinstance(previous, bytes) and isinstance(current, bytes):
        head, tail = previous[:m], current[:m]  # byte strings compare and slice in C as they are
    else:
        head = previous if len(previous) == m and isinstance(previous, list) else list(previous[:m])
        tail = list(current[:m])
    if head == tail:  # identical objects compare in C without looking inside them
        return m
    lo, hi = 0, m  # head[:lo] == tail[:lo] and head[:hi] != tail[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if head[lo:mid] == tail[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def same_prefix(previous: Sequence[Any], current: Sequence[Any], upto: int) -> int:
    """How many of the first ``upto`` messages of ``current`` are ``previous``'s own objects."""
    flags = list(map(operator.is_, previous[:upto], current[:upto]))
    try:
        return flags.index(False)
    except ValueError:
        return upto


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


def _transparent(msg: Any) -> bool:
    # The indexer skips non-dicts and reads tool messages without closing the group.
    return not isinstance(msg, dict) or msg.get("role") == "tool"


def _opens_group(msg: Any) -> bool:
    return msg.get("role") == "assistant" and isinstance(msg.get("tool_calls"), list)
