"""Read-back: the one tool that gives the model an earlier tool result back, exactly.

A shortening strategy shows an old tool result *compacted* (some of its lines) under a header
that names a *handle*: :func:`~ctxmw.context._record.handle_for` of the result's call id and its
text, so the same result always has the same handle and the compacted bytes never change. The
model reads any lines of it back with :data:`READBACK_TOOL` (``ctxmw_expand``):

- ``{"handle": H, "start": 120, "end": 180}``: lines 120 to 180 (1-based, inclusive; ``end``
  -1 is the last line). For a result that shows line numbers (a file read) the numbers are the
  ones it shows; otherwise the lines are counted, and the answer puts each one's number in a
  gutter before it.
- ``{"handle": H, "pattern": "def load"}``: only the lines holding that text, with
  :data:`CONTEXT_LINES` lines around each.
- ``{"handle": H, "offset": 0, "limit": 4000}``: characters, for a result without lines.

The originals are the conversation's own messages: every path that shows a handle (a
``Session``, ``acompletion``, a stream, the proxy) has the caller's whole history at hand, so
:func:`answer` finds the original among them (:func:`find_original`) and nothing is copied
anywhere. A handle whose result is no longer in the conversation gets a stable "not available"
answer, never an error the caller must handle.

The schema is one constant, short (about 80 tokens: the compaction notice says how to use it),
sent unchanged on every call of a conversation that can show handles, from its first call: a
tools block that changed later would move the start of every cached prompt, system prompt
included.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxmw.context._record import HANDLE, handle_for
from ctxmw.messages.numbering import Numbering, numbering
from ctxmw.messages.outline import HANDLE_MARK

__all__ = [
    "CONTEXT_LINES",
    "HANDLE_MARK",
    "READBACK_TOOL",
    "READBACK_TOOL_NAME",
    "answer",
    "echo",
    "find_original",
    "handles_in",
    "is_readback",
    "read_back",
    "split_readbacks",
]

READBACK_TOOL_NAME = "ctxmw_expand"
READBACK_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": READBACK_TOOL_NAME,
        "description": "Read back lines of a compacted tool result by its handle: start-end "
        "(from 1; end -1: the last), or the lines holding pattern, or characters from offset.",
        "parameters": {
            "type": "object",
            "properties": {
                "handle": {"type": "string"},
                "start": {"type": "integer"},
                "end": {"type": "integer"},
                "pattern": {"type": "string"},
                "offset": {"type": "integer"},
                "limit": {"type": "integer"},
            },
            "required": ["handle"],
        },
    },
}
"""The read-back tool's schema: the same dict in every prompt of every conversation."""

_HANDLE_IN_TEXT = re.compile(r"(?:\[ctxmw offload |ctxmw_expand handle )([0-9a-f]{16})")

CONTEXT_LINES = 3
"""Lines shown before and after each line a ``pattern`` finds."""
ECHO_CHARS = 100
"""The most of a bad argument an answer repeats (see :func:`echo`)."""


def handles_in(text: str) -> list[str]:
    """The read-back handles ``text`` shows: in compacted results' headers and in offload
    previews, in order (repeats kept)."""
    return _HANDLE_IN_TEXT.findall(text)


def is_readback(call: Mapping[str, Any]) -> bool:
    """Whether a tool call (an entry of an assistant message's ``tool_calls``) reads back."""
    function = call.get("function")
    return isinstance(function, Mapping) and function.get("name") == READBACK_TOOL_NAME


def split_readbacks(
    calls: Iterable[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The calls of one reply, as (the caller's own, the read-backs), each in order."""
    own: list[Mapping[str, Any]] = []
    reads: list[Mapping[str, Any]] = []
    for call in calls:
        (reads if is_readback(call) else own).append(call)
    return own, reads


def find_original(handle: str, messages: Sequence[Any]) -> str | None:
    """The text of the tool result whose handle is ``handle``, newest first, or None."""
    for msg in reversed(messages):
        if not isinstance(msg, Mapping) or msg.get("role") != "tool":
            continue
        content = msg.get("content")
        if isinstance(content, str) and handle_for(str(msg.get("tool_call_id")), content) == handle:
            return content
    return None


async def answer(
    call: Mapping[str, Any],
    messages: Sequence[Any],
    *,
    max_chars: int = 8000,
    store: Any = None,
) -> dict[str, Any]:
    """The ``tool`` message answering one ``ctxmw_expand`` call, from the conversation itself.

    Args:
        call: the tool call, as in the assistant message's ``tool_calls``.
        messages: the conversation the prompt was built from (the caller's whole history, or a
            session's transcript): the originals are found there.
        max_chars: the most characters of the original one answer returns.
        store: a :class:`~ctxmw.context.offload.ResultStore` to look in when the original is
            not among ``messages`` (the ``offload`` strategy's store); None: only ``messages``.
    """
    function = call.get("function")
    raw = function.get("arguments") if isinstance(function, Mapping) else None
    try:
        args = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except (ValueError, RecursionError):  # RecursionError: thousands of nested brackets
        args = None
    if not isinstance(args, dict):
        text = f"Error: the arguments {echo(raw)} are not a JSON object."
    else:
        text = await _answer_text(args, messages, max_chars, store)
    return {"role": "tool", "tool_call_id": str(call.get("id", "")), "content": text}


async def _answer_text(
    args: Mapping[str, Any], messages: Sequence[Any], max_chars: int, store: Any
) -> str:
    handle = args.get("handle")
    if not isinstance(handle, str) or not HANDLE.fullmatch(handle):
        return f"Error: {echo(handle)} is not a handle; copy the 16 hex digits the header names."
    original = find_original(handle, messages)
    if original is None and store is not None:
        record = await store.get(handle)
        original = record.content if record is not None else None
    if original is None:
        return (
            f"[{handle}: this result is no longer in the conversation, so it cannot be read "
            "back. Run the tool again if you need its output.]"
        )
    return read_back(original, handle, args, max_chars)


def read_back(text: str, handle: str, args: Mapping[str, Any], max_chars: int) -> str:
    """The answer for ``args`` (``start``/``end``, ``pattern``, or ``offset``/``limit``) over
    one original ``text``; a bad argument gives an error text naming it."""
    if "offset" in args and not ({"start", "end", "pattern"} & args.keys()):
        return _by_offset(text, handle, args.get("offset"), args.get("limit"), max_chars)
    lines = text.splitlines()
    numbers = numbering(lines)
    pattern = args.get("pattern")
    if pattern is not None:
        if not isinstance(pattern, str) or not pattern:
            return f"Error: pattern={echo(pattern)} must be a non-empty string."
        chosen = _matching(lines, pattern)
        what = f"lines holding {echo(pattern)}"
        if not chosen:
            return f"[{handle}: no line of its {len(lines)} holds {echo(pattern)}.]"
    else:
        found = _range(numbers, args.get("start", 1), args.get("end", -1))
        if isinstance(found, str):
            return found
        chosen, what = found, ""
    return _render(lines, numbers, chosen, handle, what, max_chars)


def _range(numbers: Numbering, start: Any, end: Any) -> list[int] | str:
    """The positions of lines ``start``..``end`` (as numbered), or an error text."""
    start = 1 if start is None else start
    end = -1 if end is None else end
    if not _int(start) or start < 1:
        return f"Error: start={echo(start)} must be a line number from 1."
    if not _int(end) or (end < start and end != -1):
        return f"Error: end={echo(end)} must be a line number from start ({start}), or -1."
    first = numbers.index(start, last=False)
    last = len(numbers.numbers) - 1 if end == -1 else numbers.index(end, last=True)
    return list(range(first, last + 1))


def _matching(lines: Sequence[str], pattern: str) -> list[int]:
    keep: set[int] = set()
    for i, line in enumerate(lines):
        if pattern in line:
            keep.update(range(max(i - CONTEXT_LINES, 0), min(i + CONTEXT_LINES + 1, len(lines))))
    return sorted(keep)


def _render(
    lines: Sequence[str],
    numbers: Numbering,
    chosen: Sequence[int],
    handle: str,
    what: str,
    max_chars: int,
) -> str:
    """The chosen lines (a gutter unless numbers are shown), cut at ``max_chars``."""
    if not chosen:
        return f"[{handle}: no line there; its lines are numbered up to {_last(numbers)}.]"
    out: list[str] = []
    spent, shown = 0, 0
    for k, i in enumerate(chosen):
        line = lines[i] if numbers.shown else f"{numbers.numbers[i]:>6}\t{lines[i]}"
        if k and i > chosen[k - 1] + 1:
            line = f"…\n{line}"
        if out and spent + len(line) + 1 > max_chars:
            break
        out.append(line[:max_chars])  # a first line over the page is cut, never skipped
        spent += len(line) + 1
        shown = k + 1
    first, last = numbers.numbers[chosen[0]], numbers.numbers[chosen[shown - 1]]
    rest = f"; more from start={numbers.numbers[chosen[shown]]}" if shown < len(chosen) else ""
    gutter = "" if numbers.shown else "; the number before each tab is not part of the text"
    scope = f"{what}, " if what else ""
    total = len(lines)
    head = f"[{handle}: {scope}lines {first}-{last} of {total}{rest}{gutter}; earlier output]"
    return "\n".join([head, *out])


def _last(numbers: Numbering) -> int:
    return numbers.numbers[-1] if numbers.numbers else 0


def _by_offset(text: str, handle: str, offset: Any, limit: Any, max_chars: int) -> str:
    total = len(text)
    offset = 0 if offset is None else offset
    if not _int(offset) or not 0 <= offset <= total:
        return f"Error: offset={echo(offset)} must be an integer from 0 to {total} (the length)."
    if limit is not None and (not _int(limit) or limit < 1):
        return f"Error: limit={echo(limit)} must be an integer >= 1 (at most {max_chars})."
    end = min(offset + min(limit or max_chars, max_chars), total)
    rest = "the end" if end == total else f"next offset {end}"
    return f"[{handle}: characters {offset}-{end} of {total}; {rest}]\n{text[offset:end]}"


def echo(value: Any, limit: int = ECHO_CHARS) -> str:
    """``repr(value)``, cut to about ``limit`` characters: an answer never repeats a huge
    argument back to the model (it would cost as much as the original it stands for)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 20]}... ({len(text)} characters in all)"


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
