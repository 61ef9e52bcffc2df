"""A route's answer in the shape the telemetry reads: a chat completion's reply and usage."""

from __future__ import annotations

from typing import Any

__all__ = ["chat_reply", "function_call"]


def chat_reply(
    text: str,
    tool_calls: list[dict[str, Any]],
    *,
    prompt_tokens: int,
    completion_tokens: int,
    cache_read: int | None,
    cache_write: int | None = None,
) -> dict[str, Any]:
    """A chat-completion-shaped dict: one choice with the reply, and the usage with its cache
    reads and writes (None: the provider did not say)."""
    details: dict[str, Any] = {}
    if cache_read is not None:
        details["cached_tokens"] = cache_read
    if cache_write is not None:
        details["cache_write_tokens"] = cache_write
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if details:
        usage["prompt_tokens_details"] = details
    return {"choices": [{"index": 0, "message": message}], "usage": usage}


def function_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """One chat tool call."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
