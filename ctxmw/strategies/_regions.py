"""The one helper every shortening strategy shares: regions of calls -> the prompt.

A strategy decides, per completed call, a region for its call side (the arguments) and its
result side: FULL, COMPACTED or DROPPED. :func:`render` enforces pairing (a call and its result
are dropped together or not at all; a tool group is dropped only when all of its calls are) and
builds the prompt, reusing every unchanged message object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from ctxmw.context.compressors import apply_compressor
from ctxmw.messages.pairs import ToolIndex
from ctxmw.messages.shorten import compact_arguments
from ctxmw.settings import Settings
from ctxmw.types import Messages

__all__ = ["Counts", "Region", "render"]


class Region(IntEnum):
    """What the model sees of a call or a result."""

    FULL = 0
    COMPACTED = 1
    DROPPED = 2


@dataclass(frozen=True, slots=True)
class Counts:
    """What :func:`render` changed: calls (pairs) and messages, compacted and dropped."""

    calls_compacted: int = 0
    calls_dropped: int = 0
    messages_compacted: int = 0
    messages_dropped: int = 0

    @property
    def changed(self) -> bool:
        """True when anything was compacted or dropped."""
        return bool(self.messages_compacted or self.messages_dropped)


def render(
    messages: Sequence[Any],
    index: ToolIndex,
    call_side: Sequence[Region],
    result_side: Sequence[Region],
    settings: Settings,
    *,
    notice: bool,
) -> tuple[Messages, Counts]:
    """Build the prompt for the given regions (indexed by forward number - 1).

    Args:
        messages: the transcript.
        index: its :func:`~ctxmw.messages.pairs.index_tools`.
        call_side: region of each completed call's arguments.
        result_side: region of each completed call's result.
        settings: compaction lengths and the notice text.
        notice: insert the compaction notice when anything changed.
    """
    calls, results = _paired(index, call_side, result_side)
    out: Messages = []
    first_group = -1
    compacted = dropped = 0
    for i, msg in enumerate(messages):
        new = _render_one(i, msg, index, calls, results, settings)
        if new is None:
            dropped += 1
            continue
        if new is not msg:
            compacted += 1
        if first_group < 0 and i in index.groups:
            first_group = len(out)
        out.append(new)
    counts = Counts(
        calls_compacted=sum(1 for c, r in zip(calls, results, strict=True) if 0 < max(c, r) < 2),
        calls_dropped=sum(1 for r in results if r is Region.DROPPED),
        messages_compacted=compacted,
        messages_dropped=dropped,
    )
    if notice and counts.changed:
        text = settings.compaction_notice.format(compacted=compacted, dropped=dropped)
        out.insert(first_group if first_group >= 0 else len(out), {"role": "user", "content": text})
    return out, counts


def _paired(
    index: ToolIndex, call_side: Sequence[Region], result_side: Sequence[Region]
) -> tuple[list[Region], list[Region]]:
    calls, results = list(call_side), list(result_side)
    for f0 in range(len(calls)):
        # A call and its result are dropped together or not at all.
        if (calls[f0] is Region.DROPPED) != (results[f0] is Region.DROPPED):
            calls[f0] = min(calls[f0], Region.COMPACTED)
            results[f0] = min(results[f0], Region.COMPACTED)
    for members in index.groups.values():
        if all(f is not None and calls[f - 1] is Region.DROPPED for f in members):
            continue
        # A group survives whole: its would-be-dropped calls are compacted instead.
        for f in members:
            if f is not None and calls[f - 1] is Region.DROPPED:
                calls[f - 1] = results[f - 1] = Region.COMPACTED
    return calls, results


def _render_one(
    i: int,
    msg: Any,
    index: ToolIndex,
    calls: list[Region],
    results: list[Region],
    settings: Settings,
) -> Any:
    members = index.groups.get(i)
    if members is not None:
        return _render_group(msg, members, calls, settings)
    f = index.result_of.get(i)
    if f is None:
        return msg
    region = results[f - 1]
    if region is Region.DROPPED:
        return None
    if region is Region.FULL:
        return msg
    content = msg.get("content")
    call = index.calls[f - 1]
    # A compressor registered for this tool replaces generic truncation (compacted tier only).
    short = apply_compressor(
        content,
        call.name,
        call.arguments,
        settings.short_output_length,
        settings.resolved_durable_patterns,
    )
    return msg if short is content else {**msg, "content": short}


def _render_group(
    msg: dict[str, Any], members: list[int | None], calls: list[Region], settings: Settings
) -> Any:
    regions = [calls[f - 1] if f is not None else Region.FULL for f in members]
    if all(r is Region.DROPPED for r in regions):
        return None
    tool_calls = msg["tool_calls"]
    new_calls = [
        _compact_call(tc, settings.short_string_length) if r is Region.COMPACTED else tc
        for tc, r in zip(tool_calls, regions, strict=True)
    ]
    if all(new is old for new, old in zip(new_calls, tool_calls, strict=True)):
        return msg
    return {**msg, "tool_calls": new_calls}


def _compact_call(tc: Any, limit: int) -> Any:
    fn = tc.get("function") if isinstance(tc, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("arguments"), str):
        return tc
    args = fn["arguments"]
    short = compact_arguments(args, limit)
    return tc if short is args else {**tc, "function": {**fn, "arguments": short}}
