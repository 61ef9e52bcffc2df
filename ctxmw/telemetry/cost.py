"""A call's cost from litellm's price entry, resolved once per model: litellm's own figure, fast.

``litellm.completion_cost`` resolves the model's price entry anew on every call (candidate
names, provider rules, service tiers), which costs about as much as the rest of the telemetry.
For the usual response (token counts, cache reads and writes, nothing else billed) the cost is a
few multiplications by the entry's rates: ``input_cost_per_token`` for the uncached prompt,
``cache_read_input_token_cost`` for the cache reads, ``cache_creation_input_token_cost`` for the
writes (each defaulting to the input rate where the entry has none), ``output_cost_per_token``
for the completion; above a tier's threshold (the ``*_above_<N>[k]_tokens`` keys) the tier's
rates. :func:`fast_cost` computes that, in litellm's order of operations, so the figure is
litellm's to the last bit.

Where litellm prices a response differently, it prices it here too (``None`` from
:func:`fast_cost`, and :func:`~ctxmw.telemetry.response.cost_of` asks litellm):

- a usage with anything but prompt, completion, cache read and cache write tokens (audio,
  images, reasoning details, web searches, a provider-stated cost, Anthropic's top-level cache
  fields), or a response with provider-specific fields;
- an entry litellm prices otherwise: per character (Vertex AI), per second, ``tiered_pricing``
  lists, ``off_peak`` windows (a time of day), provider rules this module does not mirror;
- litellm's process-wide discounts or margins (``cost_discount_config``, ``cost_margin_config``).

The second case is found, not listed: the first time a (model, provider, served model, service
tier) is seen, the rates are checked against ``litellm.completion_cost`` on probe usages (below
and above every tier, with cache reads and writes); rates that disagree on any probe mean this
entry goes to litellm for good. A changed price map (``litellm.register_model``) starts afresh.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxmw import _litellm

__all__ = ["Rates", "entry_rates", "fast_cost", "tier_suffixes"]

_TIER = re.compile(
    r"^(input_cost_per_token|output_cost_per_token|cache_read_input_token_cost"
    r"|cache_creation_input_token_cost)_above_(\d+)(k?)_tokens$"
)
# Entry keys that make litellm price by something else than these token rates.
_OTHER_PRICING = ("tiered_pricing", "off_peak", "input_cost_per_character", "per_second")
_USAGE_KEYS = frozenset({"prompt_tokens", "completion_tokens", "total_tokens"})
_PROMPT_DETAILS = frozenset({"cached_tokens", "cache_write_tokens", "cache_creation_tokens"})
_ZERO_DETAILS = frozenset({"audio_tokens", "image_tokens", "video_tokens", "text_tokens"})
_DETAILS = _PROMPT_DETAILS | _ZERO_DETAILS
_HIDDEN_KEYS = ("custom_llm_provider", "region_name", "model", "provider_response_model")
_MAX_KEYS = 256
# Providers litellm prices with a cost function of their own (not generic_cost_per_token's
# arithmetic: a provider-stated cost, characters, per-region rules, reasoning tokens moved
# around, a float sum in another order), and those it cannot price without signing in.
_OWN_RULES = frozenset(
    {
        "",
        "azure_ai",
        "bedrock",
        "chatgpt",
        "dashscope",
        "databricks",
        "fireworks_ai",
        "github_copilot",
        "lemonade",
        "perplexity",
        "qwen_ai_platform",
        "qwencloud",
        "replicate",
        "tencent",
        "together_ai",
        "vertex_ai",
        "vertex_ai_beta",
        "xai",
    }
)


@dataclass(frozen=True, slots=True)
class Rates:
    """One tier's per-token rates (USD), as litellm resolves them."""

    input: float
    output: float
    cache_read: float | None
    cache_write: float | None


@dataclass(frozen=True, slots=True)
class _Book:
    name: str  # the entry's model name
    entry: Mapping[str, Any]  # the entry as resolved (a registered price replaces it)
    base: Rates
    tiers: tuple[tuple[int, Rates], ...]  # (threshold, rates), ascending: above it, these


_books: dict[tuple[Any, ...], _Book | None] = {}


def fast_cost(response: Any, model: str, provider: str) -> float | None:
    """litellm's cost of a ``ModelResponse`` from the model's resolved rates; None: ask litellm."""
    counts = _plain_counts(response)
    if counts is None or provider in _OWN_RULES or _litellm.cost_adjusted():
        return None
    key = _key(response, model, provider)
    if key is None:
        return None
    if key not in _books or _changed(_books[key], provider):
        if len(_books) >= _MAX_KEYS:
            _books.clear()
        _books[key] = _resolve(response, model, provider)
    book = _books[key]
    return None if book is None else _cost(book, *counts)


def _changed(book: _Book | None, provider: str) -> bool:
    # litellm memoises its entries: this is a lookup and a dict comparison (microseconds).
    return book is not None and _litellm.mapped_model_info(book.name, provider) != book.entry


def _cost(book: _Book, prompt: int, completion: int, read: int, write: int) -> float:
    rates = book.base
    for threshold, tier in book.tiers:
        if prompt > threshold:
            rates = tier
    cache_read = rates.input if rates.cache_read is None else rates.cache_read
    cache_write = rates.input if rates.cache_write is None else rates.cache_write
    # litellm's order of operations (generic_cost_per_token): the same float rounding.
    cost = float(max(prompt - read - write, 0)) * rates.input
    cost += float(read) * cache_read
    if write:
        cost += write * cache_write
    return cost + float(completion) * rates.output


def _plain_counts(response: Any) -> tuple[int, int, int, int] | None:
    """(prompt, completion, cache read, cache write) of a usage litellm prices by tokens alone."""
    if type(response).__name__ != "ModelResponse":
        return None
    dump = getattr(_attr(response, "usage"), "model_dump", None)
    if dump is None:
        return None
    data = dump(exclude_none=True)
    details = data.pop("prompt_tokens_details", None) or {}
    completion_details = data.pop("completion_tokens_details", None) or {}
    if not _USAGE_KEYS.issuperset(data) or any(completion_details.values()):
        return None
    if any(details.get(k) for k in _ZERO_DETAILS) or not (
        _PROMPT_DETAILS | _ZERO_DETAILS
    ).issuperset(details):
        return None
    counts = (
        data.get("prompt_tokens", 0),
        data.get("completion_tokens", 0),
        details.get("cached_tokens", 0),
        details.get("cache_write_tokens", 0) or details.get("cache_creation_tokens", 0),
    )
    return counts if all(type(n) is int and n >= 0 for n in counts) else None


def _key(response: Any, model: str, provider: str) -> tuple[Any, ...] | None:
    hidden = _attr(response, "_hidden_params") or {}
    if not isinstance(hidden, Mapping) or hidden.get("provider_specific_fields"):
        return None
    if _attr(response, "provider_specific_fields"):
        return None
    served = tuple(str(hidden.get(k)) for k in _HIDDEN_KEYS)
    tier = _attr(response, "service_tier")
    return (_litellm.price_map_version(), model, provider, response.model, str(tier), served)


def _attr(model: Any, name: str) -> Any:
    """``getattr(model, name, None)`` for a pydantic model, without its slow missing-name path.

    pydantic keeps fields in ``__dict__``, extra fields in ``__pydantic_extra__`` and private
    ones in ``__pydantic_private__``; a name in none of them is absent (None).
    """
    for where in (model.__dict__, model.__pydantic_extra__, model.__pydantic_private__):
        if where and name in where:
            return where[name]
    return None


def _resolve(response: Any, model: str, provider: str) -> _Book | None:
    """The rates litellm prices this response shape with, checked on probes; None: litellm's."""
    for name in dict.fromkeys(n for n in (getattr(response, "model", None), model) if n):
        book = _book_of(name, _litellm.model_info(name, provider or None), provider)
        if book is not None and _agrees(book, response, model, provider):
            return book
    return None


def _book_of(name: str, entry: Mapping[str, Any], provider: str) -> _Book | None:
    info = {key: value for key, value in entry.items() if value is not None}  # unset: None
    if any(any(mark in key for mark in _OTHER_PRICING) for key, value in info.items() if value):
        return None
    base = entry_rates(entry)
    if base is None:
        return None
    suffixes = tier_suffixes(info)
    # Like litellm, a tier without a rate of its own keeps the rate of the tier below it.
    tiers, under = [], base
    for threshold in sorted(suffixes):
        under = _rates(info, suffixes[threshold], under) or under
        tiers.append((threshold, under))
    return _Book(name, entry, base, tuple(tiers))


def entry_rates(entry: Mapping[str, Any]) -> Rates | None:
    """The base tier's rates of one litellm price entry (None: it has no input rate).

    The one reading of litellm's per-token price keys: the telemetry's cost and the economic
    schedule's prices (:mod:`ctxmw.strategies._economics`) both come from it.
    """
    return _rates({key: value for key, value in entry.items() if value is not None}, "")


def tier_suffixes(entry: Mapping[str, Any]) -> dict[int, str]:
    """The prompt sizes above which an entry's rates change, each with its keys' suffix
    (``200000: "_above_200k_tokens"``): the one reading of litellm's tiered prices."""
    suffixes: dict[int, str] = {}
    for key, value in entry.items():
        found = _TIER.match(key)
        if found is not None and value is not None:
            suffixes[int(found[2]) * (1000 if found[3] else 1)] = (
                f"_above_{found[2]}{found[3]}_tokens"
            )
    return suffixes


def _rates(info: Mapping[str, Any], suffix: str, under: Rates | None = None) -> Rates | None:
    def rate(name: str, default: float | None) -> float | None:
        value = info.get(name + suffix)
        return float(value) if isinstance(value, int | float) else default

    if under is None:
        if not isinstance(info.get("input_cost_per_token"), int | float):
            return None
        under = Rates(0.0, 0.0, None, None)
    return Rates(
        input=rate("input_cost_per_token", under.input) or 0.0,
        output=rate("output_cost_per_token", under.output) or 0.0,
        cache_read=rate("cache_read_input_token_cost", under.cache_read),
        cache_write=rate("cache_creation_input_token_cost", under.cache_write),
    )


def _agrees(book: _Book, response: Any, model: str, provider: str) -> bool:
    for counts in _probes(book):
        probe = copy.copy(response)
        probe.usage = _litellm.usage_object(
            counts[0], counts[1], cached_tokens=counts[2], cache_write_tokens=counts[3] or None
        )
        try:
            expected = _litellm.completion_cost(probe, model, provider or None)
        except Exception:  # litellm cannot price it: neither can this module
            return False
        if expected != _cost(book, *counts):
            return False
    return True


def _probes(book: _Book) -> list[tuple[int, int, int, int]]:
    probes = [(1_000, 50, 0, 0), (1_000, 50, 400, 0), (1_000, 50, 300, 200)]
    for threshold, _ in book.tiers:
        probes += [(threshold, 7, 0, 0), (threshold + 1_000, 50, 500, 100)]
    return probes
