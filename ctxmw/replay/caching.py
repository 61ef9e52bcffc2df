"""Prices and the three caching models ``ctxmw replay`` compares, one call at a time.

Caching models (each call's prompt tokens split into cache reads, cache writes and the rest):

- ``auto``: automatic prefix caching, OpenAI-style. Reads are the common prefix with the previous
  call under OpenAI's rule (nothing under 1,024 tokens, then whole 128-token blocks); no write
  premium (writes are 0: the rest is priced as plain input).
- ``breakpoints``: explicit ``cache_control`` marks placed by the ``cache_breakpoints`` strategy
  (end of the epoch's stable prefix and the last message), Anthropic-style. Reads are the tokens
  up to the last mark of the previous call that lies in the common prefix (nothing under the
  model's minimum); writes are the tokens from there to this call's last mark.
- ``end_breakpoint``: one mark at the end of every prompt (what most clients do). Reads are the
  whole previous prompt when it is a prefix of this one, else 0: after a break the only cached
  entries sit at the ends of earlier prompts, far more than the 20 blocks Anthropic looks back
  from a breakpoint in a long prompt. Writes are the rest of the prompt.

In both breakpoint models a prompt shorter than the minimum is neither read nor written. The
reply primer litellm counts (a few tokens) is never cached.

Prices come from litellm's model map for one model and serve all three models, so they compare:
input, cache read and cache write per token. A call is priced by ``litellm.cost_per_token``, so
tiered prices (a higher rate above 200k prompt tokens, as Gemini 2.5 Pro has) apply as the
provider bills them. A model without a cache-write price pays 1.25x its input price for writes
(Anthropic's five-minute cache write premium); one without a cache-read price pays the input
price for reads (caching then saves nothing; the table says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxmw import _litellm
from ctxmw.errors import UsageError
from ctxmw.telemetry.cost import entry_rates, tier_suffixes
from ctxmw.telemetry.marks import is_marked
from ctxmw.telemetry.prefix import PrefixResult
from ctxmw.telemetry.rules import (
    automatic_reads,
    cache_minimum,
    expected_cached_tokens,
    prefix_reads,
)
from ctxmw.telemetry.rules import uses_breakpoints as _uses_breakpoints

__all__ = [
    "CACHING_MODELS",
    "MARKING_MODEL",
    "WRITE_PREMIUM",
    "Prices",
    "Split",
    "auto_split",
    "body_tokens",
    "breakpoint_minimum",
    "breakpoints_split",
    "end_breakpoint_split",
    "model_prices",
]

CACHING_MODELS = ("auto", "breakpoints", "end_breakpoint")
MARKING_MODEL = "anthropic/claude-sonnet-4-5"
"""The model name ``cache_breakpoints`` sees when the priced model caches implicitly."""
WRITE_PREMIUM = 1.25


@dataclass(frozen=True, slots=True)
class Prices:
    """USD per token for one model, from litellm's model map.

    Attributes:
        model: the litellm model name.
        input: an uncached prompt token.
        cache_read: a prompt token read from the cache.
        cache_write: a prompt token written to the cache.
        source: where each price came from (``litellm`` or the documented fallback).
        tiers: the prompt sizes above which litellm prices the model differently.
        output: a generated token (what a read-back's own call costs beside its prompt).
    """

    model: str
    input: float
    cache_read: float
    cache_write: float
    source: dict[str, str]
    tiers: tuple[int, ...] = ()
    output: float = 0.0
    _rates: dict[int, tuple[float, float, float]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def cost(self, prompt_tokens: int, split: Split) -> float:
        """USD of one prompt split into reads, writes and plain input, as litellm prices it.

        litellm applies the model's tiered prices (``tiers``: the prompt sizes above which
        they change); where it has no cache-write price (it then bills writes as input), the
        documented write premium is added on top.
        """
        plain_rate, read_rate, write_rate = self._tier_rates(prompt_tokens)
        plain = prompt_tokens - split.reads - split.writes
        cost = plain * plain_rate + split.reads * read_rate + split.writes * write_rate
        if self.source["cache_write"] != "litellm":
            cost += split.writes * (self.cache_write - self.input)
        return cost

    def _tier_rates(self, prompt_tokens: int) -> tuple[float, float, float]:
        # Within a tier litellm's price is linear in each kind of token: ask it once per tier
        # (a cost_per_token call takes milliseconds; replay prices thousands of prompts).
        tier = sum(1 for floor in self.tiers if prompt_tokens > floor)
        found = self._rates.get(tier)
        if found is not None:
            return found
        size = max(prompt_tokens, 1)
        plain, read, write = (
            _litellm.cost_per_token(
                self.model, prompt_tokens=size, cache_read_tokens=r, cache_write_tokens=w
            )[0]
            / size
            for r, w in ((0, 0), (size, 0), (0, size))
        )
        rates = self._rates[tier] = (plain, read, write)
        return rates


@dataclass(frozen=True, slots=True)
class Split:
    """Prompt tokens read from and written to the cache on one call."""

    reads: int = 0
    writes: int = 0


def model_prices(model: str) -> Prices:
    """Input, cache-read and cache-write prices of ``model`` from litellm's map.

    Raises:
        UsageError: litellm has no input price for the model.
    """
    info = _litellm.model_info(model)
    rates = entry_rates(info)
    if rates is None or rates.input <= 0:
        raise UsageError(
            f"litellm's price table has no input price for model {model!r}; pass a priced model "
            "such as 'anthropic/claude-sonnet-4-5' or 'gpt-4o'."
        )
    price, read, write = rates.input, rates.cache_read, rates.cache_write
    source = {"input": "litellm", "cache_read": "litellm", "cache_write": "litellm"}
    if not isinstance(read, int | float):
        read, source["cache_read"] = price, "input price (litellm has none)"
    if not isinstance(write, int | float):
        write, source["cache_write"] = price * WRITE_PREMIUM, f"{WRITE_PREMIUM}x input"
    output = info.get("output_cost_per_token")
    output = float(output) if isinstance(output, int | float) else float(price)
    return Prices(model, float(price), float(read), float(write), source, _tiers(info), output)


def _tiers(info: dict[str, Any]) -> tuple[int, ...]:
    """The prompt sizes above which litellm's map prices ``info``'s model differently."""
    return tuple(sorted(tier_suffixes(info)))


def breakpoint_minimum(model: str) -> int:
    """The smallest prefix the breakpoint models cache, for ``model`` (or the marking model)."""
    return cache_minimum("breakpoints", model if _uses_breakpoints(model) else MARKING_MODEL)


def body_tokens(r: PrefixResult) -> int:
    """Tokens of the tools and messages (the cacheable part), without the reply primer."""
    return r.tools_tokens + r.cumulative_tokens[-1]


def auto_split(r: PrefixResult) -> Split:
    """OpenAI-style automatic prefix caching: reads only, no write premium."""
    reads = automatic_reads(r.prefix_tokens)
    return Split(reads=reads)


def breakpoints_split(r: PrefixResult, marked: Sequence[Any], minimum: int) -> Split:
    """Explicit marks (``r`` measured on the ``marked`` prompt): read to the last previous mark
    in the common prefix, write from there to this prompt's last mark."""
    reads = expected_cached_tokens(
        "breakpoints",
        prefix_tokens=r.prefix_tokens,
        marked_prefix_tokens=r.marked_prefix_tokens,
        minimum=minimum,
    )
    last = _last_marked(marked)
    upto = r.tools_tokens + r.cumulative_tokens[last + 1] if last >= 0 else 0
    return Split(reads=reads, writes=max(upto - reads, 0) if upto >= minimum else 0)


def end_breakpoint_split(r: PrefixResult, body: int, minimum: int) -> Split:
    """A mark at the end of every prompt: read the whole previous prompt if it is a prefix."""
    extends = r.first_diff is not None and not r.broke
    reads = prefix_reads(r.prefix_tokens, minimum) if extends else 0
    return Split(reads=reads, writes=body - reads if body >= minimum else 0)


def _last_marked(messages: Sequence[Any]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if is_marked(messages[i]):
            return i
    return -1
