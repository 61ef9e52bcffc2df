"""One answer to "is this the same message": the normal form every comparison goes through.

Agent frameworks re-send the messages a provider returned in their own spelling: a tool-calling
assistant message comes back with ``content: None`` where the provider said ``""`` (or with no
``content`` at all), keys in another order, a litellm ``Message`` object instead of a dict, the
provider's extras (``provider_specific_fields``, ``refusal``, ``annotations``,
``function_call: None``, reasoning fields) dropped, tool arguments re-serialised with other
spacing. None of that changes what the model is told, so none of it makes two messages differ.

The normal form is used to compare (the stateless caller's history against the save_file) and by
the telemetry's digests (:mod:`ctxmw.messages.canonical`), so "equal" means one thing everywhere.
It is never what is sent or stored: those keep the message exactly as given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ctxmw.messages._json import canonical_json

__all__ = ["IGNORED_KEYS", "normal_key", "normal_message", "same_message"]

IGNORED_KEYS = frozenset(
    {
        "provider_specific_fields",
        "refusal",
        "annotations",
        "function_call",  # legacy; litellm fills it with None beside tool_calls
        "reasoning_content",
        "thinking_blocks",
        "reasoning",
        "audio",
        "images",
        "cache_control",
    }
)
"""Message keys that never make two messages differ (provider extras, reasoning, cache marks)."""


def normal_message(message: Any) -> dict[str, Any]:
    """The normal form of one message (a dict or a litellm/pydantic ``Message``).

    ``None`` values, empty lists and the keys in :data:`IGNORED_KEYS` are dropped; an empty
    ``content`` beside tool calls is absent; a content list of one bare text part is its text;
    tool-call arguments that are JSON are re-serialised canonically.
    """
    data = _as_dict(message)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in IGNORED_KEYS or value is None:
            continue
        out[key] = _tool_calls(value) if key == "tool_calls" else _clean(value)
    if out.get("tool_calls") == []:
        del out["tool_calls"]
    if out.get("tool_calls") and _empty(out.get("content")):
        out.pop("content", None)
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = _bare_text(content)
    return out


def normal_key(message: Any) -> str:
    """The normal form as canonical JSON (keys sorted): hashable, equal for the same message."""
    return canonical_json(normal_message(message))


def same_message(a: Any, b: Any) -> bool:
    """Whether two messages say the same thing to the model (see the module docstring)."""
    if a is b or (isinstance(a, dict) and isinstance(b, dict) and a == b):
        return True  # equal dicts have equal normal forms; the common case is cheap
    return normal_message(a) == normal_message(b)


def _as_dict(message: Any) -> Mapping[str, Any]:
    if isinstance(message, Mapping):
        return message
    dump = getattr(message, "model_dump", None)
    if callable(dump):
        data = dump()
        if isinstance(data, Mapping):
            return data
    raise TypeError(
        f"Cannot compare {message!r} as a chat message: pass an OpenAI-format dict or a "
        "litellm Message."
    )


def _clean(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _clean(v) for k, v in value.items() if v is not None and k != "cache_control"}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    dump = getattr(value, "model_dump", None)
    return _clean(dump()) if callable(dump) else value


def _tool_calls(calls: Any) -> Any:
    if not isinstance(calls, list | tuple):
        return _clean(calls)
    return [_tool_call(_clean(call)) for call in calls]


def _tool_call(call: Any) -> Any:
    if not isinstance(call, dict):
        return call
    call.pop("index", None)  # a streaming artefact
    call.setdefault("type", "function")
    fn = call.get("function")
    if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
        fn["arguments"] = _arguments_json(fn["arguments"])
    return call


def _arguments_json(text: str) -> str:
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        return text
    return canonical_json(value)


def _empty(content: Any) -> bool:
    return content in ("", []) or content is None


def _bare_text(parts: list[Any]) -> Any:
    if len(parts) == 1 and isinstance(parts[0], dict):
        only = parts[0]
        if set(only) == {"type", "text"} and only["type"] == "text":
            return only["text"]
    return parts
