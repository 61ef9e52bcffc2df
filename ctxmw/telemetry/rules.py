"""Provider caching rules: from a local reusable prefix to the cache reads to expect.

Rules (the ``cache_rule`` setting):

- ``openai``: nothing under 1,024 prefix tokens, then whole 128-token blocks (OpenAI's prompt
  caching guide; Azure OpenAI follows it).
- ``breakpoints``: only up to the last ``cache_control`` mark of the previous call that lies in
  the common prefix, and nothing when that is under the model's minimum (Anthropic, Bedrock
  Claude / Nova).
- ``gemini``: the whole common prefix once it reaches the model's implicit-caching minimum.
- ``exact``: the whole common prefix (llama.cpp, vLLM and other self-hosted prefix caches),
  including the leading text the first changed message shares with the previous call's (these
  caches work on tokens, not messages: llama.cpp reuses the unchanged start of an edited
  message, measured against its server), and the previous call's reply when the payload goes on
  with it (the server keeps the tokens it generated).
- ``none``: no cache reads expected.
- ``auto`` (default) picks one per call, see :func:`resolve_rule`.

Minimums: the model's ``prompt_cache_min_tokens`` in litellm's model map wins. Where litellm has
no entry the fallback is, for ``breakpoints``, 2,048 for Claude Haiku models and 1,024 for the
others (Anthropic's prompt caching docs for Claude 3 / 4 era models: Haiku 2,048, Sonnet and
Opus 1,024); for ``gemini``, 4,096 for Pro models and 1,024 for the others (Google's Gemini API
caching docs: 2.5 Flash 1,024, 2.5 / 3 Pro 4,096).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ctxmw import _litellm
from ctxmw.settings import CACHE_RULES

__all__ = [
    "CACHE_RULES",
    "OPENAI_BLOCK",
    "OPENAI_MINIMUM",
    "automatic_reads",
    "cache_minimum",
    "endpoint",
    "expected_cached_tokens",
    "prefix_reads",
    "resolve_rule",
    "self_hosted",
    "uses_breakpoints",
]

OPENAI_MINIMUM = 1024
OPENAI_BLOCK = 128

_SELF_HOSTED = frozenset(
    {
        "hosted_vllm",
        "vllm",
        "ollama",
        "ollama_chat",
        "llamafile",
        "lm_studio",
        "openai_like",
        "custom_openai",
        "oobabooga",
        "xinference",
        "triton",
    }
)
_OPENAI = frozenset({"openai", "azure", "text-completion-openai"})
_GEMINI = frozenset({"gemini", "vertex_ai", "vertex_ai_beta"})
_EXACT_HOSTED = frozenset({"deepseek", "xai"})
_OPENAI_HOSTS = ("api.openai.com", ".openai.azure.com")


def resolve_rule(rule: str, model: str, provider: str | None, api_base: str | None = None) -> str:
    """The concrete rule for one call: ``rule`` itself unless it is ``auto``.

    ``auto``: Anthropic, Bedrock and Vertex Claude (and Bedrock Nova) -> ``breakpoints``;
    OpenAI's own API and Azure OpenAI -> ``openai``; Gemini (AI Studio or Vertex) -> ``gemini``;
    a self-hosted provider (``hosted_vllm/``, ``ollama/``, ...) or an OpenAI-compatible provider
    with a custom ``api_base`` -> ``exact``; DeepSeek and xAI (automatic prefix caching with
    undocumented granularity) -> ``exact``; anything else -> ``none``.
    """
    if rule != "auto":
        return rule
    provider = provider or ""
    if uses_breakpoints(model, provider):
        return "breakpoints"
    if provider in _SELF_HOSTED:
        return "exact"
    if provider in _OPENAI:
        return "openai" if _official_openai(api_base) else "exact"
    if provider in _GEMINI and "gemini" in model.lower():
        return "gemini"
    if provider in _EXACT_HOSTED:
        return "exact"
    return "none"


def uses_breakpoints(model: str, provider: str | None = None) -> bool:
    """Whether ``model`` caches only at explicit ``cache_control`` marks.

    True for Claude on Anthropic, Bedrock and Vertex, and Nova on Bedrock. ``provider`` is
    litellm's provider name; when None it is read from the model's ``provider/`` prefix.
    """
    name = model.lower()
    provider = provider if provider is not None else (name.split("/", 1)[0] if "/" in name else "")
    if provider in ("anthropic", "") and "claude" in name:
        return True
    if provider.startswith("bedrock"):
        return "claude" in name or "anthropic." in name or "nova" in name
    return provider.startswith("vertex_ai") and "claude" in name


def expected_cached_tokens(
    rule: str,
    *,
    prefix_tokens: int,
    marked_prefix_tokens: int,
    minimum: int,
    partial_tokens: int = 0,
    reply_tokens: int = 0,
) -> int:
    """Prompt tokens a provider following ``rule`` should read from its cache.

    Args:
        rule: a concrete rule (not ``auto``).
        prefix_tokens: the local common prefix with the previous call (whole messages).
        marked_prefix_tokens: the part of it that ends at a previous-call breakpoint.
        minimum: the smallest prefix the model caches.
        partial_tokens: shared leading text of the first changed message (``exact`` only).
        reply_tokens: the previous call's reply, when this payload extends the previous one
            with it (``exact`` only: a token cache keeps what it generated).
    """
    if rule == "openai":
        return automatic_reads(prefix_tokens)
    if rule == "breakpoints":
        return prefix_reads(marked_prefix_tokens, minimum)
    if rule == "gemini":
        return prefix_reads(prefix_tokens, minimum)
    if rule == "exact":
        return prefix_tokens + partial_tokens + reply_tokens
    return 0


def automatic_reads(prefix_tokens: int) -> int:
    """OpenAI-style automatic caching: the prefix in whole blocks, once it reaches the minimum.

    The one estimate of automatic cache reads: the telemetry's expectation and replay's prices
    both come from it.
    """
    return 0 if prefix_tokens < OPENAI_MINIMUM else prefix_tokens // OPENAI_BLOCK * OPENAI_BLOCK


def prefix_reads(prefix_tokens: int, minimum: int) -> int:
    """A cached prefix (up to a breakpoint, or whole) is read whole once it reaches ``minimum``.

    The one estimate of such reads: the telemetry's expectation and replay's prices both come
    from it.
    """
    return prefix_tokens if prefix_tokens >= minimum else 0


def cache_minimum(rule: str, model: str, provider: str | None = None) -> int:
    """The smallest prefix ``model`` caches under ``rule`` (litellm's map, else the fallback)."""
    if rule == "openai":
        return OPENAI_MINIMUM
    if rule not in ("breakpoints", "gemini"):
        return 0
    known = _litellm_minimum(model, provider)
    if known is not None:
        return known
    name = model.lower()
    if rule == "breakpoints":
        return 2048 if "haiku" in name else 1024
    return 4096 if "pro" in name.rsplit("/", 1)[-1] else 1024


@lru_cache(maxsize=256)
def _litellm_minimum(model: str, provider: str | None) -> int | None:
    # Not in litellm's map ({}): the documented fallback applies.
    value = _litellm.model_info(model, provider).get("prompt_cache_min_tokens")
    return int(value) if isinstance(value, int | float) and value > 0 else None


def endpoint(kwargs: Mapping[str, Any]) -> str | None:
    """A call's custom endpoint: ``api_base``, else ``base_url`` (litellm takes both; openai-agents
    and the OpenAI SDK's habit pass ``base_url``)."""
    for name in ("api_base", "base_url"):
        value = kwargs.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def self_hosted(provider: str | None, api_base: str | None = None) -> bool:
    """Whether the endpoint is a self-hosted server that renders prompts with its chat template.

    A self-hosted provider (``hosted_vllm/``, ``ollama/``, ...), or an OpenAI-compatible one
    pointed at a custom ``api_base`` (llama.cpp's server, vLLM, ...).
    """
    provider = provider or ""
    return provider in _SELF_HOSTED or (provider in _OPENAI and not _official_openai(api_base))


def _official_openai(api_base: str | None) -> bool:
    return not api_base or any(host in api_base for host in _OPENAI_HOSTS)
