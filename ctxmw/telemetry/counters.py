"""Token counters for the prefix tracker: litellm's own, and a cheap approximation.

A counter counts one message, the tools block, and the fixed per-request overhead separately, so
the tracker can cache each message's count and add them up. With litellm's counter the sum is
exactly what ``litellm.token_counter(model=..., messages=..., tools=...)`` returns for the whole
payload (litellm counts messages independently and adds the tools and the reply primer).

Two measurements on top of any counter, for self-hosted servers (llama.cpp, vLLM, ...), whose
chat template renders the prompt: :func:`template_tools_tokens` counts the tools block the way
those templates write it, and :func:`text_tokens` counts a bare piece of text (the part of an
edited message a token-granular prefix cache still reads).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Protocol

from ctxmw.messages.canonical import canonical_bytes

__all__ = [
    "ApproxCounter",
    "LiteLLMCounter",
    "TokenCounter",
    "template_tools_tokens",
    "text_tokens",
]

_SYSTEM_STUB: dict[str, str] = {"role": "system", "content": ""}


class TokenCounter(Protocol):
    """What the prefix tracker needs to count tokens; inject your own for tests or speed."""

    def message_tokens(self, model: str, message: Mapping[str, Any]) -> int:
        """Tokens of one message, per-message framing included."""
        ...

    def tools_tokens(self, model: str, tools: Sequence[Mapping[str, Any]], has_system: bool) -> int:
        """Tokens of the tool definitions (``has_system``: the messages hold a system message)."""
        ...

    def overhead_tokens(self, model: str) -> int:
        """Tokens every request carries besides its messages and tools (the reply primer)."""
        ...


class LiteLLMCounter:
    """Counts with ``litellm.token_counter`` (the model's tokenizer where litellm has one)."""

    def message_tokens(self, model: str, message: Mapping[str, Any]) -> int:
        """Tokens of one message as litellm frames it, without the request overhead."""
        import litellm

        return int(
            litellm.token_counter(model=model, messages=[message], count_response_tokens=True)
        )

    def tools_tokens(self, model: str, tools: Sequence[Mapping[str, Any]], has_system: bool) -> int:
        """Tokens litellm adds for ``tools`` (less when a system message is present)."""
        import litellm

        base: list[Any] = [_SYSTEM_STUB] if has_system else []
        tool_list: list[Any] = list(tools)
        with_tools = litellm.token_counter(model=model, messages=base, tools=tool_list)
        return int(with_tools) - int(litellm.token_counter(model=model, messages=base))

    def overhead_tokens(self, model: str) -> int:
        """litellm's reply primer for ``model``."""
        return _overhead(model)


class ApproxCounter:
    """About four bytes of canonical JSON per token: no tokenizer, for tests and estimates.

    Args:
        bytes_per_token: divisor applied to each block's canonical size.
    """

    def __init__(self, bytes_per_token: int = 4) -> None:
        self._divisor = max(bytes_per_token, 1)

    def message_tokens(self, model: str, message: Mapping[str, Any]) -> int:
        """Canonical size of the message over the divisor."""
        return len(canonical_bytes(message)) // self._divisor

    def tools_tokens(self, model: str, tools: Sequence[Mapping[str, Any]], has_system: bool) -> int:
        """Canonical size of the tool definitions over the divisor."""
        return sum(len(canonical_bytes(tool)) for tool in tools) // self._divisor

    def overhead_tokens(self, model: str) -> int:
        """No fixed overhead."""
        return 0


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


@lru_cache(maxsize=256)
def _overhead(model: str) -> int:
    import litellm

    return int(litellm.token_counter(model=model, messages=[]))
