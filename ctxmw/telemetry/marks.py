"""Explicit cache breakpoints (``cache_control`` marks): finding, counting and placing them.

Anthropic and Bedrock Claude cache a prompt only up to a block that carries
``"cache_control": {"type": "ephemeral"}``, four such blocks at most per request. In litellm's
OpenAI-format messages a mark sits on a content part, or on the message itself (litellm moves it
onto the last block it builds from that message). litellm can also add marks itself from the
``cache_control_injection_points`` completion argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

from ctxmw.types import Message

__all__ = [
    "LOOKBACK_BLOCKS",
    "MAX_BREAKPOINTS",
    "CacheMark",
    "blocks",
    "count_marks",
    "injected_indices",
    "is_marked",
    "marked_indices",
    "payload_marks",
    "plan_marks",
    "with_mark",
    "within_lookback",
]

MAX_BREAKPOINTS = 4
"""Anthropic's limit: "A maximum of 4 blocks with cache_control may be provided"."""

LOOKBACK_BLOCKS = 20
"""Anthropic checks for a cache hit at most this many blocks before each breakpoint."""

EPHEMERAL: dict[str, str] = {"type": "ephemeral"}


class CacheMark(TypedDict):
    """One mark of a payload, as the ledger's ``cache_marks`` lists it."""

    index: int
    ttl: str


def count_marks(message: Mapping[str, Any]) -> int:
    """How many ``cache_control`` marks one message carries (message level and content parts)."""
    own = 1 if message.get("cache_control") else 0
    content = message.get("content")
    if not isinstance(content, list):
        return own
    return own + sum(
        1 for part in content if isinstance(part, Mapping) and part.get("cache_control")
    )


def is_marked(message: Mapping[str, Any]) -> bool:
    """Whether the message carries any ``cache_control`` mark."""
    return count_marks(message) > 0


def injected_indices(
    messages: Sequence[Mapping[str, Any]], injection_points: Iterable[Any] | None
) -> set[int]:
    """Indices of the messages litellm marks from ``cache_control_injection_points``.

    Points are ``{"location": "message", "role": r}`` (every message of that role) or
    ``{"location": "message", "index": i}`` (one message; negative counts from the end).
    Other locations (e.g. tool definitions) mark no message.
    """
    found: set[int] = set()
    for point in injection_points or ():
        if not isinstance(point, Mapping) or point.get("location", "message") != "message":
            continue
        index, role = point.get("index"), point.get("role")
        if isinstance(index, int) and -len(messages) <= index < len(messages):
            found.add(index % len(messages))
        elif isinstance(role, str):
            found.update(i for i, msg in enumerate(messages) if msg.get("role") == role)
    return found


def marked_indices(
    messages: Sequence[Mapping[str, Any]], injection_points: Iterable[Any] | None = None
) -> set[int]:
    """Indices of every message that reaches the provider with a mark (own or injected)."""
    own = {i for i, msg in enumerate(messages) if is_marked(msg)}
    return own | injected_indices(messages, injection_points)


def blocks(message: Mapping[str, Any]) -> int:
    """How many content blocks a message becomes on Anthropic's wire (at least 1).

    Each content part is a block, and so is each tool call (a ``tool_use`` block); a tool
    result is one ``tool_result`` block.
    """
    content = message.get("content")
    parts = len(content) if isinstance(content, list) else 1 if content else 0
    calls = message.get("tool_calls")
    return max(parts + (len(calls) if isinstance(calls, list) else 0), 1)


def within_lookback(messages: Sequence[Mapping[str, Any]], entry: int, mark: int) -> bool:
    """Whether a cache entry ending at message ``entry`` is found from a mark at ``mark``.

    Anthropic looks for a hit at most ``LOOKBACK_BLOCKS`` blocks before each breakpoint: the
    blocks after ``entry`` up to ``mark`` must not exceed that. ``entry`` -1 is the start.
    """
    if mark < entry:
        return False
    total = 0
    for i in range(entry + 1, mark + 1):
        total += blocks(messages[i])
        if total > LOOKBACK_BLOCKS:
            return False
    return True


def plan_marks(
    messages: Sequence[Mapping[str, Any]],
    *,
    head: int | None,
    taken: Iterable[int] = (),
    budget: int = MAX_BREAKPOINTS,
) -> list[tuple[int, str]]:
    """Where to put new marks and with which TTL, as ``(index, ttl)`` in message order.

    In order of priority, within ``budget`` new marks and skipping the indices in ``taken``:

    1. the last message, ``5m``: the next call, which extends this prompt, reads all of it;
    2. ``head`` (the end of the stable prefix), ``1h``: it stays byte-stable for a whole epoch,
       so it outlives pauses of more than 5 minutes and the tail's moves;
    3. bridges, ``5m``: walking back from the tail, a mark as far back as the 20-block lookback
       reaches, while the span down to the head (or the start) is longer than the lookback, so
       that a previous tail more than 20 blocks back is still found (a stateless caller that
       sends several new turns at once, a tool round with many parallel calls).

    Longer TTLs come first in the prompt (Anthropic requires it): the head is the only 1h mark
    and every other mark is after it.
    """
    taken = set(taken)
    tail = len(messages) - 1
    chosen: dict[int, str] = {}

    def take(i: int, ttl: str) -> None:
        if len(chosen) < budget and i >= 0 and i not in taken and i not in chosen:
            chosen[i] = ttl

    if tail < 0:
        return []
    take(tail, "5m")
    floor = head if head is not None and head < tail else -1
    if floor >= 0:
        take(floor, "1h")
    anchor = tail
    while len(chosen) < budget and not within_lookback(messages, floor, anchor):
        bridge = _reach(messages, anchor)
        if bridge <= floor or bridge == anchor:
            break
        take(bridge, "5m")
        anchor = bridge
    return sorted(chosen.items())


def _reach(messages: Sequence[Mapping[str, Any]], mark: int) -> int:
    """The earliest message whose end a lookup from ``mark`` still finds."""
    i = mark
    while i > 0 and within_lookback(messages, i - 1, mark):
        i -= 1
    return i


def payload_marks(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    injection_points: Iterable[Any] | None = None,
    *,
    indices: Iterable[int] | None = None,
) -> tuple[CacheMark, ...] | None:
    """The marks a payload carries, in order, with their TTL (``5m`` unless the mark says).

    ``index`` is the message's index, -1 for a mark on the tools list. None when none is marked.
    ``indices``, when known (the prefix tracker has them), are the marked messages (own or
    injected): only those are looked at, so a long payload is not walked again.
    """
    found: list[CacheMark] = [
        CacheMark(index=-1, ttl=_ttl(tool.get("cache_control")))
        for tool in tools or ()
        if isinstance(tool, Mapping) and tool.get("cache_control")
    ][-1:]
    if indices is None:
        indices = marked_indices(messages, injection_points)
    for i in sorted(indices):
        found.append(CacheMark(index=i, ttl=_ttl(_last_control(messages[i]))))
    return tuple(found) or None


def _last_control(message: Mapping[str, Any]) -> Any:
    content = message.get("content")
    parts = [p for p in content if isinstance(p, Mapping)] if isinstance(content, list) else []
    marks = [p["cache_control"] for p in parts if p.get("cache_control")]
    own = message.get("cache_control")
    return marks[-1] if marks else own or None


def _ttl(control: Any) -> str:
    ttl = control.get("ttl") if isinstance(control, Mapping) else None
    return str(ttl) if ttl else "5m"


def with_mark(message: Message, ttl: str | None = None) -> Message:
    """A new message with a mark on its last block; the input is never mutated.

    ``ttl`` (``"5m"`` or ``"1h"``) is written into the mark when given; without one the
    provider's default (5 minutes) applies.

    String content becomes one text part carrying the mark, the shape litellm expects for
    Anthropic. List content gets the mark on a copy of its last part. A message without content
    (an assistant turn that only calls tools, a tool result) gets a message-level mark, which
    litellm moves onto the last block it builds (the last tool_use or the tool_result).
    """
    content = message.get("content")
    mark: dict[str, str] = {**EPHEMERAL, "ttl": ttl} if ttl else dict(EPHEMERAL)
    if isinstance(content, str) and content and message.get("role") != "tool":
        part = {"type": "text", "text": content, "cache_control": mark}
        return {**message, "content": [part]}
    if isinstance(content, list) and content and isinstance(content[-1], Mapping):
        last = {**content[-1], "cache_control": mark}
        return {**message, "content": [*content[:-1], last]}
    return {**message, "cache_control": mark}
