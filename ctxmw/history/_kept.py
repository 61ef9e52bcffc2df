"""Where this call's input stops agreeing with the previous call's: the resume point of a memo.

A strategy that keeps what it derived from its previous input (``StrategyContext.memo``) only
redoes the work past the first message that changed. It keeps what it derived with :func:`keep`
(the input beside the state, under a slot of the memo) and picks it up on the next call with
:func:`resume`, which answers where the input first changed; the state is cut back to there and
extended with the new messages.

The answer comes from the chain's :class:`~ctxmw.history.History` when the strategy
reads the chain's own input (the History compared it with the previous call's once), and is
compared here otherwise: :func:`common_prefix` at C speed (``list ==`` tries identity before
equality, so a session's own transcript costs a pointer walk, and a framework that rebuilds
equal dicts every call still matches). :func:`same_prefix` tells where the objects stop being
the same ones, for a renderer that passes unchanged messages on as this call's own objects.
:func:`resume_point` steps back to the start of a tool group that is still open there, whose
pairing the new messages may change.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ctxmw.history._compare import compare_prefix, identical_prefix
from ctxmw.history._history import MAX_MEMO_MESSAGES, answer

__all__ = [
    "MAX_MEMO_MESSAGES",
    "Kept",
    "common_prefix",
    "keep",
    "kept_copy",
    "kept_indices",
    "kept_per_message",
    "kept_while_unchanged",
    "resume",
    "resume_point",
    "same_prefix",
]

T = TypeVar("T")


def kept_copy(messages: Sequence[Any]) -> list[Any]:
    """A copy of ``messages`` for a memo to keep: the History's own copy when ``messages`` is
    the chain's input (one copy per call, not one per strategy)."""
    found = answer(messages)
    return found.messages if found is not None else list(messages)


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


def kept_per_message(
    messages: Sequence[Any],
    memo: dict[str, Any],
    slot: str,
    key: Hashable,
    values: Callable[[Sequence[Any]], list[T]],
    *,
    by_object: dict[int, tuple[Any, T]],
    prune: bool = False,
) -> list[T]:
    """One value per message (``values`` of a list of messages, in order), kept under ``slot``:
    the kept ones up to the first message that changed, then looked up by object in
    ``by_object`` (shared by the slots that see the same messages) and computed for the rest.

    ``prune`` lets go of the objects ``messages`` no longer holds once ``by_object`` is over
    twice its size.
    """
    start, kept = resume(memo, slot, messages, key)
    head: list[T] = kept[:start] if kept is not None and start else []
    tail = messages[start:]
    new = [msg for msg in tail if by_object.get(id(msg), (None,))[0] is not msg]
    for msg, value in zip(new, values(new), strict=True):
        by_object[id(msg)] = (msg, value)
    found = head + [by_object[id(msg)][1] for msg in tail]
    if prune and len(by_object) > 2 * len(messages) + 1024:
        live = set(map(id, messages))
        for gone in [k for k in by_object if k not in live]:
            del by_object[gone]
    keep(memo, slot, messages, found, key)
    return found


def kept_indices(
    messages: Sequence[Any], memo: dict[str, Any] | None, slot: str, test: Callable[[Any], bool]
) -> list[int]:
    """The indices of the messages that pass ``test``, read on from the first that changed."""
    begin, kept = resume(memo, slot, messages)
    found: list[int] = kept[: bisect_left(kept, begin)] if kept is not None else []
    found += [i for i in range(begin, len(messages)) if test(messages[i])]
    keep(memo, slot, messages, found)
    return found


def kept_while_unchanged(
    messages: Sequence[Any],
    end: int,
    key: Hashable,
    memo: dict[str, Any] | None,
    slot: str,
    make: Callable[[], T],
) -> T:
    """``make()``, kept under ``slot`` while ``key`` and ``messages[:end]`` are unchanged."""
    kept = memo.get(slot) if memo is not None else None
    head = messages[:end]
    if isinstance(kept, Kept) and kept.key == key and common_prefix(kept.inputs, head) == end:
        return kept.state  # type: ignore[no-any-return]  # kept below: a T
    made = make()
    if memo is not None:
        memo[slot] = Kept(list(head), made, key)
    return made


def common_prefix(previous: Sequence[Any], current: Sequence[Any]) -> int:
    """How many messages ``current`` starts with that equal ``previous``'s (identity first).

    Two byte strings (the renderer's tier runs) are compared byte by byte the same way.
    """
    found = answer(current)
    if found is not None and found.previous is previous:
        return found.unchanged
    return compare_prefix(previous, current)


def same_prefix(previous: Sequence[Any], current: Sequence[Any], upto: int) -> int:
    """How many of the first ``upto`` messages of ``current`` are ``previous``'s own objects."""
    found = answer(current)
    if found is not None and found.previous is previous:
        return min(found.same, upto)
    return identical_prefix(previous, current, upto)


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
