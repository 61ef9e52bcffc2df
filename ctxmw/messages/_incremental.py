"""Where this call's input stops agreeing with the previous call's: the resume point of a memo.

A strategy that keeps what it derived from its previous input (``StrategyContext.memo``) only
redoes the work past the first message that changed. :func:`common_prefix` finds that message at
C speed: slices of the two lists are compared (``list ==`` tries identity before equality, so
the session's own transcript costs a pointer walk, and a framework that rebuilds equal dicts
every call still matches). :func:`same_prefix` tells where the objects stop being the same
ones, for a renderer that passes unchanged messages on as this call's own objects.
:func:`resume_point` steps back to the start of a tool group
that is still open there, whose pairing the new messages may change.

A strategy keeps what it derived with :func:`keep` (the input beside the state, under a slot of
the memo) and picks it up on the next call with :func:`resume`, which answers where the input
first changed; the state is cut back to there and extended with the new messages.

The strategy chain compares its own input with the previous call's once per call and publishes
the answer (:class:`Shared`) in the session's memo until a strategy returns another list: the
strategies that read that input compare the very same two lists, so :func:`common_prefix` and
:func:`same_prefix` answer from it, and :func:`kept_copy` hands them the chain's copy to keep
(one copy of the input per call, not one per strategy).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from operator import is_, is_not
from typing import Any, Generic, TypeVar

from ctxmw.messages._memo import active_memo

__all__ = [
    "GROWN_SLOT",
    "MAX_MEMO_MESSAGES",
    "SHARED_SLOT",
    "Kept",
    "Shared",
    "common_prefix",
    "keep",
    "kept_copy",
    "resume",
    "resume_point",
    "same_prefix",
]

T = TypeVar("T")

SHARED_SLOT = "chain:shared"

GROWN_SLOT = "chain:grown"
"""A memo entry the session sets before each call: the list object it now hands the chain has
only grown (append, extend) since any earlier call that was handed it, so the chain need not
compare its head with the copy it kept. Read once, by the next call's chain."""

MAX_MEMO_MESSAGES = 200_000
"""Inputs longer than this are not kept in a memo (each strategy keeps one list per owner)."""


@dataclass(slots=True)
class Shared:
    """How the chain's input relates to the previous call's: found once per call, by the chain.

    Attributes:
        previous: the previous call's input, as the chain kept it (helpers kept this object).
        inputs: this call's input, a copy nobody changes (what helpers keep for the next call).
        equal: ``inputs[:equal] == previous[:equal]`` (identity first).
        same: ``inputs[:same]`` are ``previous``'s own objects.
        source: the chain's input list, while the strategies that pass it on unchanged run.
    """

    previous: list[Any]
    inputs: list[Any]
    equal: int
    same: int
    source: list[Any] | None = None


def _shared(current: Any) -> Shared | None:
    memo = active_memo()
    found = memo.get(SHARED_SLOT) if memo is not None else None
    if isinstance(found, Shared) and found.source is current:
        return found
    return None


def kept_copy(messages: Sequence[Any]) -> list[Any]:
    """A copy of ``messages`` for a memo to keep: the chain's own while its first strategy runs."""
    found = _shared(messages)
    return found.inputs if found is not None else list(messages)


@dataclass(slots=True)
class Kept(Generic[T]):
    """What a memo keeps under one slot: the input a state was derived from, and the state."""

    inputs: list[Any]
    state: T
    key: Hashable = None


def resume(
    memo: dict[str, Any] | None, slot: str, messages: Sequence[Any], key: Hashable = None
) -> tuple[int, T | None]:
    """Where work on ``messages`` resumes: the first message that changed since the input kept
    under ``slot`` (made under the same ``key``), and the state derived from it; (0, None) when
    nothing is kept. The state is the kept object itself: cut it back to that index, then extend.
    """
    kept = memo.get(slot) if memo is not None else None
    if not isinstance(kept, Kept) or kept.key != key:
        return 0, None
    return common_prefix(kept.inputs, messages), kept.state


def keep(
    memo: dict[str, Any] | None,
    slot: str,
    messages: Sequence[Any],
    state: Any,
    key: Hashable = None,
) -> None:
    """Keep ``state``, derived from ``messages``, under ``slot`` for the next call's
    :func:`resume` (nothing is kept for an input over :data:`MAX_MEMO_MESSAGES`)."""
    if memo is None:
        return
    if len(messages) > MAX_MEMO_MESSAGES:
        memo.pop(slot, None)
        return
    memo[slot] = Kept(kept_copy(messages), state, key)


def common_prefix(previous: Sequence[Any], current: Sequence[Any]) -> int:
    """How many messages ``current`` starts with that equal ``previous``'s (identity first).

    Two byte strings (the renderer's tier runs) are compared byte by byte the same way.
    """
    found = _shared(current)
    if found is not None and found.previous is previous:
        return found.equal
    return compare_prefix(previous, current)


def compare_prefix(previous: Sequence[Any], current: Sequence[Any]) -> int:
    """:func:`common_prefix`, always compared."""
    m = min(len(previous), len(current))
    head: Sequence[Any]
    tail: Sequence[Any]
    if isinstance(previous, bytes) and isinstance(current, bytes):
        head, tail = previous[:m], current[:m]  # byte strings compare and slice in C as they are
    else:
        head = _as_list(previous, m)
        tail = _as_list(current, m)
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


def _as_list(items: Sequence[Any], m: int) -> list[Any]:
    """``items[:m]`` as a list: the list itself when it is one of that length (no copy), one
    slice of a list (a slice is a new list already), a copy of anything else."""
    if isinstance(items, list):
        return items if len(items) == m else items[:m]
    return list(items[:m])


def same_prefix(previous: Sequence[Any], current: Sequence[Any], upto: int) -> int:
    """How many of the first ``upto`` messages of ``current`` are ``previous``'s own objects."""
    found = _shared(current)
    if found is not None and found.previous is previous:
        return min(found.same, upto)
    return identical_prefix(previous, current, upto)


def identical_prefix(previous: Sequence[Any], current: Sequence[Any], upto: int) -> int:
    """:func:`same_prefix`, always compared (one C-speed pass when all are the same)."""
    head, tail = previous, current  # map stops at the shorter: no copies
    if upto < min(len(previous), len(current)):
        head, tail = previous[:upto], current[:upto]
    if all(map(is_, head, tail)):
        return upto
    return bytes(map(is_not, head, tail)).index(1)


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
