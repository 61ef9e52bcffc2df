"""What the read-back tests share: a history with compacted results, and readers of the record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxmw.context._record import handle_for
from ctxmw.context.readback import READBACK_TOOL_NAME
from ctxmw.messages.normal import normal_message
from ctxmw.testing import handles, readback, tool_calls
from ctxmw.types import Messages

MODEL = "anthropic/claude-sonnet-4-5"
SMALL = {
    "economic_full_tool_calls": 2,
    "economic_compacted_tool_calls": 3,
    "cache_rule": "none",  # nothing cached: the boundary moves at once, results compacted
    "alerts": False,
}
TOOL = {
    "type": "function",
    "function": {
        "name": "read",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
    },
}


def result(k: int) -> str:
    return "\n".join(f"line {k}.{i}: " + "x" * 60 for i in range(60))


def history(n: int) -> Messages:
    """A system prompt, a user message and ``n`` tool rounds of 60 lines each."""
    out: Messages = [
        {"role": "system", "content": "You read files."},
        {"role": "user", "content": "start"},
    ]
    for k in range(n):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": f"c{k}", "content": result(k)})
    return out


def reads_shown(start: int, end: int) -> Any:
    """A scripted reply reading lines ``start``-``end`` of the first handle the prompt shows."""

    def reply(call: dict[str, Any]) -> Any:
        shown = handles(call["messages"])
        assert shown, "the prompt shows no handle: nothing was compacted"
        return tool_calls(readback(shown[0], start, end))

    return reply


def handle_of(messages: Messages, call_id: str) -> str:
    """The handle of the tool result answering ``call_id`` (any result can be read back)."""
    found = next(m for m in messages if m.get("tool_call_id") == call_id)
    return handle_for(call_id, found["content"])


def original(messages: Messages, handle: str) -> str:
    for m in messages:
        if m.get("role") == "tool" and handle_for(str(m["tool_call_id"]), m["content"]) == handle:
            return str(m["content"])
    raise AssertionError(f"no result has handle {handle}")


def answered_lines(content: str) -> list[str]:
    """The lines an answer gives back, without its header and its gutter."""
    return [line.split("\t", 1)[1] for line in content.split("\n")[1:]]


def handle_asked(message: dict[str, Any]) -> str:
    (call,) = message["tool_calls"]
    assert call["function"]["name"] == READBACK_TOOL_NAME
    return str(json.loads(call["function"]["arguments"])["handle"])


def file_lines(path: Path) -> list[dict[str, Any]]:
    """The file's lines; a record without its ``bytes`` (pinned by test_transcript_damage)."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in x.items() if k != "bytes"} if "ctxmw" in x else x for x in lines]


def ledger(save_file: Path) -> list[dict[str, Any]]:
    return file_lines(save_file.with_name(f"{save_file.name}.ledger.jsonl"))


def caller_copy(response: Any) -> dict[str, Any]:
    """The reply as a caller keeps it in its history (litellm's dump, None left out)."""
    message = response.choices[0].message.model_dump()
    return {k: v for k, v in message.items() if v is not None}


def no_readback_anywhere(messages: Messages) -> bool:
    return READBACK_TOOL_NAME not in json.dumps([normal_message(m) for m in messages])
