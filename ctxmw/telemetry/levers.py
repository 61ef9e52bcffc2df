"""Provider-specific levers the recorder pulls on the way out: OpenAI's ``prompt_cache_key``.

OpenAI routes a request to a cache machine by a hash of the prompt's first tokens, combined with
``prompt_cache_key`` when one is given: a stable key per conversation keeps its calls on the
machine that holds its prefix (OpenAI's prompt caching guide). ctxmw sends one, unless the
caller set their own or the ``prompt_cache_key`` setting is off, wherever litellm lists
``prompt_cache_key`` among the provider's supported parameters (OpenAI, Azure OpenAI, and the
others litellm passes it to), and never to a self-hosted endpoint (named by ``api_base`` or
``base_url``: it has no use for it).

The key is derived from the conversation's head (every message up to and including the first
user message: the system prompt and the task), which strategies never change: it is the same on
every call of a conversation, for a stateless caller too, and holds no message content.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, MutableMapping, Sequence
from functools import lru_cache
from typing import Any

from ctxmw import _litellm
from ctxmw.messages.canonical import canonical_bytes
from ctxmw.telemetry.response import provider_of
from ctxmw.telemetry.rules import endpoint, self_hosted

__all__ = ["conversation_key", "takes_prompt_cache_key", "with_prompt_cache_key"]


def with_prompt_cache_key(kwargs: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """``kwargs`` with a ``prompt_cache_key`` added where the provider takes one (a new dict).

    The input is returned unchanged when the caller set a key (even None), or the provider takes
    none, or there are no messages. A model whose ``provider/`` prefix cannot take one (a fake,
    a self-hosted provider) is turned away before litellm is even imported.
    """
    messages = kwargs.get("messages") or []
    model = str(kwargs.get("model", ""))
    if "prompt_cache_key" in kwargs or not messages or not _candidate(model, kwargs):
        return kwargs
    if not takes_prompt_cache_key(model, provider_of(model, kwargs), endpoint(kwargs)):
        return kwargs
    return {**kwargs, "prompt_cache_key": conversation_key(messages)}


# A superset of the providers litellm 1.110 passes prompt_cache_key to ("" is a bare model name,
# resolved by litellm); litellm's supported parameters make the final decision.
_CANDIDATES = frozenset(
    {"", "openai", "azure", "azure_ai", "mistral", "deepseek", "fireworks_ai", "morph", "xai"}
)


def _candidate(model: str, kwargs: Mapping[str, Any]) -> bool:
    provider = kwargs.get("custom_llm_provider")
    if not isinstance(provider, str):
        provider = model.split("/", 1)[0] if "/" in model else ""
    return provider in _CANDIDATES


def conversation_key(messages: Sequence[Mapping[str, Any]]) -> str:
    """``ctxmw-`` and a digest of the messages up to and including the first user message."""
    digest = hashlib.blake2b(digest_size=8)
    for message in messages:
        digest.update(canonical_bytes(message) + b"\x1e")
        if isinstance(message, Mapping) and message.get("role") == "user":
            break
    return f"ctxmw-{digest.hexdigest()}"


def takes_prompt_cache_key(model: str, provider: str, api_base: str | None = None) -> bool:
    """Whether litellm passes ``prompt_cache_key`` to this provider, which is not self-hosted."""
    if not provider or self_hosted(provider, api_base):
        return False
    return _supported(model, provider)


@lru_cache(maxsize=256)
def _supported(model: str, provider: str) -> bool:
    base = model.split("/", 1)[1] if model.startswith(f"{provider}/") else model
    return "prompt_cache_key" in _litellm.supported_openai_params(base, provider)
