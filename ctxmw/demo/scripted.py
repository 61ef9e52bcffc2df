"""A scripted OpenAI-compatible server on 127.0.0.1: an agent framework's provider, offline.

``POST /v1/chat/completions`` (JSON or ``stream: true`` server-sent events) answers like a small
tool-using model, the way llama.cpp's server does (``content: ""`` beside tool calls):

* the last message is a user message and the request offers tools: call the first tool, with
  arguments made from its JSON schema (integers 2, numbers 1.5, strings "x", booleans true);
* the last message is a tool result: call the tool again while this turn (since the last user
  message) has made fewer than ``tool_rounds`` calls (a long agent run), else answer
  ``"Done: <the result>"``. The turn's count travels in the call ids (``call_<n>_r<round>``),
  so it survives a prompt that dropped the turn's older rounds;
* anything else: answer ``"ok"``.

Every request body is kept (``requests``) and its messages checked against the tool-pairing rules
every provider enforces (``problems``). ``fail(n, after=k)`` makes ``n`` requests fail with an
HTTP 400 (the OpenAI SDK does not retry it) once ``k`` more have been answered, to rehearse a turn
retried after a provider error.

Used by ctxmw's framework tests and the ``examples/`` that show ctxmw inside openai-agents,
google-adk and LangChain without a network.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from anyio.abc import TaskGroup

from ctxmw.context.tokens import CHARS_PER_TOKEN
from ctxmw.demo._http import json_response, serve
from ctxmw.messages.validate import scan

__all__ = ["ScriptedProvider"]

_SAMPLES: dict[str, Any] = {"integer": 2, "number": 1.5, "string": "x", "boolean": True}


class ScriptedProvider:
    """The scripted model behind a loopback OpenAI-compatible endpoint (see the module docstring).

    Args:
        tool_rounds: tool calls the model makes in a row before it answers (default one).

    Attributes:
        requests: every chat-completion request body received, in order.
        problems: per request, the tool-pairing problems of its messages (empty lists when valid).
    """

    def __init__(self, *, tool_rounds: int = 1) -> None:
        self.tool_rounds = tool_rounds
        self.requests: list[dict[str, Any]] = []
        self.problems: list[list[tuple[int, str]]] = []
        self._failing: list[bool] = []  # per upcoming request: whether it fails

    def fail(self, n: int = 1, *, after: int = 0) -> None:
        """Make ``n`` requests fail with HTTP 400 (recorded all the same), once ``after`` more
        have been answered."""
        self._failing = [False] * after + [True] * n

    @property
    def prompts(self) -> list[list[dict[str, Any]]]:
        """The ``messages`` of every request, in order."""
        return [list(r.get("messages") or []) for r in self.requests]

    async def serve(self, task_group: TaskGroup) -> str:
        """Listen on a free loopback port until the task group is cancelled; returns the base URL
        (``http://127.0.0.1:PORT/v1``)."""
        return await serve(task_group, self._answer)

    def reply(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The assistant message the script answers ``request`` with."""
        messages = list(request.get("messages") or [])
        last = messages[-1] if messages else {}
        tools = [t for t in request.get("tools") or [] if isinstance(t, Mapping)]
        done = _rounds_this_turn(messages)
        if last.get("role") == "tool" and done >= self.tool_rounds:
            return {"role": "assistant", "content": f"Done: {_text(last.get('content'))}"}
        if last.get("role") in ("user", "tool") and tools:
            fn = tools[0].get("function") or {}
            call = {
                "id": f"call_{len(self.requests)}_r{done + 1}",
                "type": "function",
                "function": {
                    "name": fn.get("name", "tool"),
                    "arguments": json.dumps(_arguments(fn.get("parameters") or {})),
                },
            }
            return {"role": "assistant", "content": "", "tool_calls": [call]}
        return {"role": "assistant", "content": "ok"}

    def _answer(self, method_path: list[str], body: bytes) -> tuple[bytes, bool]:
        if method_path != ["POST", "/v1/chat/completions"]:
            return json_response(
                "404 Not Found", {"error": {"message": " ".join(method_path)}}
            ), True
        request = json.loads(body)
        self.requests.append(request)
        self.problems.append(scan(request.get("messages") or []).problems)
        if self._failing and self._failing.pop(0):
            error = {"message": "scripted failure", "type": "invalid_request_error"}
            return json_response("400 Bad Request", {"error": error}), True
        message = self.reply(request)
        if request.get("stream"):
            return _sse(request, message, len(self.requests)), False
        return json_response("200 OK", _completion(request, message, len(self.requests))), True


def _rounds_this_turn(messages: list[Any]) -> int:
    """Tool calls the script made after the last user message: read from the newest call id,
    else (a framework that renamed the ids) the tool results counted."""
    results = 0
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        results += message.get("role") == "tool"
        for call in message.get("tool_calls") or []:
            _, _, count = str(call.get("id", "")).rpartition("_r")
            if count.isdigit():
                return int(count)
    return results


def _completion(request: Mapping[str, Any], message: dict[str, Any], n: int) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        **_envelope(request, n, "chat.completion"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage(request, message),
    }


def _sse(request: Mapping[str, Any], message: dict[str, Any], n: int) -> bytes:
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    envelope = _envelope(request, n, "chat.completion.chunk")
    chunks = [
        {**envelope, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**envelope, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
    ]
    if (request.get("stream_options") or {}).get("include_usage"):
        chunks.append({**envelope, "choices": [], "usage": _usage(request, message)})
    events = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    return (head + events).encode()


def _envelope(request: Mapping[str, Any], n: int, kind: str) -> dict[str, Any]:
    model = request.get("model", "scripted")
    return {"id": f"scripted-{n}", "object": kind, "created": int(time.time()), "model": model}


def _usage(request: Mapping[str, Any], message: dict[str, Any]) -> dict[str, Any]:
    prompt = len(json.dumps(request.get("messages") or [])) // CHARS_PER_TOKEN + 1
    completion = len(json.dumps(message)) // CHARS_PER_TOKEN + 1
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def _arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    required = schema.get("required") or list(properties)
    return {
        name: _SAMPLES.get(str((properties.get(name) or {}).get("type", "string")).lower(), "x")
        for name in required
    }


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content)
