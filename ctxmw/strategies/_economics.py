"""The prices and cache limits the economic schedule weighs, per model and caching rule."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from ctxmw._litellm import llm_provider, mapped_model_info, model_info, price_map_version
from ctxmw.context.tokens import input_window
from ctxmw.settings import Settings
from ctxmw.telemetry.cost import entry_rates
from ctxmw.telemetry.rules import cache_minimum, resolve_rule

__all__ = ["DEFAULT_TTL", "Economics", "economics"]

UNPRICED_READ_SHARE = 0.1
"""Read price as a share of the input price when litellm has none (the usual 90% discount)."""
WRITE_PREMIUM = 1.25
"""Breakpoint write price over the input price when litellm has none (Anthropic's 5 minutes)."""
DEFAULT_TTL = {"breakpoints": 300.0, "openai": 300.0, "gemini": 300.0, "exact": math.inf}
"""Seconds an unused cache lives, per caching rule (``cache_ttl`` overrides): Anthropic's and
OpenAI's caches last five minutes of inactivity (OpenAI: 5-10, up to an hour off-peak); Gemini's
implicit cache is taken as the same; self-hosted servers keep a prefix until it is evicted."""
_PROVIDER_TTL = {"deepseek": 3600.0}  # DeepSeek: "a few hours to days"; one hour is the floor


@dataclass(frozen=True, slots=True)
class Economics:
    """What one token costs under the session's caching rule, and the cache's limits.

    Attributes:
        rule: the concrete caching rule (``openai``, ``breakpoints``, ``gemini``, ``exact``,
            ``none``).
        input: USD per uncached prompt token (1.0 when litellm does not price the model: only
            ratios matter).
        read: USD per prompt token read from the cache.
        write: USD per prompt token written to the cache (the input price unless the provider
            charges a write premium).
        minimum: the smallest prompt the provider caches, in tokens.
        ttl: seconds an unused cache lives.
        limit: the largest prompt the strategy may send (window minus the output reservation).
        head_marked: the client marks the end of the head (``economic_head_mark``).
        guard: the bound on the schedule's estimated cost x ``none`` for this rule
            (``economic_guard`` under breakpoints, ``economic_guard_automatic`` otherwise;
            None: no guard).
    """

    rule: str
    input: float
    read: float
    write: float
    minimum: int
    ttl: float
    limit: int
    head_marked: bool = False
    guard: float | None = None

    @property
    def head_read(self) -> bool:
        """Whether the schedule may count on a rewritten prompt reading its head from the cache.

        Automatic prefix caches do. A breakpoint cache does only from a mark at the head's end:
        ``cache_breakpoints`` puts one there, but a client that marks only the end of each
        prompt does not, so the schedule prices a breakpoint move as rewriting the head too
        (the head mark then makes the move cheaper than priced, never dearer), unless told
        that the head is marked (``economic_head_mark``, or ``cache_breakpoints`` after the
        strategy in the chain).
        """
        return self.rule != "breakpoints" or self.head_marked

    def caches(self, tokens: float) -> bool:
        """Whether a prompt of ``tokens`` is cached at all."""
        return self.rule != "none" and tokens >= self.minimum


def economics(model: str | None, settings: Settings, *, head_mark: bool = False) -> Economics:
    """The prices and limits one call of ``model`` works with (see the module docstring).

    An unknown model (None) is taken to cache automatically at the usual discount, unless the
    ``cache_rule`` setting names a rule. ``head_mark``: whether the head's end is marked when
    the ``economic_head_mark`` setting leaves it to be inferred (None).
    """
    provider = _provider(model)
    if model:
        rule = resolve_rule(settings.cache_rule, model, provider)
    else:
        rule = "exact" if settings.cache_rule == "auto" else settings.cache_rule
    listed_input, listed_read, listed_write = _prices(model)
    price = listed_input or 1.0
    read = listed_read or price * UNPRICED_READ_SHARE
    write = price
    if rule == "breakpoints":
        write = listed_write or price * WRITE_PREMIUM
    if rule == "none":
        read = write = price
    ttl = settings.cache_ttl or _PROVIDER_TTL.get(provider or "", DEFAULT_TTL.get(rule, math.inf))
    window = settings.context_window or input_window(model)
    minimum = cache_minimum(rule, model or "", provider)
    limit = window - settings.output_reservation
    marked = settings.economic_head_mark
    marked = rule == "breakpoints" and (head_mark if marked is None else marked)
    guard = _guard(rule, settings)
    return Economics(rule, price, read, write, minimum, ttl, limit, marked, guard)


def _guard(rule: str, settings: Settings) -> float | None:
    """``economic_guard_automatic`` unless the rule uses breakpoints.

    Under automatic caching a move reads the head back and writes at the input price, so it
    pays back sooner and a tighter bound costs the long sessions little; under breakpoints a
    first move waits until the guard's margin covers a rewrite that may include the head (with
    the head marked too: 1.02 there cost the long sessions more than it bought, see the
    economics page, ``docs/design/economics.md``).
    """
    if rule == "breakpoints":
        return settings.economic_guard
    return settings.economic_guard_automatic


def _provider(model: str | None) -> str | None:
    if not model:
        return None
    routed = llm_provider(model)
    if routed is not None:
        return routed[1]
    return model.split("/", 1)[0] if "/" in model else None


def _prices(model: str | None) -> tuple[float | None, float | None, float | None]:
    """Input, cache-read and cache-write prices from litellm's map (None where it has none).

    Read afresh each call (litellm memoises a mapped entry: microseconds), so a later
    ``litellm.register_model`` that overrides a price is seen; only an unmapped model's miss,
    which takes litellm ~0.5 ms, is remembered, per version of the price map. The entry is read
    as the telemetry's cost reads it (:func:`~ctxmw.telemetry.cost.entry_rates`).
    """
    if not model or _unmapped(model, price_map_version()):
        return None, None, None
    rates = entry_rates(mapped_model_info(model))
    if rates is None:
        return None, None, None
    return _positive(rates.input), _positive(rates.cache_read), _positive(rates.cache_write)


@lru_cache(maxsize=256)
def _unmapped(model: str, version: tuple[int, int]) -> bool:
    # A registration that adds the model changes the version, so the miss is asked again.
    return not model_info(model)


def _positive(value: float | None) -> float | None:
    return value if value is not None and value > 0 else None
