"""The renderer's memo: one owner's previous render, cut back to what this call can reuse.

:func:`~ctxmw.strategies._regions.render` keeps, per owner, its input, the regions and the
output message by message. The next call reuses that output up to the first message that
changed or whose region changed (a list slice, at C speed) and renders only the rest: an
appended round costs its own messages.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxmw.history import common_prefix, resume_point, same_prefix
from ctxmw.messages.pairs import ToolIndex

__all__ = ["Rendered"]


@dataclass(slots=True)
class Rendered:
    """One owner's previous render: its input, regions and output, message by message.

    ``pos[i]`` is the length of ``body`` (the output without the notice) before input message
    ``i``; ``compacted[i]`` and ``dropped[i]`` count the messages changed before it.
    """

    key: tuple[Any, ...]
    inputs: list[Any]
    calls: bytes
    results: bytes
    body: list[Any]
    pos: array[int]
    compacted: array[int]
    dropped: array[int]
    first_group: int  # body position of the first surviving group message, -1 if none
    notice: dict[str, Any] | None

    @classmethod
    def empty(cls, key: tuple[Any, ...]) -> Rendered:
        """Nothing rendered yet."""
        zero = array("q", [0])
        return cls(key, [], b"", b"", [], zero, array("q", zero), array("q", zero), -1, None)

    @property
    def done(self) -> int:
        """How many input messages are rendered."""
        return len(self.pos) - 1

    def add(self, i: int, msg: Any, new: Any, opens_group: bool) -> None:
        """Record input message ``i`` (``msg``) rendered as ``new`` (None: dropped)."""
        c, d = self.compacted[-1], self.dropped[-1]
        if new is None:
            d += 1
        else:
            if new is not msg:
                c += 1
            if self.first_group < 0 and opens_group:
                self.first_group = len(self.body)
            self.body.append(new)
        self.pos.append(len(self.body))
        self.compacted.append(c)
        self.dropped.append(d)

    def body_with(self, notice: dict[str, Any] | None) -> list[Any]:
        """The output (a new list), ``notice`` before the first surviving group."""
        if notice is None:
            return list(self.body)
        at = self.first_group if self.first_group >= 0 else len(self.body)
        return [*self.body[:at], notice, *self.body[at:]]

    def reuse(
        self,
        messages: Sequence[Any],
        index: ToolIndex,
        calls: bytes,
        results: bytes,
        key: tuple[Any, ...],
    ) -> bool:
        """Cut this render back, in place, to the messages whose input and regions are unchanged.

        Returns False when nothing can be reused (the render is then left as it was).
        """
        if self.key != key:
            return False
        start = resume_point(messages, common_prefix(self.inputs, messages))
        changed = min(common_prefix(self.calls, calls), common_prefix(self.results, results))
        if changed < len(index.calls):
            start = min(start, index.calls[changed].call_index)
        if start == 0:
            return False
        cut = self.pos[start]
        body = self.body
        del body[cut:]
        same = same_prefix(self.inputs, messages, start)
        if same < start:
            # Equal, not identical, inputs: show this call's objects where they were passed on.
            lo, hi = self.pos[same], cut
            swap = dict(zip(map(id, self.inputs[same:start]), messages[same:start], strict=True))
            body[lo:hi] = map(swap.get, map(id, body[lo:hi]), body[lo:hi])
        if self.first_group >= cut:
            self.first_group = -1
        del self.pos[start + 1 :]
        del self.compacted[start + 1 :]
        del self.dropped[start + 1 :]
        return True
