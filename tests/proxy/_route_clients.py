"""Agents on each of the proxy's routes, continuing their conversation from the answers they get.

Each client keeps its conversation in its route's own format, sends it whole every turn (as
Claude Code, Codex and chat agents do), reads the answer (JSON, or the route's server-sent
events), checks it holds one tool call it can act on, and appends the answer and the tool's
output (:func:`~tests._route_formats.output_text`, 4 KB distinct per round) for the next turn.
An answer a real client could not continue from fails the test here.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests._route_formats import output_text

__all__ = ["CLIENTS", "ChatClient", "MessagesClient", "ResponsesClient"]

SYSTEM = "You are a coding agent. " * 40
TASK = "Fix the failing test."


class ChatClient:
    """An agent on ``/v1/chat/completions``."""

    path = "/v1/chat/completions"

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": TASK},
        ]
        self.rounds = 0

    def body(self) -> dict[str, Any]:
        tool = {"name": "read_file", "parameters": {"type": "object"}}
        return {"messages": self.messages, "tools": [{"type": "function", "function": tool}]}

    def continue_from(self, response: httpx.Response, streamed: bool) -> None:
        message = _chat_stream(response.text) if streamed else _choice(response.json())
        calls = message.get("tool_calls") or []
        assert len(calls) == 1, message
        call = calls[0]
        assert call["id"], call
        assert call["function"]["name"] == "read_file", call
        json.loads(call["function"]["arguments"])
        self.messages += [
            {"role": "assistant", "content": message.get("content"), "tool_calls": calls},
            {"role": "tool", "tool_call_id": call["id"], "content": output_text(self.rounds)},
        ]
        self.rounds += 1


class MessagesClient:
    """An agent on ``/v1/messages`` (Claude Code's shape: system blocks, a moving cache mark)."""

    path = "/v1/messages"

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        self.rounds = 0

    def body(self) -> dict[str, Any]:
        system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
        tools = [{"name": "read_file", "input_schema": {"type": "object"}}]
        last = self.messages[-1]
        content = last["content"]
        if isinstance(content, list):
            marked = {**content[-1], "cache_control": {"type": "ephemeral"}}
            last = {**last, "content": [*content[:-1], marked]}
        messages = [*self.messages[:-1], last]
        return {"system": system, "messages": messages, "tools": tools, "max_tokens": 1024}

    def continue_from(self, response: httpx.Response, streamed: bool) -> None:
        message = _messages_stream(response.text) if streamed else response.json()
        blocks = message["content"]
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        assert len(uses) == 1, message
        assert uses[0]["id"], uses
        assert isinstance(uses[0]["input"], dict), uses
        result = {
            "type": "tool_result",
            "tool_use_id": uses[0]["id"],
            "content": output_text(self.rounds),
        }
        self.messages += [
            {"role": "assistant", "content": blocks},
            {"role": "user", "content": [result]},
        ]
        self.rounds += 1


class ResponsesClient:
    """An agent on ``/v1/responses`` (Codex's shape: the whole ``input`` every turn)."""

    path = "/v1/responses"

    def __init__(self) -> None:
        text = {"type": "input_text", "text": TASK}
        self.items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": [text]}]
        self.rounds = 0

    def body(self) -> dict[str, Any]:
        tools = [{"type": "function", "name": "read_file", "parameters": {"type": "object"}}]
        return {"instructions": SYSTEM, "input": self.items, "tools": tools, "store": False}

    def continue_from(self, response: httpx.Response, streamed: bool) -> None:
        answer = _responses_stream(response.text) if streamed else response.json()
        output = answer["output"]
        calls = [item for item in output if item.get("type") == "function_call"]
        assert len(calls) == 1, answer
        assert calls[0]["call_id"], calls
        assert calls[0]["name"] == "read_file", calls
        json.loads(calls[0]["arguments"])
        result = {
            "type": "function_call_output",
            "call_id": calls[0]["call_id"],
            "output": output_text(self.rounds),
        }
        self.items += [*output, result]
        self.rounds += 1


CLIENTS = {"chat": ChatClient, "messages": MessagesClient, "responses": ResponsesClient}


def _choice(answer: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = answer["choices"][0]["message"]
    return message


def _events(text: str) -> list[dict[str, Any]]:
    """The JSON events of a server-sent-event body (``[DONE]`` left out)."""
    lines = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    return [json.loads(line) for line in lines if line and line != "[DONE]"]


def _chat_stream(text: str) -> dict[str, Any]:
    """The assistant message a chat stream built: its content, its tool calls by index."""
    content, calls = "", {}
    for event in _events(text):
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            content += delta.get("content") or ""
            for part in delta.get("tool_calls") or []:
                call = calls.setdefault(part["index"], {"id": "", "type": "function"})
                call["id"] = call["id"] or part.get("id") or ""
                function = call.setdefault("function", {"name": "", "arguments": ""})
                given = part.get("function") or {}
                function["name"] = function["name"] or given.get("name") or ""
                function["arguments"] += given.get("arguments") or ""
    return {"role": "assistant", "content": content or None, "tool_calls": list(calls.values())}


def _messages_stream(text: str) -> dict[str, Any]:
    """The message a Messages stream built: its content blocks, tool inputs parsed."""
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for event in _events(text):
        index = event.get("index")
        if event["type"] == "content_block_start":
            blocks[index] = dict(event["content_block"])
        elif event["type"] == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "text_delta":
                blocks[index]["text"] = blocks[index].get("text", "") + delta["text"]
            elif delta["type"] == "input_json_delta":
                partial[index] = partial.get(index, "") + delta["partial_json"]
    for index, raw in partial.items():
        blocks[index]["input"] = json.loads(raw or "{}")
    return {"role": "assistant", "content": [blocks[i] for i in sorted(blocks)]}


def _responses_stream(text: str) -> dict[str, Any]:
    """The response a Responses stream ended with (its ``response.completed`` event)."""
    ends = [e["response"] for e in _events(text) if e.get("type") == "response.completed"]
    assert len(ends) == 1, text[-2000:]
    response: dict[str, Any] = ends[0]
    return response
