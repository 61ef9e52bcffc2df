"""The results the agent has drawn on: the default keeps them full past its tiers.

A result is *referenced* when a later assistant message (its text or tool-call arguments) holds
a distinctive string (:mod:`ctxmw.context.distinctive`) whose first occurrence in the
conversation was that result: the agent copied a path, an identifier or a number out of it. An
agent that drew on a result once tends to draw on it again (it edits the file it read, reruns the
test it saw fail), so compacting it hides what the next action needs.

Evaluated only up to the boundary (the messages through the result of the newest call before
it), so the set changes only when the boundary moves and the prompt's prefix stays byte-stable
between moves. The walk is incremental: the conversation's memo keeps its state, so a move reads
only the messages since the previous one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxmw.context.distinctive import action_text, distinctive
from ctxmw.context.survival import message_text
from ctxmw.messages._incremental import identical_prefix
from ctxmw.messages.form import role_of
from ctxmw.messages.pairs import ToolIndex

__all__ = ["referenced_calls"]

SLOT = "referenced"


@dataclass(slots=True)
class _Walk:
    """Where a walk over the conversation stands."""

    read: list[Any] = field(default_factory=list)
    first: dict[str, int] = field(default_factory=dict)
    """Distinctive string -> forward number of the result it first occurred in (0: not a result)."""
    referenced: set[int] = field(default_factory=set)

    def extend(self, messages: Sequence[Any], upto: int, index: ToolIndex) -> None:
        for i in range(len(self.read), upto):
            self._read(messages[i], index.result_of.get(i, 0))
        self.read.extend(messages[len(self.read) : upto])

    def _read(self, msg: Any, f: int) -> None:
        role = role_of(msg)
        if role == "assistant":
            for text in distinctive(action_text(msg)):
                source = self.first.setdefault(text, 0)
                if source:
                    self.referenced.add(source)
            return
        first = self.first
        for text in distinctive(message_text(msg)):
            first.setdefault(text, f if role == "tool" else 0)


def referenced_calls(
    messages: Sequence[Any], index: ToolIndex, pinned: int, memo: dict[str, Any] | None
) -> frozenset[int]:
    """Forward numbers of the calls among ``1..pinned`` whose result the agent drew on, as seen
    through the result of call ``pinned``."""
    if pinned <= 0:
        return frozenset()
    upto = index.calls[pinned - 1].result_index + 1
    walk = memo.get(SLOT) if memo is not None else None
    if not isinstance(walk, _Walk) or not _continues(walk, messages, upto):
        walk = _Walk()
    walk.extend(messages, upto, index)
    if memo is not None:
        memo[SLOT] = walk
    return frozenset(f for f in walk.referenced if f <= pinned)


def _continues(walk: _Walk, messages: Sequence[Any], upto: int) -> bool:
    """Whether ``walk`` read a prefix of ``messages`` no longer than ``upto``."""
    n = len(walk.read)
    return n <= upto and identical_prefix(walk.read, messages, n) == n
