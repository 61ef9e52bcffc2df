"""Real provider translation: the tool loop through litellm to OpenAI, Anthropic and Gemini.

respx serves realistic response bodies on the providers' own URLs (no network); the request
bodies litellm sends are checked for tool-call/result pairing in each provider's own shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

import ctxmw
from ctxmw import Session

pytestmark = pytest.mark.anyio

GEMINI_URL = (
    r"https://generativelanguage\.googleapis\.com/v1beta/models/gemini-2\.0-flash:generateContent.*"
)


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


# Round by round: two parallel calls, one call, then the answer.
PLAN: list[list[tuple[str, dict[str, int]]]] = [
    [("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})],
    [("add", {"a": 3, "b": 7})],
]
ANSWER = "1+2+3+4 = 10."


def openai_body(n: int) -> dict[str, Any]:
    usage = {
        "prompt_tokens": 80 + n,
        "completion_tokens": 12,
        "total_tokens": 92 + n,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    if n < len(PLAN):
        calls = [
            {
                "id": f"call_{n}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(PLAN[n])
        ]
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": calls}
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": ANSWER}, "stop"
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1_700_000_000 + n,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": usage,
        "system_fingerprint": "fp_test",
    }


def anthropic_body(n: int) -> dict[str, Any]:
    if n < len(PLAN):
        content: list[dict[str, Any]] = [{"type": "text", "text": "Let me add those."}]
        content += [
            {"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args}
            for i, (name, args) in enumerate(PLAN[n])
        ]
        stop = "tool_use"
    else:
        content, stop = [{"type": "text", "text": ANSWER}], "end_turn"
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": "claude-3-5-sonnet-20241022",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 300 + n,
            "output_tokens": 40,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def gemini_body(n: int) -> dict[str, Any]:
    if n < len(PLAN):
        parts: list[dict[str, Any]] = [
            {"functionCall": {"name": name, "args": args}} for name, args in PLAN[n]
        ]
    else:
        parts = [{"text": ANSWER}]
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": 120 + n,
            "candidatesTokenCount": 20,
            "totalTokenCount": 140 + n,
        },
        "modelVersion": "gemini-2.0-flash",
    }


def serve(
    body: Callable[[int], dict[str, Any]], bodies: list[dict[str, Any]]
) -> Callable[[httpx.Request], httpx.Response]:
    def respond(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=body(len(bodies) - 1))

    return respond


def check_openai(bodies: list[dict[str, Any]]) -> None:
    for body in bodies:
        open_ids: set[str] = set()
        for message in body["messages"]:
            if message["role"] == "tool":
                open_ids.remove(message["tool_call_id"])
            else:
                assert not open_ids, f"unanswered calls before a {message['role']} message"
                open_ids = {c["id"] for c in message.get("tool_calls") or []}
        assert not open_ids
    assert [m["role"] for m in bodies[-1]["messages"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
    ]


def check_anthropic(bodies: list[dict[str, Any]]) -> None:
    for body in bodies:
        messages = body["messages"]
        for i, message in enumerate(messages):
            uses = [b["id"] for b in _blocks(message) if b.get("type") == "tool_use"]
            if message["role"] == "assistant" and uses:
                answers = [
                    b["tool_use_id"]
                    for b in _blocks(messages[i + 1])
                    if b.get("type") == "tool_result"
                ]
                assert messages[i + 1]["role"] == "user"
                assert sorted(answers) == sorted(uses), "every tool_use needs its tool_result"
    last = bodies[-1]["messages"]
    assert sum(b.get("type") == "tool_result" for m in last for b in _blocks(m)) == 3


def check_gemini(bodies: list[dict[str, Any]]) -> None:
    for body in bodies:
        contents = body["contents"]
        for i, content in enumerate(contents):
            calls = [
                _part(p, "function_call")["name"]
                for p in content["parts"]
                if _part(p, "function_call")
            ]
            if calls:
                answers = [
                    _part(p, "function_response")["name"]
                    for p in contents[i + 1]["parts"]
                    if _part(p, "function_response")
                ]
                assert answers == calls, "every function call needs its function response"
    last = bodies[-1]["contents"]
    assert sum(bool(_part(p, "function_call")) for c in last for p in c["parts"]) == 3
    assert sum(bool(_part(p, "function_response")) for c in last for p in c["parts"]) == 3


def _part(part: dict[str, Any], snake: str) -> dict[str, Any]:
    """A part's payload under its snake_case or camelCase key (Gemini accepts both)."""
    head, _, tail = snake.partition("_")
    found = part.get(snake) or part.get(head + tail.capitalize())
    return found if isinstance(found, dict) else {}


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return content if isinstance(content, list) else []


PROVIDERS = {
    "openai": (
        "openai/gpt-4o-mini",
        "https://api.openai.com/v1/chat/completions",
        openai_body,
        check_openai,
    ),
    "anthropic": (
        "anthropic/claude-3-5-sonnet-20241022",
        "https://api.anthropic.com/v1/messages",
        anthropic_body,
        check_anthropic,
    ),
    "gemini": ("gemini/gemini-2.0-flash", GEMINI_URL, gemini_body, check_gemini),
}


# litellm builds some TypedDict schemas lazily (Gemini's context caching) and pydantic warns that
# their fields are ReadOnly: a litellm/pydantic matter, not ours, and harmless.
@pytest.mark.parametrize("provider", sorted(PROVIDERS))
async def test_three_round_tool_loop_through_litellm(
    provider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(key, "test-key-not-real")
    model, url, body, check = PROVIDERS[provider]
    bodies: list[dict[str, Any]] = []
    save_file = tmp_path / "agent.jsonl"
    with respx.mock(using="httpx", assert_all_mocked=True) as router:
        route = router.post(url__regex=url) if "\\" in url else router.post(url)
        route.side_effect = serve(body, bodies)
        session = Session(
            model, save_file=save_file, tools=[add], prompt_strategies="shorten_tools"
        )
        reply = await session.ask("Add 1+2 and 3+4, then add the results.")
    assert reply.choices[0].message.content == ANSWER
    assert len(bodies) == 3
    check(bodies)
    stored = [json.loads(line) for line in save_file.read_text().splitlines()]
    assert ctxmw.validate(stored) is None
    assert [m["content"] for m in stored if m["role"] == "tool"] == ["3", "7", "10"]
