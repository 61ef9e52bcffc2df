"""``shorten_tools_economic`` (the default): move the compaction boundary only when it pays.

The tiers are counted back from the boundary like the epoch strategies' (its own
``economic_full_tool_calls`` full, then ``economic_compacted_tool_calls`` compacted, the rest
dropped; every newer call full), but the boundary is not moved by counting calls. At every call
point two prices are weighed, from litellm's prices under the session's caching rule:

- the rent: the tokens a move would reclaim now, at the price of a cached token (what carrying
  them costs on this call, and on every call until the boundary moves);
- the purchase: rewriting the prompt after its head once (the head too under breakpoint
  caching, where no mark sits at its end), at the write price minus the read price (what
  moving costs).

The boundary moves to the newest call once the rent paid since the last move reaches the
purchase (times ``economic_break_even``): the ski-rental break-even rule. It moves at once when
the prompt would not fit the window, when nothing is cached anyway (the ``none`` rule, a prompt
under the provider's minimum), and when the cache is cold (idle longer than the TTL, or another
model than the previous call's): then the rewrite is free.

Sizes are estimated from characters (four per token), which is all a decision needs; ``ctxmw
replay`` measures the real tokens. Each past call point's decision depends only on the
transcript before it, so decisions are re-derived at every call and a resumed or stateless
conversation gets the same boundaries; cold-cache moves are remembered in the session's memo.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from ctxmw.messages.pairs import ToolIndex, index_tools
from ctxmw.settings import Settings
from ctxmw.strategies._economics import DEFAULT_TTL, Economics, economics
from ctxmw.strategies._epochs import EpochPlan, apply_plan
from ctxmw.strategies._registry import register_strategy
from ctxmw.types import Messages, StrategyContext

__all__ = [
    "DEFAULT_TTL",
    "Economics",
    "Schedule",
    "Sizes",
    "boundary_plan",
    "decide",
    "economic_moves",
    "economics",
    "shorten_tools_economic",
]

NAME = "shorten_tools_economic"
CHARS_PER_TOKEN = 4
_MARKER = 48  # what the compacted form adds beside the kept characters ("[compacted: ...]")


@dataclass(frozen=True, slots=True)
class Sizes:
    """Estimated tokens of a transcript, so any call point's prompt under any boundary is O(1).

    Attributes:
        results_at: message index of each completed call's result, by forward number - 1.
        other: ``other[i]`` = tokens of what messages ``[:i]`` always show (roles, texts).
        full: ``full[f]`` = tokens of calls ``1..f`` shown full (arguments and result).
        compacted: ``compacted[f]`` = tokens of calls ``1..f`` shown compacted.
        head: tokens before the first tool group (system prompt, task): never rewritten.
    """

    results_at: list[int]
    other: list[float]
    full: list[float]
    compacted: list[float]
    head: float

    def calls_before(self, point: int) -> int:
        """Completed calls whose result lies before message ``point``."""
        return bisect_left(self.results_at, point)

    def prompt(self, point: int, boundary: int, settings: Settings) -> float:
        """Tokens of the prompt at ``point`` (``messages[:point]``) with the boundary there."""
        n = self.calls_before(point)
        mid = min(max(boundary - settings.economic_full_tool_calls, 0), n)
        low = max(mid - settings.economic_compacted_tool_calls, 0)
        shown = self.full[n] - self.full[mid] + self.compacted[mid] - self.compacted[low]
        return self.other[point] + shown


def measure(messages: Sequence[Any], index: ToolIndex, settings: Settings) -> Sizes:
    """The :class:`Sizes` of ``messages`` (characters / 4)."""
    other = [0.0] * len(messages)
    full = [0.0] * len(index.calls)
    compacted = [0.0] * len(index.calls)
    out_cap, arg_cap = (
        settings.short_output_length + _MARKER,
        settings.short_string_length + _MARKER,
    )
    for i, msg in enumerate(messages):
        other[i] = 4 + _chars(msg.get("content") if msg.get("role") != "tool" else None)
        f = index.result_of.get(i)
        if f is not None:
            size = _chars(msg.get("content"))
            full[f - 1] += size
            compacted[f - 1] += min(size, out_cap)
        for tc, f in zip(msg.get("tool_calls") or (), index.groups.get(i, ()), strict=False):
            if f is not None and isinstance(tc, dict):
                size = len(str((tc.get("function") or {}).get("arguments") or ""))
                full[f - 1] += size
                compacted[f - 1] += min(size, arg_cap)
    first = min(index.groups, default=len(messages))
    cum_other = [c / CHARS_PER_TOKEN for c in accumulate(other, initial=0.0)]
    return Sizes(
        [call.result_index for call in index.calls],
        cum_other,
        [c / CHARS_PER_TOKEN for c in accumulate(full, initial=0.0)],
        [c / CHARS_PER_TOKEN for c in accumulate(compacted, initial=0.0)],
        cum_other[first],
    )


def _chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(str(p.get("text") or "")) if isinstance(p, dict) else 0 for p in content)
    return 0


@dataclass(frozen=True, slots=True)
class Schedule:
    """The economic schedule's state after a call point.

    Attributes:
        boundary: completed calls before the boundary (0: it never moved).
        rent: what carrying the reclaimable tokens has cost since the last move.
    """

    boundary: int = 0
    rent: float = 0.0


def decide(
    state: Schedule, sizes: Sizes, point: int, econ: Economics, settings: Settings, cold: bool
) -> Schedule:
    """One call point's decision: the state after ``point`` (a moved boundary or more rent).

    Args:
        state: the schedule before this call point.
        sizes: the transcript's estimated sizes.
        point: the call point (messages sent).
        econ: the prices and limits.
        settings: the tiers and the break-even factor.
        cold: the cache is cold at this call point (the move is free).
    """
    n = sizes.calls_before(point)
    stay = sizes.prompt(point, state.boundary, settings)
    moved = sizes.prompt(point, n, settings)
    if moved >= stay:
        return state
    # Carrying the reclaimable tokens costs a cache read each (a full read if uncached).
    rent = state.rent + (stay - moved) * (econ.read if econ.caches(stay) else econ.input)
    purchase = max(moved - (sizes.head if econ.head_read else 0.0), 0.0) * (econ.write - econ.read)
    forced = stay > econ.limit or cold or not econ.caches(stay)
    if forced or rent >= settings.economic_break_even * purchase:
        return Schedule(n)
    return Schedule(state.boundary, rent)


def economic_moves(
    sizes: Sizes,
    points: Sequence[int],
    econ: Economics,
    settings: Settings,
    cold: Collection[int] = (),
) -> list[tuple[int, int]]:
    """Where the boundary moves: ``(call point, boundary)`` pairs, in order.

    Args:
        sizes: the transcript's estimated sizes.
        points: call points (message counts sent), ascending.
        econ: the prices and limits.
        settings: the tiers and the break-even factor.
        cold: call points whose cache is cold (the move there is free).
    """
    state, moves = Schedule(), []
    for point in points:
        after = decide(state, sizes, point, econ, settings, point in cold)
        if after.boundary != state.boundary:
            moves.append((point, after.boundary))
        state = after
    return moves


def boundary_plan(
    n: int, boundary: int, previous: int, moves: int, settings: Settings
) -> EpochPlan:
    """The epoch plan for ``n`` completed calls with the boundary after call ``boundary``."""
    keep_full = (n - boundary) + settings.economic_full_tool_calls
    truncate_to = keep_full + settings.economic_compacted_tool_calls
    return EpochPlan(moves - 1, boundary, boundary - previous, keep_full, truncate_to)


@register_strategy(NAME)
def shorten_tools_economic(messages: Messages, ctx: StrategyContext) -> Messages:
    """Compact and drop old tool calls, moving the boundary only when it pays (default)."""
    index = index_tools(messages, ctx.memo, NAME)
    s = ctx.settings
    if not index.calls or (s.economic_full_tool_calls == 0 == s.economic_compacted_tool_calls):
        return messages
    econ = economics(ctx.model, s)
    cold = _cold_points(messages, ctx, econ)
    points = [*_call_points(messages), len(messages)]
    moves = economic_moves(measure(messages, index, s), points, econ, s, cold)
    if not moves:
        return messages
    previous = moves[-2][1] if len(moves) > 1 else 0
    plan = boundary_plan(len(index.calls), moves[-1][1], previous, len(moves), s)
    out = apply_plan(messages, index, plan, ctx, NAME)
    ctx.stats[NAME].update(
        rule=econ.rule,
        moves=len(moves),
        cold=len(messages) in cold,
        full_tool_calls=s.economic_full_tool_calls,
    )
    return out


def _call_points(messages: Sequence[Any]) -> list[int]:
    return [i for i, m in enumerate(messages) if i > 0 and m.get("role") == "assistant"]


def _cold_points(messages: Messages, ctx: StrategyContext, econ: Economics) -> set[int]:
    """Call points whose cache was cold, kept in the session's memo; this call's is checked."""
    if ctx.memo is None:
        return set()
    state: dict[str, Any] = ctx.memo.setdefault(f"{NAME}:cache", {"cold": set(), "last": None})
    cold: set[int] = state["cold"]
    last = state["last"]
    if last is not None and ctx.now is not None:
        when, model = last
        if model != ctx.model or ctx.now - when > econ.ttl:
            cold.add(len(messages))
    if ctx.now is not None:
        state["last"] = (ctx.now, ctx.model)
    return cold
