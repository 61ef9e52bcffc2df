"""Token measurements the prefix tracker adds on top of the one counter protocol.

The counters themselves live in :mod:`ctxmw.context.tokens` (``TokenCounter``,
``LiteLLMCounter``, ``ApproxCounter``; re-exported here): the telemetry counts with the same
counter as ``ctxmw.budget()`` and ``ctxmw replay``.

Two measurements on top of any counter, for self-hosted servers (llama.cpp, vLLM, ...), whose
chat template renders the prompt: :func:`template_tools_tokens` counts the tools block the way
those templates write it, and :func:`text_tokens` counts a bare piece of text (the part of an
edited message a token-granular prefix cache still reads).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxmw.context.tokens import ApproxCounter, LiteLLMCounter, TokenCounter

__all__ = [
    "ApproxCounter",
    "LiteLLMCounter",
    "TokenCounter",
    "template_tools_tokens",
    "text_tokens",
]


def text_tokens(counter: TokenCounter, model: str, text: str) -> int:
    """Tokens of ``text`` alone: a message holding it, less the same message empty."""
    if not text:
        return 0
    full = counter.message_tokens(model, {"role": "user", "content": text})
    return max(full - counter.message_tokens(model, {"role": "user", "content": ""}), 0)


def template_tools_tokens(
    counter: TokenCounter, model: str, tools: Sequence[Mapping[str, Any]]
) -> int:
    """Tokens of the tools block as a self-hosted server's chat template writes it.

    Open-model chat templates (ChatML tool templates, Llama 3.x, Qwen, Hermes, Mistral) put each
    tool into the system prompt as its JSON text (Jinja's ``tojson``), one per line. That text
    is about twice what litellm's count of OpenAI's own compact tool format gives (measured
    against llama.cpp's server: 224 tokens of JSON where litellm counts 101), so a prefix made
    mostly of tools was under-estimated by half. A template's own instructions around the tools
    (a few dozen tokens) are not known here and not counted.
    """
    text = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    return text_tokens(counter, model, text)
