"""The read-back round in the LiteLLM Proxy: ctxmw answers ``ctxmw_expand`` on every route.

The same round as the library's (:mod:`ctxmw.runtime._readback`, whose :func:`read_back` and
:class:`~ctxmw.runtime._readback_stream.ReadbackStream` run here unchanged), with three things
of the proxy's own:

* **The tool.** The deployment hook declares ``ctxmw_expand`` (in the route's own tool format)
  on every request with tools whose strategies can show a read-back handle, from the first
  one, byte-identical each time (a tools block that changed mid-conversation would rewrite
  the provider's cache of everything after it), unless the client declares a tool of that
  name (:func:`declare`), as the library's :func:`~ctxmw.runtime._readback.tools_to_send` does.
* **The originals** are the request's own messages: a client sends its whole history on every
  request, so an answer is read from them (:func:`~ctxmw.context.readback.answer`) and no
  original is kept anywhere. An answer holds at most ``limits.readback_bytes`` bytes.
* **The extra call** past a reply that only reads back goes through the proxy's router, to the
  request's model group, with the request's own data (its key's metadata): the proxy's spend
  logs bill it to the caller, and its ledger line is marked ``readback``. It is made in the
  route's format, the reply appended as the provider sent it (thinking blocks, reasoning items).

A reply that reads back beside the client's own tool calls reaches the client with its own
calls only; what the next requests need to carry the read-backs again is kept in the shared
state under the conversation's ``readbacks`` key (:mod:`ctxmw.proxy._readback_state`): the ids of
the reply's own calls and each read-back's id and arguments (a handle and a range), never a line.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxmw.context.readback import READBACK_TOOL, READBACK_TOOL_NAME, answer
from ctxmw.messages.form import response_message
from ctxmw.proxy._anthropic import chat_reply_of as anthropic_reply
from ctxmw.proxy._anthropic import streamed_message
from ctxmw.proxy._responses import chat_reply_of as responses_reply
from ctxmw.runtime._readback import refusal, without_readbacks
from ctxmw.types import Message, Messages

__all__ = [
    "ReadbackPlan",
    "declare",
    "field_of",
    "plain",
    "route_tool",
    "router_call_kwargs",
    "router_method",
]

_FUNCTION: dict[str, Any] = READBACK_TOOL["function"]
_NOT_FORWARDED = frozenset({"litellm_logging_obj", "litellm_call_id"})
_ROUTE_FIELDS = {
    "chat": ("messages", "tools"),
    "anthropic": ("messages", "system", "tools"),
    "responses": ("input", "instructions", "tools"),
}
_ROUTER_METHODS = {
    "chat": "acompletion",
    "anthropic": "aanthropic_messages",
    "responses": "aresponses",
}


@dataclass(slots=True)
class ReadbackPlan:
    """One request whose prompt declared ``ctxmw_expand`` (set by the deployment hook).

    Attributes:
        route: ``chat``, ``anthropic`` or ``responses``.
        source: the messages answers are read from (the client's, read-backs kept in).
        max_chars: the most characters of an original one answer returns.
        max_bytes: the most UTF-8 bytes one answer holds (``limits.readback_bytes``).
        entries: the conversation's kept read-backs, as the state held them.
        sent: the route's kwargs as sent upstream (the tool declared), once declared.
        prompt: the strategies' output, in chat form, once declared.
        calls: the extra calls made, as ``(chat wire, response or chunks)``, for the ledger.
        first: the chunks of the request's own stream (the client got others).
    """

    route: str
    source: Messages
    max_chars: int
    max_bytes: int
    entries: list[dict[str, Any]] = field(default_factory=list)
    sent: dict[str, Any] = field(default_factory=dict)
    prompt: Messages = field(default_factory=list)
    calls: list[tuple[dict[str, Any], Any]] = field(default_factory=list)
    first: list[Any] | None = None

    @property
    def declared(self) -> bool:
        """Whether the request's prompt declared ``ctxmw_expand``."""
        return bool(self.sent)

    async def answer(self, calls: Sequence[Mapping[str, Any]], *, refuse: bool) -> Messages:
        """The ``tool`` messages answering ``calls``, each within the byte bound."""
        if refuse:
            return [refusal(c) for c in calls]
        limit = min(self.max_chars, self.max_bytes)
        return [
            _bounded(await answer(c, self.source, max_chars=limit), self.max_bytes) for c in calls
        ]

    def message_of(self, response: Any) -> Message:
        """The reply's assistant message in chat form."""
        if self.route == "chat":
            return response_message(response)
        reply = anthropic_reply if self.route == "anthropic" else responses_reply
        message: Message = reply(plain(response))["choices"][0]["message"]
        return message

    def strip(self, response: Any) -> Any:
        """A copy of the route's reply without its read-backs."""
        if self.route == "chat":
            return without_readbacks(response)
        if self.route == "anthropic":
            return _anthropic_without(response)
        return _responses_without(response)

    def shaped(self, response: Any) -> Any:
        """A reply (or the chunks or events of a stream) as the telemetry reads it."""
        if self.route == "chat":
            return response
        if self.route == "anthropic":
            built = streamed_message(response) if isinstance(response, list) else response
            return anthropic_reply(plain(built))
        if isinstance(response, list):
            ends = [
                field_of(e, "response") for e in response if field_of(e, "response") is not None
            ]
            response = ends[-1] if ends else {}
        return responses_reply(plain(response))

    def follow(
        self, kwargs: dict[str, Any], sent: Messages, response: Any, answers: Messages
    ) -> dict[str, Any]:
        """``kwargs`` with the reply as the provider sent it and the answers at the end
        (``sent``: the chat prompt with them, which a chat request sends as it is)."""
        if self.route == "chat":
            return {**kwargs, "messages": sent}
        if self.route == "anthropic":
            content = field_of(plain(response), "content") or []
            results = [_tool_result(a) for a in answers]
            turns = [
                {"role": "assistant", "content": content},
                {"role": "user", "content": results},
            ]
            return {**kwargs, "messages": [*kwargs["messages"], *turns]}
        items = [plain(i) for i in field_of(response, "output") or []]
        outputs = [_output_item(a) for a in answers]
        given = kwargs.get("input")
        given = (
            [{"role": "user", "content": given}] if isinstance(given, str) else list(given or [])
        )
        return {**kwargs, "input": [*given, *items, *outputs]}


def declare(route: str, sent: dict[str, Any], reads_back: bool) -> dict[str, Any] | None:
    """``sent`` with ``ctxmw_expand`` after the client's tools, or None when this request does
    not get it: the chain shows no handle, the request has no tools, or the client has a tool
    of that name (its own, passed through). Whether this prompt shows a handle yet does not
    matter: the tools block stays the same from a conversation's first request on."""
    tools = sent.get("tools")
    if not reads_back or not isinstance(tools, list) or not tools:
        return None
    if any(_tool_name(t) == READBACK_TOOL_NAME for t in tools):
        return None
    return {**sent, "tools": [*tools, route_tool(route)]}


def route_tool(route: str) -> dict[str, Any]:
    """The read-back tool in the route's format (the same schema on every route)."""
    name, description, schema = _FUNCTION["name"], _FUNCTION["description"], _FUNCTION["parameters"]
    if route == "anthropic":
        return {"name": name, "description": description, "input_schema": schema}
    if route == "responses":
        return {"type": "function", "name": name, "description": description, "parameters": schema}
    return READBACK_TOOL


def router_call_kwargs(plan: ReadbackPlan, data: Mapping[str, Any], stream: bool) -> dict[str, Any]:
    """The kwargs of an extra call: the request's own data (its model group, its key's
    metadata), the prompt as sent, a new call id."""
    kwargs = {k: v for k, v in data.items() if k not in _NOT_FORWARDED}
    for name in _ROUTE_FIELDS[plan.route]:
        if name in plan.sent:
            kwargs[name] = plan.sent[name]
    if not stream:
        kwargs.pop("stream", None)
        kwargs.pop("stream_options", None)
    return kwargs


def router_method(router: Any, route: str) -> Any:
    """The router's call for ``route``."""
    return getattr(router, _ROUTER_METHODS[route])


def _tool_name(tool: Any) -> Any:
    if not isinstance(tool, Mapping):
        return None
    function = tool.get("function")
    return function.get("name") if isinstance(function, Mapping) else tool.get("name")


def _bounded(message: Message, max_bytes: int) -> Message:
    text = str(message.get("content") or "")
    data = text.encode()
    if len(data) <= max_bytes:
        return message
    note = f"\n[cut at the proxy's readback_bytes bound of {max_bytes} bytes]"
    kept = data[: max(max_bytes - len(note.encode()), 0)].decode("utf-8", "ignore")
    return {**message, "content": kept + note}


def field_of(obj: Any, name: str) -> Any:
    """``obj[name]`` of a mapping, else its attribute (None when missing)."""
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def plain(obj: Any) -> Any:
    """A pydantic response or item as a plain dict (dicts pass)."""
    dump = getattr(obj, "model_dump", None)
    return dump(exclude_none=True) if callable(dump) else obj


def _tool_result(message: Message) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": message.get("tool_call_id"),
        "content": message.get("content"),
    }


def _output_item(message: Message) -> dict[str, Any]:
    return {
        "type": "function_call_output",
        "call_id": message.get("tool_call_id"),
        "output": message.get("content"),
    }


def _reads(block: Any) -> bool:
    kind = field_of(block, "type")
    return kind in ("tool_use", "function_call") and field_of(block, "name") == READBACK_TOOL_NAME


def _anthropic_without(response: Any) -> Any:
    out = copy.deepcopy(plain(response))
    content = [b for b in out.get("content") or [] if not _reads(b)]
    out["content"] = content
    if not any(field_of(b, "type") == "tool_use" for b in content):
        out["stop_reason"] = "end_turn"
    return out


def _responses_without(response: Any) -> Any:
    out = copy.deepcopy(response)
    kept = [i for i in field_of(out, "output") or [] if not _reads(i)]
    if isinstance(out, dict):
        out["output"] = kept
    else:
        out.output = kept
    return out
