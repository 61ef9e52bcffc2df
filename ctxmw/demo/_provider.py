"""A simulated OpenAI-compatible provider on 127.0.0.1, for the offline demo.

It serves ``POST /v1/chat/completions``, answers as the scripted agent (:mod:`ctxmw.demo._agent`:
its plan, and what the prompt it is sent still shows), and reports usage with
prompt-cache accounting the way OpenAI does: a prefix it has seen in an earlier request counts as
cached, none under 1,024 tokens, then whole 128-token blocks. Prefixes are compared message by
message (the tools list and the request overhead first), and tokens are counted per message by
the same counter ctxmw's telemetry uses, so both sides can be checked against each other.
Everything it returns says it is simulated.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from anyio.abc import TaskGroup

from ctxmw.demo._agent import next_calls
from ctxmw.demo._http import json_response, serve
from ctxmw.demo._script import PlanStep
from ctxmw.messages.canonical import canonical_json
from ctxmw.telemetry.counters import TokenCounter
from ctxmw.telemetry.rules import automatic_reads

__all__ = ["SIMULATED", "SimulatedProvider"]

SIMULATED = "ctxmw-simulated"


class SimulatedProvider:
    """The scripted agent behind an OpenAI-compatible endpoint; see the module docstring.

    Args:
        plan: the agent's steps; the provider answers with step k's tool calls (or the calls
            that fetch what step k needs) when the newest tool call id in the request belongs
            to step k - 1.
        counter: counts tokens the way ctxmw's telemetry does (litellm's tokenizer).
        model: the model whose tokenizer the counter uses.
    """

    def __init__(self, plan: list[PlanStep], counter: TokenCounter, model: str) -> None:
        self.plan = plan
        self.counter = counter
        self.model = model
        self.requests = 0
        self._seen: set[bytes] = set()
        self._tokens: dict[bytes, int] = {}

    def forget(self) -> None:
        """Empty the prompt cache, as if the next session came after the cache's lifetime."""
        self._seen.clear()

    async def serve(self, task_group: TaskGroup) -> str:
        """Start listening on a free loopback port; returns the ``api_base`` to use."""
        return await serve(task_group, self._answer)

    def _answer(self, method_path: list[str], body: bytes) -> tuple[bytes, bool]:
        return json_response(*self.handle(method_path, body)), True

    def handle(self, method_path: list[str], body: bytes) -> tuple[str, dict[str, Any]]:
        """Answer one HTTP request: (status line, JSON body)."""
        if method_path != ["POST", "/v1/chat/completions"]:
            return "404 Not Found", {"error": {"message": f"{SIMULATED}: no route {method_path}"}}
        request = json.loads(body)
        self.requests += 1
        message, finish = self._next_message(request.get("messages", []))
        return "200 OK", {
            "id": f"{SIMULATED}-{self.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", SIMULATED),
            "system_fingerprint": SIMULATED,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": self._usage(request, message),
        }

    def _next_message(self, messages: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
        calls = next_calls(self.plan, messages)
        if calls is None:
            done = f"[{SIMULATED}] Finished: {len(self.plan)} steps of the plan ran."
            return {"role": "assistant", "content": done}, "stop"
        return {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"

    def _usage(self, request: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        messages = request.get("messages", [])
        tools = request.get("tools") or []
        chain = hashlib.sha256(_canonical(tools))
        total = self._tools_tokens(tools, messages)
        cached = 0
        for message in messages:
            raw = _canonical(message)
            chain.update(hashlib.sha256(raw).digest())
            key = chain.copy().digest()
            total += self._count(raw, message)
            if key in self._seen:
                cached = total
            self._seen.add(key)
        hit = automatic_reads(cached)  # the provider simulated caches as OpenAI does
        total += self.counter.overhead_tokens(self.model)  # the reply primer closes the prompt
        completion = self.counter.message_tokens(self.model, reply)
        return {
            "prompt_tokens": total,
            "completion_tokens": completion,
            "total_tokens": total + completion,
            "prompt_tokens_details": {"cached_tokens": hit},
        }

    def _tools_tokens(self, tools: list[Any], messages: list[Any]) -> int:
        if not tools:
            return 0
        has_system = any(m.get("role") == "system" for m in messages if isinstance(m, dict))
        key = hashlib.sha256(_canonical(tools) + bytes([has_system])).digest()
        if key not in self._tokens:
            self._tokens[key] = self.counter.tools_tokens(self.model, tools, has_system)
        return self._tokens[key]

    def _count(self, raw: bytes, message: Any) -> int:
        digest = hashlib.sha256(raw).digest()
        if digest not in self._tokens:
            self._tokens[digest] = self.counter.message_tokens(self.model, message)
        return self._tokens[digest]


def _canonical(block: Any) -> bytes:
    return canonical_json(block).encode()
