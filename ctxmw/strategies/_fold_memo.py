"""What ``compact`` and ``summarize`` keep per conversation: a call between fold steps costs its
new messages.

- Token counts, per input position (a growing transcript counts its new messages only), and by
  message object (the prompt's tail after the summary is counted with the input's counts).
- The turn starts of the input, read on from the first message that changed.
- The mechanical summary of the current fold and the durable items it would lose, kept while
  the fold and the folded messages are unchanged (the range only moves every ``summary_step``
  messages, so most calls reuse it).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

from ctxmw.history import common_prefix, keep, resume

__all__ = ["kept_counts", "kept_result", "turn_starts"]

T = TypeVar("T")
Count = Callable[[Sequence[Any]], list[int]]


def kept_counts(
    messages: Sequence[Any],
    memo: dict[str, Any],
    key: Hashable,
    slot: str,
    count: Count,
    prune: bool,
) -> list[int]:
    """Token counts of ``messages``: the kept ones up to the first change, then by object."""
    seen = memo.get("fold:counts")
    if seen is None or seen[0] != key:
        seen = memo["fold:counts"] = (key, {})
        memo.pop(slot, None)
    known: dict[int, tuple[Any, int]] = seen[1]
    start, kept = resume(memo, slot, messages, key)
    head: list[int] = kept[:start] if kept is not None and start else []
    tail = messages[start:]
    new = [msg for msg in tail if known.get(id(msg), (None,))[0] is not msg]
    for msg, tokens in zip(new, count(new), strict=True):
        known[id(msg)] = (msg, tokens)
    counts = head + [known[id(msg)][1] for msg in tail]
    if prune and len(known) > 2 * len(messages) + 1024:  # messages no longer sent: let them go
        live = {id(msg) for msg in messages}
        for k in [k for k in known if k not in live]:
            del known[k]
    keep(memo, slot, messages, counts, key)
    return counts


def turn_starts(
    messages: Sequence[Any], memo: dict[str, Any] | None, slot: str, starts: Callable[[Any], bool]
) -> list[int]:
    """Indices of the messages that start a turn, read on from the first changed message."""
    begin, kept = resume(memo, slot, messages)
    found: list[int] = kept[: bisect_left(kept, begin)] if kept is not None else []
    found += [i for i in range(begin, len(messages)) if starts(messages[i])]
    keep(memo, slot, messages, found)
    return found


def kept_result(
    messages: Sequence[Any],
    end: int,
    key: Hashable,
    memo: dict[str, Any] | None,
    slot: str,
    make: Callable[[], T],
) -> T:
    """``make()``, kept while ``key`` and ``messages[:end]`` are unchanged."""
    kept = memo.get(slot) if memo is not None else None
    if kept is not None and kept[0] == key and common_prefix(kept[1], messages[:end]) == end:
        return kept[2]  # type: ignore[no-any-return]  # stored below: a T
    made = make()
    if memo is not None:
        memo[slot] = (key, list(messages[:end]), made)
    return made
