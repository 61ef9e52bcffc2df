"""Realistic provider responses with cache fields, as each API documents its usage block."""

from __future__ import annotations

import json
from typing import Any

# litellm's own code trips pydantic warnings on paths it takes lazily (ReadOnly TypedDicts in
# provider modules, a deprecated attribute read while streaming); they are litellm's business.

OPENAI = {
    "id": "chatcmpl-abc",
    "object": "chat.completion",
    "created": 1730000000,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
    ],
    "usage": {
        "prompt_tokens": 2006,
        "completion_tokens": 300,
        "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    },
}

ANTHROPIC = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Hi"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 50,
        "cache_creation_input_tokens": 248,
        "cache_read_input_tokens": 1800,
        "output_tokens": 12,
        "cache_creation": {"ephemeral_5m_input_tokens": 248, "ephemeral_1h_input_tokens": 0},
        "service_tier": "standard",
    },
}

GEMINI = {
    "candidates": [
        {"content": {"parts": [{"text": "Hi"}], "role": "model"}, "finishReason": "STOP"}
    ],
    "usageMetadata": {
        "promptTokenCount": 2100,
        "candidatesTokenCount": 5,
        "totalTokenCount": 2105,
        "cachedContentTokenCount": 1024,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 2100}],
        "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": 1024}],
    },
    "modelVersion": "gemini-2.5-flash",
    "responseId": "resp-1",
}

BEDROCK_CONVERSE = {
    "output": {"message": {"role": "assistant", "content": [{"text": "Hi"}]}},
    "stopReason": "end_turn",
    "usage": {
        "inputTokens": 40,
        "outputTokens": 7,
        "totalTokens": 2347,
        "cacheReadInputTokens": 1500,
        "cacheWriteInputTokens": 800,
    },
    "metrics": {"latencyMs": 312},
}

DEEPSEEK = {
    "id": "ds-1",
    "object": "chat.completion",
    "created": 1730000000,
    "model": "deepseek-chat",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hi"},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 1500,
        "completion_tokens": 10,
        "total_tokens": 1510,
        "prompt_tokens_details": {"cached_tokens": 1280},
        "prompt_cache_hit_tokens": 1280,
        "prompt_cache_miss_tokens": 220,
    },
    "system_fingerprint": "fp_1",
}


def sse(events: list[dict[str, Any]]) -> str:
    """An OpenAI-style server-sent-event body."""
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"


def openai_stream(with_usage: bool) -> str:
    """An OpenAI chat stream; the last event carries usage when ``with_usage``."""
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o"}
    events = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    if with_usage:
        usage = {
            "prompt_tokens": 2000,
            "completion_tokens": 1,
            "total_tokens": 2001,
            "prompt_tokens_details": {"cached_tokens": 1920},
        }
        events.append({**base, "choices": [], "usage": usage})
    return sse(events)


def anthropic_stream() -> str:
    """An Anthropic Messages stream with cache reads and writes on ``message_start``."""
    usage = {
        "input_tokens": 50,
        "cache_creation_input_tokens": 248,
        "cache_read_input_tokens": 1800,
        "output_tokens": 1,
    }
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    text = {"type": "text", "text": ""}
    delta = {"type": "text_delta", "text": "Hi"}
    stop = {"stop_reason": "end_turn"}
    events = [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": text}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 15}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
