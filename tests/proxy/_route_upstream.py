"""A loopback provider for the proxy's other routes: Anthropic's ``/v1/messages`` and OpenAI's
``/v1/responses``, each answering in its own format (JSON, or server-sent events with
``stream``) and checking every request by that API's own rules (:mod:`tests._route_formats`).

The scripted model calls one tool per turn: ``/v1/messages`` answers round ``n`` (the number
of tool results in the request) with :func:`~tests._route_formats.anthropic_turn`, and
``/v1/responses`` with :func:`~tests._route_formats.responses_turn`. Responses are stored by
id, so a ``previous_response_id`` chain is resolved and checked whole. Usage reports cache
reads the way a prefix cache does: the longest prefix of earlier requests, by message (item).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests._route_formats import (
    anthropic_problems,
    anthropic_turn,
    responses_problems,
    responses_turn,
)
from tests.proxy._harness import reply

__all__ = ["RouteUpstream"]


class RouteUpstream:
    """See the module docstring.

    Attributes:
        requests: ``(path, body)`` of every request, in order.
        problems: per request, what its API would have refused (empty lists when valid).
    """

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.problems: list[list[str]] = []
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

    def answer(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
        """The response to one request, and its stream events."""
        with self._lock:
            self.requests.append((path, body))
            if path.endswith("/messages"):
                self.problems.append(anthropic_problems(body))
                return self._message(body)
            previous = body.get("previous_response_id")
            items = [*self._stored.get(str(previous), []), *body["input"]]
            if previous and previous not in self._stored:
                self.problems.append([f"unknown previous_response_id {previous!r}"])
            else:
                self.problems.append(responses_problems(items))
            return self._response(body, items)

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

    def _message(self, body: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
        n = sum(
            1
            for m in body.get("messages") or []
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        )
        prompt, cached = self._cached([body.get("system"), *(body.get("messages") or [])])
        turn = anthropic_turn(n)
        usage = {
            "input_tokens": prompt - cached,
            "output_tokens": 20,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0,
        }
        message = {"id": f"msg_{len(self.requests)}", "type": "message", "model": body["model"]}
        message |= {**turn, "stop_reason": "tool_use", "stop_sequence": None, "usage": usage}
        return message, _message_events(message)

    def _response(self, body: dict[str, Any], items: list[Any]) -> tuple[dict[str, Any], list[Any]]:
        n = sum(1 for item in items if item.get("type") == "function_call_output")
        prompt, cached = self._cached([body.get("instructions"), *items])
        output = responses_turn(n)
        response_id = f"resp_{len(self.requests)}"
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
                "input_tokens": prompt,
                "output_tokens": 20,
                "total_tokens": prompt + 20,
                "input_tokens_details": {"cached_tokens": cached},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
        events = [
            {"type": "response.created", "response": {**response, "status": "in_progress"}},
            *(
                {"type": "response.output_item.done", "output_index": i, "item": item}
                for i, item in enumerate(output)
            ),
            {"type": "response.completed", "response": response},
        ]
        return response, [{**e, "sequence_number": i} for i, e in enumerate(events)]


def _message_events(message: dict[str, Any]) -> list[Any]:
    start = {**message, "content": [], "stop_reason": None}
    events: list[Any] = [{"type": "message_start", "message": start}]
    for i, block in enumerate(message["content"]):
        events.append({"type": "content_block_start", "index": i, "content_block": block})
        events.append({"type": "content_block_stop", "index": i})
    events += [
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        },
        {"type": "message_stop"},
    ]
    return events


def _handler(upstream: RouteUpstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            answer, events = upstream.answer(self.path, body)
            if body.get("stream"):
                out = b"".join(
                    f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events
                )
                kind = "text/event-stream"
            else:
                out, kind = json.dumps(answer).encode(), "application/json"
            reply(self, out, kind)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
