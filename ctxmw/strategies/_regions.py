"""The one helper every shortening strategy shares: regions of calls -> the prompt.

A strategy decides, per completed call, a region for its call side (the arguments) and its
result side: FULL, COMPACTED or DROPPED. :func:`render` enforces pairing (a call and its result
are dropped together or not at all; a tool group is dropped only when all of its calls are) and
builds the prompt, reusing every unchanged message object.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from ctxmw.context.compressors import apply_compressor, compressor_registry
from ctxmw.messages._incremental import (
    MAX_MEMO_MESSAGES,
    common_prefix,
    resume_point,
    same_prefix,
)
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
    """
    calls, results = bytes(call_side), bytes(result_side)
    if not paired:
        calls, results = _paired(index, calls, results)
    key = _render_key(settings, notice)
    slot = f"render:{owner}"
    state = memo.get(slot) if memo is not None else None
    done = _reuse(state, messages, index, calls, results, key) if state is not None else None
    done = done if done is not None else _Rendered.empty(key)
    done.extend(messages, index, calls, results, settings)
    if memo is not None:
        if len(messages) <= MAX_MEMO_MESSAGES:
            memo[slot] = done
        else:
            memo.pop(slot, None)
    return done.prompt(settings, notice, calls, results)


def _render_key(settings: Settings, notice: bool) -> tuple[Any, ...]:
    """What a rendered message depends on beside the message and its regions."""
    return (
        settings.short_string_length,
        settings.short_output_length,
        settings.resolved_durable_patterns,
        settings.compaction_notice if notice else None,
        compressor_registry(),
    )


@dataclass(slots=True)
class _Rendered:
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
    def empty(cls, key: tuple[Any, ...]) -> _Rendered:
        zero = array("q", [0])
        return cls(key, [], b"", b"", [], zero, array("q", zero), array("q", zero), -1, None)

    def extend(
        self,
        messages: Sequence[Any],
        index: ToolIndex,
        calls: bytes,
        results: bytes,
        settings: Settings,
    ) -> None:
        """Render ``messages`` past the kept head (``len(self.pos) - 1`` messages)."""
        body, pos, compacted, dropped = self.body, self.pos, self.compacted, self.dropped
        c, d = compacted[-1], dropped[-1]
        for i in range(len(pos) - 1, len(messages)):
            msg = messages[i]
            new = _render_one(i, msg, index, calls, results, settings)
            if new is None:
                d += 1
            else:
                if new is not msg:
                    c += 1
                if self.first_group < 0 and i in index.groups:
                    self.first_group = len(body)
                body.append(new)
            pos.append(len(body))
            compacted.append(c)
            dropped.append(d)
        self.inputs = list(messages)
        self.calls, self.results = calls, results

    def prompt(
        self, settings: Settings, notice: bool, calls: bytes, results: bytes
    ) -> tuple[Messages, Counts]:
        """The output (a new list) and its counts."""
        counts = Counts(
            calls_compacted=len(calls) - _both_full(calls, results) - results.count(_DROPPED),
            calls_dropped=results.count(_DROPPED),
            messages_compacted=self.compacted[-1],
            messages_dropped=self.dropped[-1],
        )
        if not (notice and counts.changed):
            return list(self.body), counts
        text = settings.compaction_notice.format(
            compacted=counts.messages_compacted, dropped=counts.messages_dropped
        )
        if self.notice is None or self.notice["content"] != text:
            self.notice = {"role": "user", "content": text}
        at = self.first_group if self.first_group >= 0 else len(self.body)
        return [*self.body[:at], self.notice, *self.body[at:]], counts


def _reuse(
    state: _Rendered,
    messages: Sequence[Any],
    index: ToolIndex,
    calls: bytes,
    results: bytes,
    key: tuple[Any, ...],
) -> _Rendered | None:
    """``state`` cut back to the messages whose input and regions are unchanged, or None."""
    if state.key != key:
        return None
    start = resume_point(messages, common_prefix(state.inputs, messages))
    changed = min(common_prefix(state.calls, calls), common_prefix(state.results, results))
    if changed < len(index.calls):
        start = min(start, index.calls[changed].call_index)
    if start == 0:
        return None
    cut = state.pos[start]
    body = state.body[:cut]
    same = same_prefix(state.inputs, messages, start)
    if same < start:
        # Equal, not identical, inputs: show this call's objects where they were passed on.
        lo, hi = state.pos[same], cut
        swap = dict(zip(map(id, state.inputs[same:start]), messages[same:start], strict=True))
        body[lo:hi] = map(swap.get, map(id, body[lo:hi]), body[lo:hi])
    first = state.first_group if state.first_group < cut else -1
    return _Rendered(
        key,
        state.inputs,
        state.calls,
        state.results,
        body,
        state.pos[: start + 1],
        state.compacted[: start + 1],
        state.dropped[: start + 1],
        first,
        state.notice,
    )


def _both_full(calls: bytes, results: bytes) -> int:
    """How many calls show both sides full (bytewise OR, at C speed)."""
    if calls == results:
        return calls.count(_FULL)
    n = len(calls)
    either = int.from_bytes(calls, "big") | int.from_bytes(results, "big")
    return either.to_bytes(n, "big").count(_FULL)


def _paired(index: ToolIndex, call_side: bytes, result_side: bytes) -> tuple[bytes, bytes]:
    calls, results = bytearray(call_side), bytearray(result_side)
    if calls != results:
        for f0 in range(len(calls)):
            # A call and its result are dropped together or not at all.
            if (calls[f0] == Region.DROPPED) != (results[f0] == Region.DROPPED):
                calls[f0] = min(calls[f0], Region.COMPACTED)
                results[f0] = min(results[f0], Region.COMPACTED)
    if Region.DROPPED not in calls:
        return bytes(calls), bytes(results)
    for members in index.groups.values():
        if all(f is not None and calls[f - 1] == Region.DROPPED for f in members):
            continue
        # A group survives whole: its would-be-dropped calls are compacted instead.
        for f in members:
            if f is not None and calls[f - 1] == Region.DROPPED:
                calls[f - 1] = results[f - 1] = Region.COMPACTED
    return bytes(calls), bytes(results)


def _render_one(
    i: int,
    msg: Any,
    index: ToolIndex,
    calls: bytes,
    results: bytes,
    settings: Settings,
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
    msg: dict[str, Any], members: list[int | None], calls: bytes, settings: Settings
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
