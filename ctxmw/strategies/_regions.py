"""The one helper every shortening strategy shares: regions of calls -> the prompt.

A strategy decides, per completed call, a region for its call side (the arguments) and its
result side: FULL, COMPACTED or DROPPED. :func:`render` enforces pairing (a call and its result
are dropped together or not at all; a tool group is dropped only when all of its calls are) and
builds the prompt, reusing every unchanged message object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxmw.context._record import handle_for
from ctxmw.context.compressors import apply_compressor, compressor_registry, get_compressor
from ctxmw.history import MAX_MEMO_MESSAGES, kept_copy
from ctxmw.messages.outline import outline
from ctxmw.messages.pairs import ToolIndex
from ctxmw.messages.shorten import compact_arguments
from ctxmw.settings import Settings
from ctxmw.strategies._notice import notice_fields
from ctxmw.strategies._rendered import Rendered
from ctxmw.strategies._tiers import Region, keep_pairs
from ctxmw.types import Messages

__all__ = ["Counts", "Region", "render"]


_FULL, _DROPPED = bytes([Region.FULL]), bytes([Region.DROPPED])


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
    call_side: Sequence[Region] | bytes,
    result_side: Sequence[Region] | bytes,
    settings: Settings,
    *,
    notice: bool,
    memo: dict[str, Any] | None = None,
    owner: str = "",
    paired: bool = False,
    fields: Mapping[str, str] | None = None,
    lines: int = 0,
    handles: bool = False,
) -> tuple[Messages, Counts]:
    """Build the prompt for the given regions (indexed by forward number - 1).

    Args:
        messages: the transcript.
        index: its :func:`~ctxmw.messages.pairs.index_tools`.
        call_side: region of each completed call's arguments.
        result_side: region of each completed call's result.
        settings: compaction lengths and the notice text.
        notice: insert the compaction notice when anything changed.
        memo: a session's scratch space. The previous output of ``owner`` is kept there: it
            is reused up to the first message that changed or whose region changed, so the
            unchanged head costs a list copy, not a render, and keeps its objects.
        owner: who keeps the memo entry (a strategy's name).
        paired: the regions already keep pairs and groups whole (the epoch plans'), so the
            pairing pass is skipped.
        fields: the notice's ``{reason}`` and ``{recover}``
            (:func:`~ctxmw.strategies._notice.notice_fields`; default: cost, not recoverable).
        lines: a compacted text result keeps this many characters of whole lines
            (:func:`~ctxmw.messages.outline.outline`) rather than its head and tail (0); a
            tool's registered compressor still comes first.
        handles: with ``lines``, a compacted result's header names its read-back handle
            (:mod:`ctxmw.context.readback`), so the model can read any line of it back.
    """
    calls, results = bytes(call_side), bytes(result_side)
    if not paired:
        calls, results = keep_pairs(index, calls, results)
    key = (*_render_key(settings, notice), lines, handles)
    slot = f"render:{owner}"
    # Taken out while it is cut and extended in place: a render that raises leaves no half.
    state = memo.pop(slot, None) if memo is not None else None
    reused = state is not None and state.reuse(messages, index, calls, results, key)
    done = state if state is not None and reused else Rendered.empty(key)
    _extend(done, messages, index, calls, results, settings, lines, handles)
    if memo is not None:
        if len(messages) <= MAX_MEMO_MESSAGES:
            memo[slot] = done
        else:
            memo.pop(slot, None)
    return _prompt(done, settings, notice, calls, results, fields)


def _render_key(settings: Settings, notice: bool) -> tuple[Any, ...]:
    """What a rendered message depends on beside the message and its regions."""
    return (
        settings.short_string_length,
        settings.short_output_length,
        settings.resolved_durable_patterns,
        settings.compaction_notice if notice else None,
        compressor_registry(),
    )


def _extend(
    done: Rendered,
    messages: Sequence[Any],
    index: ToolIndex,
    calls: bytes,
    results: bytes,
    settings: Settings,
    lines: int,
    handles: bool,
) -> None:
    """Render ``messages`` past the kept head (``done.done`` messages)."""
    groups = index.groups
    for i in range(done.done, len(messages)):
        msg = messages[i]
        new = _render_one(i, msg, index, calls, results, settings, lines, handles)
        done.add(i, msg, new, i in groups)
    done.inputs = kept_copy(messages)
    done.calls, done.results = calls, results


def _prompt(
    done: Rendered,
    settings: Settings,
    notice: bool,
    calls: bytes,
    results: bytes,
    fields: Mapping[str, str] | None,
) -> tuple[Messages, Counts]:
    """The output (a new list) and its counts."""
    counts = Counts(
        calls_compacted=len(calls) - _both_full(calls, results) - results.count(_DROPPED),
        calls_dropped=results.count(_DROPPED),
        messages_compacted=done.compacted[-1],
        messages_dropped=done.dropped[-1],
    )
    if not (notice and counts.changed):
        return done.body_with(None), counts
    text = settings.compaction_notice.format(
        compacted=counts.messages_compacted,
        dropped=counts.messages_dropped,
        **(fields if fields is not None else notice_fields("cost", "none")),
    )
    if done.notice is None or done.notice["content"] != text:
        done.notice = {"role": "user", "content": text}
    return done.body_with(done.notice), counts


def _both_full(calls: bytes, results: bytes) -> int:
    """How many calls show both sides full (bytewise OR, at C speed)."""
    if calls == results:
        return calls.count(_FULL)
    n = len(calls)
    either = int.from_bytes(calls, "big") | int.from_bytes(results, "big")
    return either.to_bytes(n, "big").count(_FULL)


def _render_one(
    i: int,
    msg: Any,
    index: ToolIndex,
    calls: bytes,
    results: bytes,
    settings: Settings,
    lines: int = 0,
    handles: bool = False,
) -> Any:
    members = index.groups.get(i)
    if members is not None:
        return _render_group(msg, members, calls, settings)
    f = index.result_of.get(i)
    if f is None:
        return msg
    region = results[f - 1]
    if region == Region.DROPPED:
        return None
    if region == Region.FULL:
        return msg
    content = msg.get("content")
    call = index.calls[f - 1]
    if lines and isinstance(content, str) and get_compressor(call.name) is None:
        handle = handle_for(str(msg.get("tool_call_id")), content) if handles else None
        short_text = outline(content, lines, handle)
        return msg if short_text is content else {**msg, "content": short_text}
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
    msg: dict[str, Any], members: tuple[int | None, ...], calls: bytes, settings: Settings
) -> Any:
    regions = [calls[f - 1] if f is not None else Region.FULL for f in members]
    if all(r == Region.DROPPED for r in regions):
        return None
    tool_calls = msg["tool_calls"]
    if all(r == Region.FULL for r in regions):
        return msg
    new_calls = [
        _compact_call(tc, settings.short_string_length) if r == Region.COMPACTED else tc
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
