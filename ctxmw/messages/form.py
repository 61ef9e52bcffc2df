"""Reading one message: its role, its tool calls and their names, its layer, its None-free form,
and any message (a litellm/pydantic object, a response's choice) as a plain OpenAI-format dict.

Every module that needs one of these asks here, so a malformed message (a non-dict, a tool call
without a ``function``, a name that is not a string) is read the same way everywhere: as
missing, never as a crash.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ctxmw.types import Message

__all__ = [
    "LAYERS",
    "call_arguments",
    "call_name",
    "call_names",
    "held_bytes",
    "layer_of",
    "message_dict",
    "message_dicts",
    "response_message",
    "role_of",
    "tool_calls_of",
    "without_none",
]

LAYERS = ("system", "history", "tool_results", "current")
"""The layers of a prompt's messages, as ``ctxmw.budget`` and the telemetry count them."""


def role_of(message: Any) -> Any:
    """The message's ``role`` (None for anything that is not a mapping)."""
    return message.get("role") if isinstance(message, Mapping) else None


def tool_calls_of(message: Any) -> list[dict[str, Any]]:
    """The tool calls (dicts) an assistant message asks for; [] when it has none."""
    if role_of(message) != "assistant":
        return []
    calls = message.get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def call_name(tool_call: Any) -> str:
    """The function name of one tool call ('' when missing or malformed)."""
    fn = tool_call.get("function") if isinstance(tool_call, Mapping) else None
    name = fn.get("name") if isinstance(fn, Mapping) else None
    return name if isinstance(name, str) else ""


def call_arguments(tool_call: Any) -> Any:
    """The raw ``arguments`` of one tool call (JSON text as sent; None when missing)."""
    fn = tool_call.get("function") if isinstance(tool_call, Mapping) else None
    return fn.get("arguments") if isinstance(fn, Mapping) else None


def call_names(message: Any) -> list[str]:
    """The function name of every tool call of an assistant message, in order."""
    return [call_name(tc) for tc in tool_calls_of(message)]


def layer_of(message: Any, current: bool) -> str:
    """The layer a message counts in: ``system``, ``tool_results``, ``current`` or ``history``.

    Args:
        message: one message of a prompt.
        current: whether it is the newest user message of the prompt.
    """
    role = role_of(message)
    if role in ("system", "developer"):
        return "system"
    if role == "tool":
        return "tool_results"
    return "current" if current else "history"


def without_none(value: Any) -> Any:
    """``value`` with every ``None`` dict value left out, recursively (lists keep their items).

    ``None`` carries no information on the wire: a provider, litellm and a stored transcript
    read ``{"content": None}`` and a missing ``content`` alike.
    """
    if isinstance(value, dict):
        return {k: without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_none(v) for v in value]
    return value


def message_dicts(messages: Sequence[Any]) -> list[Message]:
    """:func:`message_dict` of each message; a list of plain dicts is copied at C speed."""
    if list(map(type, messages)).count(dict) == len(messages):  # in C, no hashing
        return list(messages)
    return list(map(message_dict, messages))


def message_dict(message: Any) -> Message:
    """A message as a plain OpenAI-format dict, without losing anything it carries.

    Dicts pass through as they are (the same object). litellm/pydantic ``Message`` objects are
    dumped with every field that holds a value: ``tool_calls``, ``thinking_blocks``,
    ``provider_specific_fields``, ``reasoning_content``...; only ``None`` (no information) is left
    out, and a ``provider_specific_fields`` left empty by that is dropped too.

    Raises:
        TypeError: ``message`` is neither a mapping nor a pydantic model.
    """
    if isinstance(message, dict):
        return message
    if isinstance(message, Mapping):
        return dict(message)
    dump = getattr(message, "model_dump", None)
    if dump is None:
        raise TypeError(
            f"Cannot store {message!r} as a chat message: pass an OpenAI-format dict or a "
            "litellm Message."
        )
    data: dict[str, Any] = without_none(dump())
    if data.get("provider_specific_fields") == {}:
        del data["provider_specific_fields"]
    return data


def response_message(response: Any) -> Message:
    """The assistant message of a completion response (its first choice), as a dict.

    Works on a litellm ``ModelResponse`` and on anything shaped like one
    (``response.choices[0].message``), which is all an injected completion function must return.
    """
    choices = getattr(response, "choices", None)
    if not choices:
        raise TypeError(
            f"The completion function returned {type(response).__name__} without choices; "
            "it must return a litellm ModelResponse (or an object with .choices[0].message)."
        )
    # A copy: a duck-typed response may hand out its own dict, which must stay untouched.
    message = dict(message_dict(choices[0].message))
    message.setdefault("role", "assistant")
    return message


def held_bytes(value: object) -> int:
    """About how many bytes ``value`` (a message, or any JSON-like value) keeps alive: the size
    of every object in it, dicts, lists and tuples walked (iteratively: no recursion to
    exhaust). Objects it shares with others count in each (an over-estimate, never under)."""
    total, stack, getsizeof = 0, [value], sys.getsizeof
    while stack:
        item = stack.pop()
        total += getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return total
