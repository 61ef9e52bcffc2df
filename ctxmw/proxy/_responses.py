"""An OpenAI Responses request (``/v1/responses``) in chat form, and back.

To chat form: ``instructions`` becomes the system message; each ``input`` message item a chat
message of its role; a run of call items (``function_call``, ``custom_tool_call``, any
``*_call`` with a ``call_id``) one assistant message whose ``tool_calls`` carry their
arguments (a custom tool's ``input``); each output item (``*_call_output``) a ``tool``
message. Items without a chat counterpart (``reasoning``, which must stay just before the item
it belongs to, ``web_search_call``, ``item_reference``...) travel with the next chat message,
so a strategy that drops a round drops them with it, and one that keeps it keeps them in place.

Back: a chat message the strategies kept as it was is the client's own items; a changed one is
rebuilt from its items: a shortened output replaces the item's ``output``, compacted arguments
its ``arguments`` (``input`` for a custom tool), everything else of the item kept.

A request that continues a ``previous_response_id`` chain carries only the new items: its
history lives with the provider, out of ctxmw's reach, so ctxmw leaves it alone (see
:func:`responses_translation`). Clients that send the whole ``input`` every turn (Codex, the
Agents SDK by default, ``store: false``) get the strategies.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxmw.errors import UsageError
from ctxmw.proxy._replies import chat_reply, function_call
from ctxmw.proxy._translation import ORIGIN, Translation
from ctxmw.types import Message, Messages

__all__ = ["ORIGIN", "ResponsesTranslation", "chat_reply_of", "responses_translation"]


_INSTRUCTIONS = -1
_TEXT_INPUT = -2
_ROUTE_ONLY = frozenset(
    {"input", "instructions", "tools", "tool_choice", "reasoning", "text", "include", "store"}
)
_ENDS = ("response.completed", "response.incomplete", "response.failed")


class ResponsesTranslation(Translation):
    """See the module docstring."""

    def __init__(self, instructions: Any, items: Sequence[Any], text_input: bool) -> None:
        self._instructions, self._items, self._text_input = instructions, items, text_input
        super().__init__()
        if isinstance(instructions, str) and instructions:
            self._add({"role": "system", "content": instructions, ORIGIN: [_INSTRUCTIONS]})
        if text_input:
            self._add({"role": "user", "content": items[0]["content"], ORIGIN: [_TEXT_INPUT]})
        else:
            for message in _to_chat(items):
                self._add(message)

    def request(self, kwargs: Mapping[str, Any], prompt: Messages) -> dict[str, Any]:
        """The kwargs with ``instructions`` and ``input`` from ``prompt``."""
        sent = dict(kwargs)
        rest = [m for m in prompt if _origin(m)[:1] != [_INSTRUCTIONS]]
        system = next((m for m in prompt if _origin(m)[:1] == [_INSTRUCTIONS]), None)
        if system is None:
            sent.pop("instructions", None)
        elif not self._unchanged(system):
            sent["instructions"] = _text(system.get("content"))
        if self._text_input and len(rest) == 1 and self._unchanged(rest[0]):
            return sent
        sent["input"] = [item for m in rest for item in self._items_of(m)]
        return sent

    def side_kwargs(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The kwargs without what only the Responses API reads."""
        return {k: v for k, v in kwargs.items() if k not in _ROUTE_ONLY}

    def telemetry(self, response: object) -> object:
        """A Responses response (or its stream's events) as a chat response."""
        if isinstance(response, list | tuple):
            ends = [_get(e, "response") for e in response if _event_type(e) in _ENDS]
            response = next((r for r in reversed(ends) if r is not None), None)
            if response is None:
                return None
        return chat_reply_of(response)

    def _items_of(self, message: Message) -> list[Any]:
        indexes = [i for i in _origin(message) if 0 <= i < len(self._items)]
        if self._unchanged(message):
            if _origin(message) == [_TEXT_INPUT]:
                return [{"role": "user", "content": message.get("content")}]
            return [self._items[i] for i in indexes]
        items = [self._items[i] for i in indexes]
        role = message.get("role")
        if role == "tool":
            return _output_items(message, items)
        if message.get("tool_calls"):
            return _call_items(message, items)
        return _message_items(message, items)


def responses_translation(data: Mapping[str, Any]) -> ResponsesTranslation | None:
    """The translation of a Responses request; None when ctxmw leaves it alone: no ``input``,
    or a ``previous_response_id`` chain (see the module docstring).

    Raises:
        UsageError: an ``input`` item is not an object.
    """
    if data.get("previous_response_id"):
        return None
    given = data.get("input")
    if isinstance(given, str):
        return ResponsesTranslation(data.get("instructions"), [{"content": given}], True)
    if not isinstance(given, list) or not given:
        return None
    for index, item in enumerate(given):
        if not isinstance(item, Mapping):
            raise UsageError(
                f"input[{index}] is {type(item).__name__} {item!r:.60}, not an input item; send "
                'each item as an object such as {"role": "user", "content": "..."}.'
            )
    return ResponsesTranslation(data.get("instructions"), given, False)


def _origin(message: Mapping[str, Any]) -> list[int]:
    value = message.get(ORIGIN)
    return [i for i in value if isinstance(i, int)] if isinstance(value, list) else []


def _kind(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return str(kind)


def _is_call(item: Mapping[str, Any]) -> bool:
    return _kind(item).endswith("_call") and "call_id" in item


def _is_output(item: Mapping[str, Any]) -> bool:
    return _kind(item).endswith("_call_output") and "call_id" in item


def _to_chat(items: Sequence[Mapping[str, Any]]) -> Messages:
    out: Messages = []
    carried: list[int] = []  # items that travel with the next chat message
    calls: list[int] = []
    for i, item in enumerate(items):
        if _is_call(item):
            calls.append(i)
            continue
        if calls:
            out.append(_assistant(items, carried + calls))
            carried, calls = [], []
        if _is_output(item):
            out.append(_tool(item, [*carried, i]))
        elif _kind(item) == "message":
            out.append(_message(item, [*carried, i]))
        else:
            carried.append(i)
            continue
        carried = []
    if calls:
        out.append(_assistant(items, carried + calls))
    elif carried and out:
        out[-1] = {**out[-1], ORIGIN: [*_origin(out[-1]), *carried]}
    elif carried:  # only items without a chat counterpart: keep them, as an empty turn
        out.append({"role": "user", "content": "", ORIGIN: carried})
    return out


def _message(item: Mapping[str, Any], origin: list[int]) -> Message:
    return {"role": item.get("role"), "content": item.get("content"), ORIGIN: origin}


def _assistant(items: Sequence[Mapping[str, Any]], origin: list[int]) -> Message:
    calls = [
        function_call(str(item["call_id"]), str(item.get("name", _kind(item))), _arguments(item))
        for item in (items[i] for i in origin)
        if _is_call(item)
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls, ORIGIN: origin}


def _arguments(item: Mapping[str, Any]) -> str:
    for key in ("arguments", "input"):
        if isinstance(item.get(key), str):
            return str(item[key])
    return json.dumps(item.get("action", {}), ensure_ascii=False)


def _tool(item: Mapping[str, Any], origin: list[int]) -> Message:
    output = item.get("output")
    content = output if isinstance(output, str | list) else json.dumps(output, ensure_ascii=False)
    call_id = str(item["call_id"])
    return {"role": "tool", "tool_call_id": call_id, "content": content, ORIGIN: origin}


def _output_items(message: Message, items: list[Any]) -> list[Any]:
    content, call_id = message.get("content"), message.get("tool_call_id")
    out = [item for item in items if not (_is_output(item) and item["call_id"] == call_id)]
    base = next((it for it in items if _is_output(it) and it["call_id"] == call_id), None)
    if base is None:
        return [*out, {"type": "function_call_output", "call_id": call_id, "output": content}]
    same_shape = isinstance(content, str) == isinstance(base.get("output"), str)
    return [*out, {**base, "output": content} if same_shape else base]


def _call_items(message: Message, items: list[Any]) -> list[Any]:
    calls = {str(c.get("id")): c for c in message.get("tool_calls") or []}
    out = []
    for item in items:
        if not _is_call(item):
            out.append(item)
            continue
        call = calls.pop(str(item["call_id"]), None)
        if call is not None:
            out.append(_with_arguments(item, (call.get("function") or {}).get("arguments")))
    out.extend(_new_call(c) for c in calls.values())
    return out


def _with_arguments(item: Mapping[str, Any], arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return item
    for key in ("arguments", "input"):
        if isinstance(item.get(key), str):
            return {**item, key: arguments}
    return item


def _new_call(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    return {
        "type": "function_call",
        "call_id": call.get("id"),
        "name": function.get("name"),
        "arguments": function.get("arguments", "{}"),
    }


def _message_items(message: Message, items: list[Any]) -> list[Any]:
    base = next((it for it in items if _kind(it) == "message"), None)
    carried = [it for it in items if it is not base]
    if base is None:
        return [*carried, {"role": message.get("role"), "content": message.get("content")}]
    return [*carried, {**base, "content": message.get("content")}]


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(_get(p, "text") or "") for p in content)
    return str(content or "")


def _event_type(event: Any) -> str:
    """A stream event's type: litellm's events carry an enum, whose value is the type."""
    kind = _get(event, "type")
    return str(getattr(kind, "value", kind))


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def chat_reply_of(response: Any) -> dict[str, Any]:
    """A Responses response as a chat response (a dict), for telemetry and read-back."""
    usage = _get(response, "usage")
    details = _get(usage, "input_tokens_details")
    text, calls = "", []
    for item in _get(response, "output") or []:
        if _get(item, "type") == "message":
            text += "".join(str(_get(p, "text") or "") for p in _get(item, "content") or [])
        elif _get(item, "type") == "function_call":
            call_id, name = str(_get(item, "call_id")), str(_get(item, "name"))
            calls.append(function_call(call_id, name, str(_get(item, "arguments") or "{}")))
    return chat_reply(
        text,
        calls,
        prompt_tokens=int(_get(usage, "input_tokens") or 0),
        completion_tokens=int(_get(usage, "output_tokens") or 0),
        cache_read=_get(details, "cached_tokens"),
    )
