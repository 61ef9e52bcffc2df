"""The proxy's routes as a client and a provider see them: conversations in Anthropic Messages
and OpenAI Responses format, and each API's own validity rules (chat completions too).

The validators are written from the APIs' documented rules, independently of ctxmw's code:

* Every API: a top-level field it does not have is refused (``field_problems``: the real APIs
  answer 400, "Extra inputs are not permitted" / "Unrecognized request argument"), and so is
  metadata it does not take (Anthropic: ``user_id`` only; OpenAI: up to 16 string values).
* Chat completions: the roles' own keys only; every ``tool_calls`` of an assistant message is
  answered by the ``tool`` messages right after it, and a ``tool`` message answers an open call.
* Messages: a message holds ``role`` and ``content`` only; consecutive turns of one role are
  joined (as the API does); the first turn is the user's; every ``tool_use`` of an assistant
  turn is answered by a ``tool_result`` of the next turn, those results come first in it and
  answer nothing else; ``tool_use.input`` is an object; thinking blocks carry the signature the
  provider gave them (``signed``); at most four blocks carry ``cache_control``.
* Responses: call ids are unique; every ``function_call`` is answered by exactly one later
  ``function_call_output``, and an output answers an earlier call; a ``reasoning`` item is
  followed by the item it belongs to; over a ``previous_response_id`` chain, the stored items
  come first.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

RESULT = 4096


def signature(thinking: str) -> str:
    """The signature the scripted provider gives a thinking block."""
    return hashlib.sha256(thinking.encode()).hexdigest()[:24]


def output_text(i: int) -> str:
    """A 4 KB tool output, distinct per round."""
    line = f"round {i}: " + "the quick brown fox jumps over the lazy dog " * 2
    return "\n".join(f"{n:03d} {line}" for n in range(RESULT // len(line) + 1))[:RESULT]


# ---- Anthropic Messages --------------------------------------------------------------------


def anthropic_turn(i: int) -> dict[str, Any]:
    """The scripted assistant turn of round ``i``: thinking, a note, a tool call."""
    thinking = f"I should read file {i} next."
    return {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": thinking, "signature": signature(thinking)},
            {"type": "text", "text": f"Reading file {i}."},
            {
                "type": "tool_use",
                "id": f"toolu_{i:04d}",
                "name": "read_file",
                "input": {"path": f"src/module_{i}.py", "reason": "look for the bug " * 8},
            },
        ],
    }


def anthropic_results(i: int) -> dict[str, Any]:
    """The client's answer to round ``i``: the tool's output, and every fifth round a note."""
    content: list[dict[str, Any]] = [
        {"type": "tool_result", "tool_use_id": f"toolu_{i:04d}", "content": output_text(i)}
    ]
    if i % 5 == 4:
        content.append({"type": "text", "text": f"<reminder>round {i}</reminder>"})
    return {"role": "user", "content": content}


def anthropic_request(rounds: int) -> dict[str, Any]:
    """A Claude-Code-like request after ``rounds`` tool rounds: the system and the last block
    marked for the cache (the client moves that mark every turn)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    for i in range(rounds):
        messages += [anthropic_turn(i), anthropic_results(i)]
    last = messages[-1]
    content = last["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    content = [*content[:-1], {**content[-1], "cache_control": {"type": "ephemeral"}}]
    messages[-1] = {**last, "content": content}
    system = [
        {"type": "text", "text": "You are a coding agent. " * 40},
        {"type": "text", "text": "Be careful.", "cache_control": {"type": "ephemeral"}},
    ]
    tools = [
        {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}
    ]
    return {"system": system, "messages": messages, "tools": tools, "max_tokens": 1024}


def anthropic_problems(body: Mapping[str, Any]) -> list[str]:
    """What the Messages API would refuse in ``body`` (empty when valid)."""
    messages = body.get("messages") or []
    turns = _joined(messages)
    problems = [
        f"messages.{i}.{key}: Extra inputs are not permitted"
        for i, message in enumerate(messages)
        for key in sorted(set(message) - {"role", "content"})
    ]
    if turns and turns[0][0] != "user":
        problems.append("the first turn is not the user's")
    for i, (role, blocks) in enumerate(turns):
        if role == "assistant":
            problems += _answered(i, blocks, turns[i + 1][1] if i + 1 < len(turns) else None)
            problems += [f"turn {i}: unsigned thinking" for b in blocks if _unsigned(b)]
        elif _orphan_results(turns, i):
            problems.append(f"turn {i}: a tool_result answers no tool_use")
    marks = _marks(body.get("system")) + _marks(body.get("tools"))
    marks += sum(_marks(blocks) for _, blocks in turns)
    if marks > 4:
        problems.append(f"{marks} blocks carry cache_control (at most 4)")
    return problems


def _orphan_results(turns: list[tuple[str, list[dict[str, Any]]]], i: int) -> bool:
    after_assistant = i > 0 and turns[i - 1][0] == "assistant"
    return not after_assistant and any(b.get("type") == "tool_result" for b in turns[i][1])


def _joined(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for message in messages:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        role = str(message.get("role"))
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, list(blocks)))
    return turns


def _answered(
    i: int, blocks: list[dict[str, Any]], after: list[dict[str, Any]] | None
) -> list[str]:
    uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    bad = [f"turn {i}: tool_use input not an object" for b in blocks if _bad_input(b)]
    if not uses:
        return bad
    after = after or []
    leading = []
    for block in after:
        if block.get("type") != "tool_result":
            break
        leading.append(block.get("tool_use_id"))
    late = [b for b in after[len(leading) :] if b.get("type") == "tool_result"]
    if sorted(leading) != sorted(uses) or late:
        bad.append(f"turn {i}: tool_use {uses} answered by {leading} (+{len(late)} late)")
    return bad


def _bad_input(block: Mapping[str, Any]) -> bool:
    return block.get("type") == "tool_use" and not isinstance(block.get("input"), dict)


def _unsigned(block: Mapping[str, Any]) -> bool:
    if block.get("type") != "thinking":
        return False
    return block.get("signature") != signature(str(block.get("thinking")))


def _marks(value: Any) -> int:
    if isinstance(value, Mapping):
        own = 1 if value.get("cache_control") else 0
        return own + _marks(value.get("content"))
    if isinstance(value, list):
        return sum(_marks(v) for v in value)
    return 0


# ---- OpenAI Responses ----------------------------------------------------------------------


def responses_turn(i: int) -> list[dict[str, Any]]:
    """The scripted output of round ``i``: a reasoning item and a function call."""
    return [
        {"type": "reasoning", "id": f"rs_{i:04d}", "summary": [], "encrypted_content": f"enc{i}"},
        {
            "type": "function_call",
            "id": f"fc_{i:04d}",
            "call_id": f"call_{i:04d}",
            "name": "shell",
            "arguments": json.dumps({"command": ["cat", f"src/module_{i}.py"], "why": "x" * 80}),
        },
    ]


def responses_output(i: int) -> dict[str, Any]:
    """The client's answer to round ``i``."""
    return {"type": "function_call_output", "call_id": f"call_{i:04d}", "output": output_text(i)}


def responses_request(rounds: int) -> dict[str, Any]:
    """A Codex-like request after ``rounds`` tool rounds: the whole input, every turn."""
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix it."}]}
    ]
    for i in range(rounds):
        items += [*responses_turn(i), responses_output(i)]
    tools = [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]
    return {"instructions": "You are a coding agent. " * 40, "input": items, "tools": tools}


def responses_problems(items: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the Responses API would refuse in the full input ``items`` (empty when valid)."""
    problems: list[str] = []
    open_calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "function_call":
            call_id = str(item.get("call_id"))
            if call_id in open_calls or call_id in answered:
                problems.append(f"item {i}: call id {call_id} used twice")
            open_calls[call_id] = i
        elif kind == "function_call_output":
            call_id = str(item.get("call_id"))
            if open_calls.pop(call_id, None) is None:
                problems.append(f"item {i}: output for {call_id}, which is no open call")
            answered.add(call_id)
        elif kind == "reasoning":
            following = items[i + 1] if i + 1 < len(items) else {}
            if following.get("type", "message") not in ("function_call", "message"):
                problems.append(f"item {i}: reasoning without its following item")
    problems += [f"item {i}: no output for call {c}" for c, i in open_calls.items()]
    return problems


# ---- Chat completions ----------------------------------------------------------------------

_CHAT_KEYS = {
    "system": frozenset({"role", "content", "name"}),
    "developer": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset(
        {"role", "content", "name", "tool_calls", "refusal", "audio", "function_call"}
    ),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}


def chat_problems(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the chat completions API would refuse in ``messages`` (empty when valid)."""
    problems: list[str] = []
    open_calls: list[str] = []
    for i, message in enumerate(messages):
        role = str(message.get("role"))
        allowed = _CHAT_KEYS.get(role)
        if allowed is None:
            problems.append(f"messages[{i}]: unknown role {role!r}")
            continue
        problems += [f"messages[{i}].{key}: unknown" for key in sorted(set(message) - allowed)]
        if role == "tool":
            if message.get("tool_call_id") not in open_calls:
                problems.append(f"messages[{i}]: a tool message answers no open tool call")
            else:
                open_calls.remove(str(message.get("tool_call_id")))
            continue
        if open_calls:
            problems.append(f"messages[{i}]: tool calls {open_calls} were not answered")
        calls = (message.get("tool_calls") or []) if role == "assistant" else []
        open_calls = [str(call.get("id")) for call in calls]
    if open_calls:
        problems.append(f"tool calls {open_calls} were not answered")
    return problems


# ---- What each API takes at the top level --------------------------------------------------

# Each API reference's list of request fields, as it prints them.
_CHAT = """model messages audio frequency_penalty function_call functions logit_bias logprobs
max_completion_tokens max_tokens metadata modalities n parallel_tool_calls prediction
presence_penalty prompt_cache_key prompt_cache_retention reasoning_effort response_format
safety_identifier seed service_tier stop store stream stream_options temperature tool_choice
tools top_logprobs top_p user verbosity web_search_options"""
_MESSAGES = """model messages max_tokens container context_management mcp_servers metadata
service_tier stop_sequences stream system temperature thinking tool_choice tools top_k top_p"""
_RESPONSES = """model input background conversation include instructions max_output_tokens
max_tool_calls metadata parallel_tool_calls previous_response_id prompt prompt_cache_key
prompt_cache_retention reasoning safety_identifier service_tier store stream stream_options
temperature text tool_choice tools top_logprobs top_p truncation user"""
FIELDS = {
    api: frozenset(names.split())
    for api, names in (("chat", _CHAT), ("messages", _MESSAGES), ("responses", _RESPONSES))
}
"""The top-level fields of each API's request body (``chat``, ``messages``, ``responses``)."""


def field_problems(api: str, body: Mapping[str, Any]) -> list[str]:
    """The top-level fields and the metadata ``api`` would refuse in ``body``."""
    problems = [
        f"{name}: Extra inputs are not permitted" for name in sorted(set(body) - FIELDS[api])
    ]
    metadata = body.get("metadata")
    if metadata is None:
        return problems
    if not isinstance(metadata, Mapping):
        return [*problems, f"metadata: {metadata!r:.60} is not an object"]
    if api == "messages":
        problems += [
            f"metadata.{k}: Extra inputs are not permitted" for k in metadata if k != "user_id"
        ]
    else:
        problems += [
            f"metadata.{k}: not a string" for k, v in metadata.items() if not isinstance(v, str)
        ]
        problems += [f"metadata: {len(metadata)} keys (at most 16)"] if len(metadata) > 16 else []
    return problems
