"""An Anthropic Messages request (``/v1/messages``) in chat form, and back.

To chat form: ``system`` becomes the system message; a user message's ``tool_result`` blocks
become ``tool`` messages (one per block, in order) and its other blocks a user message; an
assistant message becomes one assistant message whose ``tool_use`` blocks are ``tool_calls``
(arguments: the ``input`` as JSON) and whose other blocks (text, thinking, ...) stay its
content. A mark on a ``tool_result`` or a final ``tool_use`` block becomes a message-level
``cache_control``, as litellm spells it.

Back: a message the strategies kept as it was is the client's own message object (with all
its blocks, signatures and marks); pieces of one message stay one message. A changed piece is
rebuilt from the block it came from: a shortened result keeps its ``tool_use_id``, its
``is_error`` and its mark; compacted arguments become the ``tool_use`` block's ``input`` when
they are still a JSON object (else the block keeps its own); thinking blocks are always sent
as the provider made them (Anthropic checks their signatures). Messages the strategies added
(an inbox note) are plain user messages: the API joins consecutive turns of one role.

The answer is read for telemetry in Anthropic's format, except a whole answer LiteLLM made from
another API's (a deployment without the Messages API): LiteLLM keeps the chat response it
translated on the request's logging object (``bridged_model_response``), whose usage is the
provider's own; the Anthropic shape leaves out cache reads of 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxmw.errors import UsageError
from ctxmw.proxy._replies import chat_reply, function_call
from ctxmw.proxy._request import checked_messages
from ctxmw.proxy._translation import ORIGIN, Translation
from ctxmw.types import Message, Messages

__all__ = [
    "ORIGIN",
    "AnthropicTranslation",
    "anthropic_translation",
    "chat_reply_of",
    "streamed_message",
]


_VERBATIM = frozenset({"thinking", "redacted_thinking"})
_ROUTE_ONLY = ("system", "tools", "tool_choice", "thinking", "metadata", "messages")


@dataclass(frozen=True, slots=True)
class _Origin:
    index: int  # the client's message
    blocks: tuple[int, ...] | None  # its content blocks this chat message holds (None: all)


class AnthropicTranslation(Translation):
    """See the module docstring."""

    def __init__(
        self, system: Any, messages: Sequence[Mapping[str, Any]], request: object = None
    ) -> None:
        self._system, self._messages, self._request = system, messages, request
        super().__init__()
        if system:
            self._add({"role": "system", "content": system})
        for i, message in enumerate(messages):
            for chat, blocks in _to_chat(message):
                self._add({**chat, ORIGIN: [i, list(blocks) if blocks is not None else None]})

    def request(self, kwargs: Mapping[str, Any], prompt: Messages) -> dict[str, Any]:
        """The kwargs with ``system`` and ``messages`` from ``prompt``."""
        system, messages = self._back(prompt)
        sent = {**kwargs, "messages": messages}
        if system:
            sent["system"] = system
        else:
            sent.pop("system", None)
        return sent

    def side_kwargs(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The kwargs without what only the Messages API reads."""
        return {k: v for k, v in kwargs.items() if k not in _ROUTE_ONLY}

    def telemetry(self, response: object) -> object:
        """A Messages response (or its stream's server-sent events) as a chat response."""
        if isinstance(response, list | tuple):
            return chat_reply_of(streamed_message(response))
        if not isinstance(response, Mapping):
            return response
        bridged = getattr(self._request, "bridged_model_response", None)
        return bridged if bridged is not None else chat_reply_of(response)

    def _back(self, prompt: Messages) -> tuple[Any, list[Any]]:
        systems = [m for m in prompt if m.get("role") == "system"]
        out: list[Any] = []
        group: list[tuple[Message, _Origin | None]] = []
        for message in (m for m in prompt if m.get("role") != "system"):
            origin = _origin_of(message, len(self._messages))
            if group and (origin is None or _index(group) != origin.index):
                out.append(self._message(group))
                group = []
            group.append((message, origin))
        if group:
            out.append(self._message(group))
        return self._system_of(systems), out

    def _system_of(self, systems: Messages) -> Any:
        if len(systems) == 1 and self._unchanged(systems[0]):
            return self._system
        blocks = [b for m in systems for b in _user_blocks(m)]
        if len(blocks) == 1 and set(blocks[0]) == {"type", "text"}:
            return blocks[0]["text"]
        return blocks

    def _message(self, group: list[tuple[Message, _Origin | None]]) -> Any:
        index = _index(group)
        original = self._messages[index] if index is not None else None
        if original is not None and self._whole(group, original):
            return original
        first = group[0][0]
        role = "assistant" if first.get("role") == "assistant" else "user"
        kept = {k: v for k, v in (original or {}).items() if k not in ("role", "content")}
        if len(group) == 1 and _plain_text(first):
            return {**kept, "role": role, "content": first["content"]}
        blocks = [b for m, o in group for b in self._blocks(m, o, original)]
        return {**kept, "role": role, "content": blocks}

    def _whole(self, group: list[tuple[Message, _Origin | None]], original: Any) -> bool:
        """Every piece of ``original`` is here, unchanged."""
        if not all(self._unchanged(m) for m, _ in group):
            return False
        held = [o.blocks if o is not None else () for _, o in group]
        content = original.get("content")
        if not isinstance(content, list):
            return held == [None]
        return sorted(j for blocks in held for j in blocks or ()) == list(range(len(content)))

    def _blocks(self, message: Message, origin: _Origin | None, original: Any) -> list[Any]:
        content = original.get("content") if original is not None else None
        if origin is not None and self._unchanged(message):
            if isinstance(content, list) and origin.blocks is not None:
                return [content[j] for j in origin.blocks]
            return _parts(content)
        role = message.get("role")
        if role == "tool":
            return [_tool_result(message, _base_block(content, origin, "tool_result"))]
        if role == "assistant":
            return _assistant_blocks(message, content if isinstance(content, list) else [])
        return _user_blocks(message)


def anthropic_translation(data: Mapping[str, Any]) -> AnthropicTranslation | None:
    """The translation of a Messages request (None without a ``messages`` list).

    Raises:
        UsageError: a message is not an object, or a content block is not one.
    """
    messages = data.get("messages")
    if not isinstance(messages, list):
        return None
    for index, message in enumerate(checked_messages(messages)):
        content = message.get("content")
        if isinstance(content, list) and not all(isinstance(b, Mapping) for b in content):
            raise UsageError(
                f"messages[{index}].content holds a block that is not an object; send content "
                'blocks as objects such as {"type": "text", "text": "..."}.'
            )
    return AnthropicTranslation(data.get("system"), messages, data.get("litellm_logging_obj"))


def _origin_of(message: Message, count: int) -> _Origin | None:
    value = message.get(ORIGIN)
    if not isinstance(value, list) or len(value) != 2:
        return None
    index, blocks = value
    if not isinstance(index, int) or not 0 <= index < count:
        return None
    return _Origin(index, tuple(blocks) if isinstance(blocks, list) else None)


def _plain_text(message: Message) -> bool:
    """A user message whose text stays a string (no mark to carry)."""
    plain = message.get("role") == "user" and not message.get("cache_control")
    return plain and isinstance(message.get("content"), str)


def _index(group: list[tuple[Message, _Origin | None]]) -> int | None:
    origin = group[0][1]
    return origin.index if origin is not None else None


def _type(block: Any) -> str:
    return str(block.get("type", "")) if isinstance(block, Mapping) else ""


def _to_chat(message: Mapping[str, Any]) -> list[tuple[Message, tuple[int, ...] | None]]:
    role, content = message.get("role"), message.get("content")
    if not isinstance(content, list):
        return [({"role": role, "content": content}, None)]
    if role == "assistant":
        return [(_assistant(content), tuple(range(len(content))))]
    out: list[tuple[Message, tuple[int, ...] | None]] = []
    run: list[int] = []
    for j, block in enumerate(content):
        if _type(block) != "tool_result":
            run.append(j)
            continue
        if run:
            out.append(({"role": role, "content": [content[k] for k in run]}, tuple(run)))
            run = []
        out.append((_tool(block), (j,)))
    if run:
        out.append(({"role": role, "content": [content[k] for k in run]}, tuple(run)))
    return out


def _tool(block: Mapping[str, Any]) -> Message:
    content = block.get("content")
    message: Message = {
        "role": "tool",
        "tool_call_id": block.get("tool_use_id"),
        "content": content if content is not None else "",
    }
    if block.get("cache_control"):
        message["cache_control"] = block["cache_control"]
    return message


def _assistant(content: list[Any]) -> Message:
    uses = [b for b in content if _type(b) == "tool_use"]
    parts = [b for b in content if _type(b) != "tool_use"]
    message: Message = {"role": "assistant", "content": parts or None}
    if uses:
        message["tool_calls"] = [
            function_call(str(b.get("id")), str(b.get("name")), _json(b.get("input", {})))
            for b in uses
        ]
    last = content[-1] if content else {}
    if _type(last) == "tool_use" and last.get("cache_control"):
        message["cache_control"] = last["cache_control"]
    return message


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _base_block(content: Any, origin: _Origin | None, kind: str) -> Mapping[str, Any] | None:
    if origin is None or not isinstance(content, list) or not origin.blocks:
        return None
    block = content[origin.blocks[0]]
    return block if _type(block) == kind else None


def _tool_result(message: Message, base: Mapping[str, Any] | None) -> dict[str, Any]:
    block: dict[str, Any] = dict(base) if base is not None else {"type": "tool_result"}
    block["tool_use_id"] = message.get("tool_call_id")
    content: Any = message.get("content")
    lifted: Any = None
    if isinstance(content, list):
        parts = [dict(p) if isinstance(p, Mapping) else p for p in content]
        if parts and isinstance(parts[-1], dict):
            lifted = parts[-1].pop("cache_control", None)
        content = parts
    block["content"] = content if content is not None else ""
    control = message.get("cache_control") or lifted
    if control:
        block["cache_control"] = control
    else:
        block.pop("cache_control", None)
    return block


def _assistant_blocks(message: Message, base: list[Any]) -> list[Any]:
    calls = {str(c.get("id")): c for c in message.get("tool_calls") or []}
    parts = _parts(message.get("content"))
    out: list[Any] = []
    for block in base:
        if _type(block) == "tool_use":
            call = calls.pop(str(block.get("id")), None)
            if call is not None:
                out.append(_tool_use(block, call))
        elif parts:
            part = parts.pop(0)
            out.append(block if _type(block) in _VERBATIM else part)
    out.extend(parts)
    out.extend(_tool_use({"type": "tool_use", "input": {}}, c) for c in calls.values())
    return _marked(out, message.get("cache_control"))


def _tool_use(block: Mapping[str, Any], call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    out = {**block, "id": call.get("id"), "name": function.get("name", block.get("name"))}
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:  # not JSON any more: the block keeps its own input
        return out
    if isinstance(arguments, dict):
        out["input"] = arguments
    return out


def _user_blocks(message: Message) -> list[Any]:
    return _marked(_parts(message.get("content")), message.get("cache_control"))


def _parts(content: Any) -> list[Any]:
    if isinstance(content, list):
        return list(content)
    if isinstance(content, str) and content:
        return [{"type": "text", "text": content}]
    return []


def _marked(blocks: list[Any], control: Any) -> list[Any]:
    if control and blocks and isinstance(blocks[-1], Mapping):
        blocks[-1] = {**blocks[-1], "cache_control": control}
    return blocks


def chat_reply_of(message: Mapping[str, Any]) -> dict[str, Any]:
    """A Messages response (a dict) as a chat response (a dict), for telemetry and read-back."""
    content = message.get("content") or []
    usage = message.get("usage") or {}
    read = usage.get("cache_read_input_tokens")
    write = usage.get("cache_creation_input_tokens")
    uses = [b for b in content if _type(b) == "tool_use"]
    return chat_reply(
        "".join(str(b.get("text", "")) for b in content if _type(b) == "text"),
        [function_call(str(b.get("id")), str(b.get("name")), _json(b.get("input"))) for b in uses],
        prompt_tokens=int(usage.get("input_tokens") or 0) + int(read or 0) + int(write or 0),
        completion_tokens=int(usage.get("output_tokens") or 0),
        cache_read=read,
        cache_write=write,
    )


def streamed_message(chunks: Sequence[Any]) -> dict[str, Any]:
    """The message a stream of Messages events built (text, tool uses, usage)."""
    message: dict[str, Any] = {"content": [], "usage": {}}
    partial: dict[int, str] = {}
    for event in _events(chunks):
        kind = event.get("type")
        if kind == "message_start":
            message["usage"] = dict((event.get("message") or {}).get("usage") or {})
        elif kind == "content_block_start":
            message["content"].append(dict(event.get("content_block") or {}))
        elif kind == "content_block_delta" and message["content"]:
            _apply_delta(message["content"][-1], event.get("delta") or {}, partial)
        elif kind == "message_delta":
            message["usage"].update(event.get("usage") or {})
    for block_id, text in partial.items():
        for block in message["content"]:
            if id(block) == block_id:
                block["input"] = _loads(text)
    return message


def _apply_delta(block: dict[str, Any], delta: Mapping[str, Any], partial: dict[int, str]) -> None:
    if delta.get("type") == "text_delta":
        block["text"] = str(block.get("text", "")) + str(delta.get("text", ""))
    elif delta.get("type") == "thinking_delta":  # a reply read back is sent again, signed
        block["thinking"] = str(block.get("thinking", "")) + str(delta.get("thinking", ""))
    elif delta.get("type") == "signature_delta":
        block["signature"] = str(delta.get("signature", ""))
    elif delta.get("type") == "input_json_delta":
        partial[id(block)] = partial.get(id(block), "") + str(delta.get("partial_json", ""))


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return {}


def _events(chunks: Sequence[Any]) -> list[Mapping[str, Any]]:
    """The JSON events of a stream given as server-sent-event bytes (or already parsed)."""
    events: list[Mapping[str, Any]] = [c for c in chunks if isinstance(c, Mapping)]
    raw = b"".join(c if isinstance(c, bytes) else str(c).encode() for c in chunks if _is_text(c))
    for line in raw.decode("utf-8", "replace").splitlines():
        if line.startswith("data:"):
            parsed = _loads(line[5:].strip())
            if isinstance(parsed, Mapping):
                events.append(parsed)
    return events


def _is_text(chunk: Any) -> bool:
    return isinstance(chunk, bytes | str)
