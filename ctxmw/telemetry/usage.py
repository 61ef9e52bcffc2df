"""Read token usage uniformly from whatever litellm returned, streaming included.

litellm 1.110 normalises every provider it supports onto ``usage.prompt_tokens_details``:
``cached_tokens`` holds the cache reads and ``cache_write_tokens`` (mirrored as
``cache_creation_tokens``) the cache writes. What each provider reports and where litellm puts it:

- OpenAI: ``prompt_tokens_details.cached_tokens`` as sent; no writes reported.
- Anthropic: ``cache_read_input_tokens`` -> ``cached_tokens``, ``cache_creation_input_tokens``
  -> ``cache_write_tokens``; ``prompt_tokens`` is input + reads + writes. The raw counts are
  also kept as top-level extras (``usage.cache_read_input_tokens``,
  ``usage.cache_creation_input_tokens``).
- Gemini / Vertex: ``usageMetadata.cachedContentTokenCount`` -> ``cached_tokens`` (and the
  ``cache_read_input_tokens`` extra); writes only when litellm itself created an explicit cache.
- Bedrock Converse: ``cacheReadInputTokens`` / ``cacheWriteInputTokens`` -> ``cached_tokens`` /
  ``cache_write_tokens`` plus both top-level extras; ``prompt_tokens`` includes both.
- DeepSeek: ``prompt_cache_hit_tokens`` -> ``cached_tokens`` (the extra stays at top level too).

This module reads the normalised fields first and falls back to those top-level extras, so a
usage object built by hand (or by an older path) still reads right.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from ctxmw import _litellm
from ctxmw.telemetry.rules import endpoint

__all__ = ["UsageReport", "read_stream_usage", "read_usage", "with_stream_usage"]

_READ_EXTRAS = ("cache_read_input_tokens", "prompt_cache_hit_tokens")
_WRITE_EXTRAS = ("cache_creation_input_tokens",)


@dataclass(frozen=True, slots=True)
class UsageReport:
    """Token counts of one model call as the provider reported them.

    Attributes:
        prompt_tokens: every prompt token, cached or not (litellm's ``usage.prompt_tokens``).
        completion_tokens: generated tokens.
        cache_read_tokens: prompt tokens the provider read from its cache; None when it did not
            say (no usage, or a usage without any cache field): "not reported" is never 0.
        cache_write_tokens: prompt tokens the provider wrote to its cache; None when not
            reported (OpenAI, Gemini and DeepSeek never report writes).
        estimated: True when the provider reported no usage and the counts are litellm's local
            estimate (or zero); the recorder then substitutes its own local prompt count.
    """

    prompt_tokens: int
    completion_tokens: int
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    estimated: bool = False


def read_usage(source: object) -> UsageReport:
    """Read the usage of a litellm ``ModelResponse``, a ``Usage``, or a plain dict of either.

    A missing usage (``None``, or a response without one) reads as zero tokens, marked
    estimated, with the cache counts None (not reported).
    """
    usage = _usage_of(source)
    if usage is None:
        return UsageReport(0, 0, None, None, estimated=True)
    prompt = _int(_get(usage, "prompt_tokens"))
    return UsageReport(
        prompt_tokens=prompt,
        completion_tokens=_int(_get(usage, "completion_tokens")),
        cache_read_tokens=_cache_reads(usage),
        cache_write_tokens=_cache_writes(usage),
        estimated=_is_unreported(usage) or prompt == 0,
    )


def read_stream_usage(chunks: Iterable[object], stream: object | None = None) -> UsageReport:
    """Read the usage of a consumed stream.

    litellm delivers a stream's usage on its last chunk: as ``chunk.usage`` when
    ``stream_options={"include_usage": True}`` was in effect (litellm injects it for some
    providers), else in the chunk's hidden params (``_hidden_params["usage"]``), where an
    ``UnreportedUsage`` means the provider sent none. When the provider sent no usage but
    ``include_usage`` was on, litellm fills the final chunk with a tokenizer estimate that looks
    like a reported one; passing the consumed litellm stream object (``CustomStreamWrapper``) as
    ``stream`` lets this function see the provider's own chunks and mark that case estimated.

    Args:
        chunks: the chunks the caller iterated, in order.
        stream: the consumed litellm stream, if available.
    """
    found: object | None = None
    for chunk in chunks:
        found = _chunk_usage(chunk) or found
    report = read_usage(found)
    if stream is not None and not report.estimated and not _provider_sent_usage(stream):
        return UsageReport(
            report.prompt_tokens,
            report.completion_tokens,
            report.cache_read_tokens,
            report.cache_write_tokens,
            estimated=True,
        )
    return report


def with_stream_usage(kwargs: MutableMapping[str, Any], model: str) -> MutableMapping[str, Any]:
    """Ask for usage on a stream where litellm says the provider accepts ``stream_options``.

    Returns ``kwargs`` with ``stream_options={"include_usage": True, ...}`` added when
    ``kwargs["stream"]`` is true, the caller set no ``include_usage`` of their own, and
    ``litellm.get_supported_openai_params`` lists ``stream_options`` for the model. Other
    providers (Anthropic, Gemini, Ollama) report stream usage without being asked, or not at all.
    The input mapping is not modified; a new dict is returned when something is added.
    """
    if not kwargs.get("stream") or not _supports_stream_options(model, kwargs):
        return kwargs
    options = kwargs.get("stream_options")
    if isinstance(options, Mapping) and "include_usage" in options:
        return kwargs
    merged = {**(options if isinstance(options, Mapping) else {}), "include_usage": True}
    return {**kwargs, "stream_options": merged}


def _supports_stream_options(model: str, kwargs: Mapping[str, Any]) -> bool:
    routed = _litellm.llm_provider(model, kwargs.get("custom_llm_provider"), endpoint(kwargs))
    if routed is None:  # an unknown model: leave the call as the caller wrote it
        return False
    return "stream_options" in _litellm.supported_openai_params(*routed)


def _usage_of(source: object) -> object | None:
    if source is None:
        return None
    if isinstance(source, Mapping):
        found: object | None = source.get("usage", source)
        return found
    if hasattr(source, "prompt_tokens"):
        return source
    return getattr(source, "usage", None)


def _chunk_usage(chunk: object) -> object | None:
    usage: object | None = getattr(chunk, "usage", None)
    if usage is None and isinstance(chunk, Mapping):
        usage = chunk.get("usage")
    if usage is not None:
        return usage
    hidden = getattr(chunk, "_hidden_params", None)
    found: object | None = hidden.get("usage") if isinstance(hidden, Mapping) else None
    return found


def _provider_sent_usage(stream: object) -> bool:
    raw = getattr(stream, "chunks", None)
    if not isinstance(raw, list):
        return True  # cannot tell: trust what the final chunk says
    return any(_get(chunk, "usage") is not None for chunk in raw)


def _is_unreported(usage: object) -> bool:
    return type(usage).__name__ == "UnreportedUsage"


def _cache_reads(usage: object) -> int | None:
    details = _get(usage, "prompt_tokens_details")
    value = _get(details, "cached_tokens") if details is not None else None
    return _count(value if value is not None else _first(usage, _READ_EXTRAS))


def _cache_writes(usage: object) -> int | None:
    details = _get(usage, "prompt_tokens_details")
    value = None
    if details is not None:
        value = _get(details, "cache_write_tokens")
        value = value if value is not None else _get(details, "cache_creation_tokens")
    return _count(value if value is not None else _first(usage, _WRITE_EXTRAS))


def _first(usage: object, keys: Iterable[str]) -> object | None:
    for key in keys:
        value = _get(usage, key)
        if value is not None:
            return value
    return None


def _get(obj: object, key: str) -> object | None:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _count(value: object) -> int | None:
    """A reported token count, or None when the provider sent none (never a made-up 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return int(value)
