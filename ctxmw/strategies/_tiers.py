"""Regions of calls, and the pairing rule they must keep before anything is rendered.

A strategy decides, per completed call, a region for its call side (the arguments) and its
result side. :func:`keep_pairs` enforces pairing: a call and its result are dropped together or not
at all, and a tool group is dropped only when all of its calls are. Its cost follows the drop
edge, not the history: only the groups that can straddle it are looked at.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum

from ctxmw.messages.pairs import ToolIndex

__all__ = ["Region", "keep_pairs"]


class Region(IntEnum):
    """What the model sees of a call or a result."""

    FULL = 0
    COMPACTED = 1
    DROPPED = 2


_DROPPED = bytes([Region.DROPPED])
_IS_DROPPED = bytes(int(i == Region.DROPPED) for i in range(256))  # a bytes.translate table


def keep_pairs(index: ToolIndex, call_side: bytes, result_side: bytes) -> tuple[bytes, bytes]:
    """``call_side`` and ``result_side`` changed so that pairs and groups are kept whole."""
    calls, results = bytearray(call_side), bytearray(result_side)
    if call_side.translate(_IS_DROPPED) != result_side.translate(_IS_DROPPED):
        for f0 in range(len(calls)):
            # A call and its result are dropped together or not at all.
            if (calls[f0] == Region.DROPPED) != (results[f0] == Region.DROPPED):
                calls[f0] = min(calls[f0], Region.COMPACTED)
                results[f0] = min(results[f0], Region.COMPACTED)
    if Region.DROPPED not in calls:
        return bytes(calls), bytes(results)
    for g in _suspects(index, calls):
        _keep_whole(index.groups[g], calls, results)
    return bytes(calls), bytes(results)


def _suspects(index: ToolIndex, calls: bytearray) -> Iterable[int]:
    """The groups that may hold a dropped call beside a kept one.

    When the dropped calls are the oldest ones (``shorten_tools``' tiers), only the group at the
    drop edge and the groups with an unanswered entry can; otherwise any group can.
    """
    edge = len(calls) - len(calls.lstrip(_DROPPED))
    if _DROPPED in calls[edge:]:
        return index.groups
    suspects = {g for g in index.partial if g in index.groups}
    if edge < len(calls):
        suspects.add(index.calls[edge].call_index)
    return suspects


def _keep_whole(members: tuple[int | None, ...], calls: bytearray, results: bytearray) -> None:
    """A group is dropped whole or survives whole: its would-be-dropped calls are compacted."""
    if all(f is not None and calls[f - 1] == Region.DROPPED for f in members):
        return
    for f in members:
        if f is not None and calls[f - 1] == Region.DROPPED:
            calls[f - 1] = results[f - 1] = Region.COMPACTED
