"""A loopback provider of three APIs: OpenAI's ``/v1/chat/completions`` and ``/v1/responses``
and Anthropic's ``/v1/messages``, each answering in its own format (JSON, or server-sent events
with ``stream``) and as strict as the real one: a request its API would refuse (a top-level
field the API does not have, metadata it does not take, a broken tool pairing: see
:mod:`tests._route_formats`) is answered 400 with the reasons, in that API's error format.

The scripted model answers every request with a line of text and one tool call, whose id names
the request (``call_<n>``, ``toolu_<n>``: the ``n``-th request this upstream received). Usage
reports cache reads the way a prefix cache does: the longest prefix of earlier requests, by
message (item), four bytes a token; :attr:`RouteUpstream.reported` keeps what each answer said.
Responses are stored by id, so a ``previous_response_id`` chain is resolved and checked whole.

With ``read_back``, a request that declares ``ctxmw_expand``, shows a read-back handle and
holds no read-back yet is answered with a call reading lines 1-3 of the first handle it shows
(ctxmw answers it, and calls again with the answer at the end of the prompt); with ``mixed``
too, that answer makes its usual ``read_file`` call and the read-back after it (ctxmw keeps the
read-back for the next prompts, and the client gets its own call only).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Sequence
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple

from tests._route_formats import (
    anthropic_problems,
    chat_problems,
    field_problems,
    responses_problems,
)
from tests.proxy._harness import reply

__all__ = ["OUTPUT_TOKENS", "Call", "Reported", "RouteUpstream"]

OUTPUT_TOKENS = 20
READBACK = "ctxmw_expand"
_CALLED = '"name": "ctxmw_expand"'
_HANDLE = re.compile(r"ctxmw_expand handle ([0-9a-f]{16})")


class Call(NamedTuple):
    """One tool call of the scripted model: the tool's name and its arguments."""

    name: str
    arguments: dict[str, Any]


class Reported(NamedTuple):
    """What one answer reported: prompt tokens (cached ones included), cache reads, output."""

    prompt: int
    cached: int
    completion: int


class RouteUpstream:
    """See the module docstring.

    Attributes:
        requests: ``(path, body)`` of every request, in order.
        problems: per request, what its API refused (empty lists when it answered 200).
        reported: per request, the usage its answer reported (None when refused).
    """

    def __init__(self, *, read_back: bool = False, mixed: bool = False) -> None:
        self.read_back, self.mixed = read_back, mixed
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.problems: list[list[str]] = []
        self.reported: list[Reported | None] = []
        self._stored: dict[str, list[Any]] = {}  # response id -> the chain's items, output too
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def base(self) -> str:
        """``http://127.0.0.1:PORT``: the Anthropic deployment's api_base (``/v1`` for OpenAI)."""
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def bodies(self, path: str) -> list[dict[str, Any]]:
        """The request bodies sent to ``path``, in order."""
        return [body for p, body in self.requests if p == path]

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], list[Any]]:
        """The status, response and stream events of one request."""
        with self._lock:
            n = len(self.requests)
            self.requests.append((path, body))
            api = _api(path)
            problems = field_problems(api, body)
            if api == "chat":
                units, answer = body.get("messages") or [], _chat
                problems += chat_problems(units)
            elif api == "messages":
                units, answer = [body.get("system"), *(body.get("messages") or [])], _message
                problems += anthropic_problems(body)
            else:
                items = self._chain(body, problems)
                units = [body.get("instructions"), *items]
                answer = partial(self._response, items=items)
            self.problems.append(problems)
            if problems:
                self.reported.append(None)
                return 400, _error(api, problems), []
            usage = Reported(*self._cached(units), OUTPUT_TOKENS)
            self.reported.append(usage)
            response, events = answer(n, body, usage, tools=self._tools(n, body))
            return 200, response, events

    def _tools(self, n: int, body: dict[str, Any]) -> list[Call]:
        """The calls the scripted model makes: ``read_file``, a read-back, or both (see the
        module doc); the first has the request's id, the others that id and ``_<i>``."""
        tools = json.dumps(body.get("tools") or [])
        rest = json.dumps({k: v for k, v in body.items() if k != "tools"})
        shown = _HANDLE.findall(rest)
        own = Call("read_file", _arguments(n))
        if self.read_back and READBACK in tools and shown and _CALLED not in rest:
            read = Call(READBACK, {"handle": shown[0], "start": 1, "end": 3})
            return [own, read] if self.mixed else [read]
        return [own]

    def _chain(self, body: dict[str, Any], problems: list[str]) -> list[Any]:
        given = body.get("input")
        items = given if isinstance(given, list) else [{"role": "user", "content": given}]
        previous = body.get("previous_response_id")
        if previous and previous not in self._stored:
            problems.append(f"unknown previous_response_id {previous!r}")
            return items
        chained = [*self._stored.get(str(previous), []), *items]
        problems += responses_problems(chained)
        return chained

    def _cached(self, units: Sequence[Any]) -> tuple[int, int]:
        """(prompt tokens, tokens of the longest prefix seen before), four bytes a token."""
        digest, prompt, cached, known = hashlib.sha256(), 0, 0, True
        for unit in units:
            raw = json.dumps(unit, sort_keys=True).encode()
            digest.update(raw)
            tokens = max(len(raw) // 4, 1)
            prompt += tokens
            if known and digest.digest() in self._seen:
                cached += tokens
            else:
                known = False
            self._seen.add(digest.digest())
        return prompt, cached

    def _response(
        self,
        n: int,
        body: dict[str, Any],
        usage: Reported,
        *,
        items: list[Any],
        tools: list[Call],
    ) -> tuple[dict[str, Any], list[Any]]:
        text = {"type": "output_text", "text": _text(n), "annotations": []}
        message = {"type": "message", "id": f"msg_{n}", "status": "completed"}
        output = [{**message, "role": "assistant", "content": [text]}]
        for i, tool in enumerate(tools):
            call = {"type": "function_call", "id": _id("fc", n, i), "call_id": _id("call", n, i)}
            output.append({**call, "name": tool.name, "arguments": json.dumps(tool.arguments)})
        response_id = f"resp_{n}"
        self._stored[response_id] = [*items, *output]
        response = {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": body["model"],
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": usage.prompt,
                "output_tokens": usage.completion,
                "total_tokens": usage.prompt + usage.completion,
                "input_tokens_details": {"cached_tokens": usage.cached},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
        events = [
            {"type": "response.created", "response": {**response, "status": "in_progress"}},
            *(
                event
                for i, item in enumerate(output)
                for event in (
                    {"type": "response.output_item.added", "output_index": i, "item": item},
                    {"type": "response.output_item.done", "output_index": i, "item": item},
                )
            ),
            {"type": "response.completed", "response": response},
        ]
        return response, [{**e, "sequence_number": i} for i, e in enumerate(events)]


def _api(path: str) -> str:
    if path.endswith("/chat/completions"):
        return "chat"
    return "messages" if path.endswith("/messages") else "responses"


def _id(prefix: str, n: int, i: int) -> str:
    """The id of the ``i``-th call of the ``n``-th answer (``toolu_0007``, ``call_7_1``)."""
    base = f"{prefix}_{n:04d}" if prefix == "toolu" else f"{prefix}_{n}"
    return f"{base}_{i}" if i else base


def _text(n: int) -> str:
    return f"Reading file {n}."


def _arguments(n: int) -> dict[str, Any]:
    return {"path": f"src/module_{n}.py", "reason": "look for the bug " * 8}


def _error(api: str, problems: list[str]) -> dict[str, Any]:
    message = "; ".join(problems)
    if api == "messages":
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error", "param": None}}


def _chat(
    n: int, body: dict[str, Any], usage: Reported, *, tools: list[Call]
) -> tuple[dict[str, Any], list[Any]]:
    calls = [
        {
            "id": _id("call", n, i),
            "type": "function",
            "function": {"name": t.name, "arguments": json.dumps(t.arguments)},
        }
        for i, t in enumerate(tools)
    ]
    message = {"role": "assistant", "content": _text(n), "tool_calls": calls}
    chat_usage = {
        "prompt_tokens": usage.prompt,
        "completion_tokens": usage.completion,
        "total_tokens": usage.prompt + usage.completion,
        "prompt_tokens_details": {"cached_tokens": usage.cached},
    }
    head = {"id": f"chatcmpl-{n}", "created": int(time.time()), "model": body["model"]}
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    response = {**head, "object": "chat.completion", "choices": [choice], "usage": chat_usage}
    chunk = {**head, "object": "chat.completion.chunk"}
    deltas = [
        {"role": "assistant", "content": _text(n)},
        *({"tool_calls": [{"index": i, **call}]} for i, call in enumerate(calls)),
    ]
    events = [{**chunk, "choices": [{"index": 0, "delta": d}]} for d in deltas]
    events.append({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    if (body.get("stream_options") or {}).get("include_usage"):  # as OpenAI: only when asked
        events.append({**chunk, "choices": [], "usage": chat_usage})
    return response, events


def _message(
    n: int, body: dict[str, Any], usage: Reported, *, tools: list[Call]
) -> tuple[dict[str, Any], list[Any]]:
    uses = [
        {"type": "tool_use", "id": _id("toolu", n, i), "name": t.name, "input": t.arguments}
        for i, t in enumerate(tools)
    ]
    message_usage = {
        "input_tokens": usage.prompt - usage.cached,
        "output_tokens": usage.completion,
        "cache_read_input_tokens": usage.cached,
        "cache_creation_input_tokens": 0,
    }
    message = {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": body["model"]}
    message |= {"content": [{"type": "text", "text": _text(n)}, *uses], "stop_reason": "tool_use"}
    message |= {"stop_sequence": None, "usage": message_usage}
    start = {**message, "content": [], "stop_reason": None, "usage": {**message_usage}}
    start["usage"]["output_tokens"] = 1
    events: list[Any] = [{"type": "message_start", "message": start}]
    blocks = [
        ({"type": "text", "text": ""}, {"type": "text_delta", "text": _text(n)}),
        *(
            (
                {**use, "input": {}},
                {"type": "input_json_delta", "partial_json": json.dumps(use["input"])},
            )
            for use in uses
        ),
    ]
    for i, (block, delta) in enumerate(blocks):
        events += [
            {"type": "content_block_start", "index": i, "content_block": block},
            {"type": "content_block_delta", "index": i, "delta": delta},
            {"type": "content_block_stop", "index": i},
        ]
    events += [
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": usage.completion},
        },
        {"type": "message_stop"},
    ]
    return message, events


def _handler(upstream: RouteUpstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            status, answer, events = upstream.answer(self.path, body)
            if status == 200 and body.get("stream"):
                kind, out = "text/event-stream", _sse(_api(self.path), events)
            else:
                kind, out = "application/json", json.dumps(answer).encode()
            reply(self, out, kind, status)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def _sse(api: str, events: list[Any]) -> bytes:
    if api == "chat":
        data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
        return data + b"data: [DONE]\n\n"
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
