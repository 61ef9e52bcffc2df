"""A request's messages as a tenant sent them: refused with a reason, never a crash.

The proxy parses any JSON a client sends. ``checked_messages`` turns what cannot be a message
into a :class:`~ctxmw.errors.InvalidTranscriptError` (HTTP 400 naming the index); a message
nested deeper than Python can walk is found only when it trips (``RecursionError``), so the
normal path pays nothing for it, and :func:`nested_too_deep` then names it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxmw.errors import InvalidTranscriptError
from ctxmw.types import Messages

__all__ = ["MAX_DEPTH", "checked_messages", "nested_too_deep"]

MAX_DEPTH = 100
"""The deepest nesting of one message that :func:`nested_too_deep` reports as acceptable."""


def checked_messages(messages: Sequence[Any]) -> Messages:
    """``messages`` when every entry is a mapping.

    Raises:
        InvalidTranscriptError: an entry is not a JSON object (the first one named).
    """
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidTranscriptError(
                f"messages[{index}] is {type(message).__name__} {message!r:.60}, not a message "
                'object; send each message as an object such as {"role": "user", "content": '
                '"..."}.',
                index,
            )
    return list(messages)


def nested_too_deep(messages: Sequence[Any]) -> str:
    """The reason to refuse a request whose messages nest too deep, naming the first one."""
    index = next((i for i, m in enumerate(messages) if _depth(m) > MAX_DEPTH), None)
    where = f"messages[{index}]" if index is not None else "a message"
    return (
        f"{where} nests more than {MAX_DEPTH} levels of objects and lists; no chat message "
        "needs that. Send message content as text or content parts."
    )


def _depth(value: object) -> int:
    """How deep ``value`` nests (iteratively: no recursion to exhaust), capped past the limit."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return depth
        deepest = max(deepest, depth)
        if isinstance(item, Mapping):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list | tuple):
            stack.extend((child, depth + 1) for child in item)
    return deepest
