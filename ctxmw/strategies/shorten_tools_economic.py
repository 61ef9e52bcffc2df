"""``shorten_tools_economic`` (the default): move the compaction boundary only when it pays.

The tiers are counted back from the boundary like the epoch strategies' (its own
``economic_full_tool_calls`` full, then ``economic_compacted_tool_calls`` compacted, the rest
dropped; every newer call full), but the boundary is not moved by counting calls. At every call
point two prices are weighed, from litellm's prices under the session's caching rule:

- the rent: the tokens a move would reclaim now, at the price of a cached token (what carrying
  them costs on this call, and on every call until the boundary moves);
- the purchase: rewriting the prompt after its head once (the head too under breakpoint
  caching, unless a mark sits at its end: ``economic_head_mark``, inferred from
  ``cache_breakpoints`` after this strategy in ``ctx.chain``), at the write price minus the
  read price (what moving costs).

The boundary moves to the newest call once the rent paid since the last move reaches the
purchase (times ``economic_break_even``): the ski-rental break-even rule. It moves at once when
the prompt would not fit the window, when nothing is cached anyway (the ``none`` rule, a prompt
under the provider's minimum), and when the cache is cold (idle longer than the TTL, or another
model than the previous call's): then the rewrite is free.

The guard (``economic_guard``, 1.05, under breakpoint caching; ``economic_guard_automatic``,
1.02, under automatic prefix caching; None turns either off): beside the fold the schedule keeps
its own estimated running cost and what sending everything (``none``) would have cost so far.
A move that would take the first over the guard times the second waits until the savings
banked cover it. Staying never costs more than ``none``'s call (the prompt is a shorter
prefix plus the same new messages), so at every call point the estimated cost is at most the
guard times ``none``'s, moves forced by the window and calls under the cache minimum (nothing
cached either way) excepted.

Sizes are estimated from characters (four per token), which is all a decision needs; ``ctxmw
replay`` measures the real tokens. Each past call point's decision depends only on the
transcript before it, so a resumed or stateless conversation gets the same boundaries; the
conversation's memo keeps the sizes and the fold's state per call point
(:mod:`ctxmw.strategies._economic_memo`), so a call only decides the points past the first
message that changed. Cold-cache moves are remembered in the memo too.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctxmw.messages.pairs import ToolIndex, index_tools
from ctxmw.settings import Settings
from ctxmw.strategies._economic_memo import CHARS_PER_TOKEN, FoldState, SizeTable, resume_fold
from ctxmw.strategies._economics import DEFAULT_TTL, Economics, economics
from ctxmw.strategies._epochs import EpochPlan, apply_plan
from ctxmw.strategies._registry import register_strategy
from ctxmw.types import Messages, StrategyContext

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_TTL",
    "Economics",
    "Sizes",
    "boundary_plan",
    "economic_moves",
    "economics",
    "shorten_tools_economic",
]

NAME = "shorten_tools_economic"


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
    table = SizeTable.for_settings(settings)
    table.extend(messages, index)
    return _sizes(table, messages, index)


def _sizes(table: SizeTable, messages: Sequence[Any], index: ToolIndex) -> Sizes:
    first = next(iter(index.groups), len(messages))  # groups are keyed in message order
    return Sizes(table.results_at, table.other, table.full, table.compacted, table.other[first])


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
    state, moves = FoldState(), []
    for point in points:
        after = _step(state, point, sizes, econ, settings, cold)
        if after.moves > state.moves:
            moves.append((point, after.boundary))
        state = after
    return moves


def _step(
    state: FoldState,
    point: int,
    sizes: Sizes,
    econ: Economics,
    settings: Settings,
    cold: Collection[int],
) -> FoldState:
    """The decision at one call point: the fold's state after it (pure)."""
    n = sizes.calls_before(point)
    stay = sizes.prompt(point, state.boundary, settings)
    moved = sizes.prompt(point, n, settings)
    plain = sizes.prompt(point, 0, settings)
    is_cold = point in cold
    baseline = state.baseline + _cost(econ, plain, 0.0 if is_cold else state.plain)
    kept = _cost(econ, stay, 0.0 if is_cold else state.sent)
    if moved >= stay:
        return replace(state, spent=state.spent + kept, baseline=baseline, sent=stay, plain=plain)
    # Carrying the reclaimable tokens costs a cache read each (a full read if uncached).
    rent = state.rent + (stay - moved) * (econ.read if econ.caches(stay) else econ.input)
    # A move rewrites the prompt after the head. Automatic caches read the head back; a
    # breakpoint move is priced as rewriting it too (a client may mark only the end), unless
    # the client marks the head (economic_head_mark).
    head = sizes.head if econ.head_read and econ.caches(sizes.head) else 0.0
    purchase = max(moved - head, 0.0) * (econ.write - econ.read)
    spent = state.spent + _cost(econ, moved, 0.0 if is_cold else min(head, state.sent))
    forced = stay > econ.limit or is_cold or not econ.caches(stay)
    # The guard: a move that would take the running cost over the guard times none's waits
    # until the savings banked so far cover it (staying never costs more than none's call).
    guard = econ.guard
    within = guard is None or spent <= guard * baseline
    if forced or (within and rent >= settings.economic_break_even * purchase):
        return FoldState(n, 0.0, state.moves + 1, state.boundary, spent, baseline, moved, plain)
    return FoldState(
        state.boundary, rent, state.moves, state.previous, state.spent + kept, baseline, stay, plain
    )


def _cost(econ: Economics, prompt: float, cached: float) -> float:
    """Estimated cost of one prompt whose first ``cached`` tokens are in the cache."""
    if not econ.caches(prompt):
        return prompt * econ.input
    reads = cached if econ.caches(cached) else 0.0
    return reads * econ.read + (prompt - reads) * econ.write


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
    econ = economics(ctx.model, s, head_mark=_marks_head_later(ctx.chain))
    cold = _cold_points(messages, ctx, econ)
    key = (
        econ,
        s.economic_full_tool_calls,
        s.economic_compacted_tool_calls,
        s.economic_break_even,
    )

    def make_step(table: SizeTable) -> Callable[[FoldState, int], FoldState]:
        sizes = _sizes(table, messages, index)
        return lambda state, point: _step(state, point, sizes, econ, s, cold)

    _, fold = resume_fold(messages, index, s, key, cold, ctx.memo, f"{NAME}:fold", make_step)
    if not fold.moves:
        return messages
    plan = boundary_plan(len(index.calls), fold.boundary, fold.previous, fold.moves, s)
    out = apply_plan(messages, index, plan, ctx, NAME)
    ctx.stats[NAME].update(
        rule=econ.rule,
        moves=fold.moves,
        cold=len(messages) in cold,
        full_tool_calls=s.economic_full_tool_calls,
    )
    return out


def _marks_head_later(chain: Sequence[str]) -> bool:
    """Whether ``cache_breakpoints`` runs after this strategy (it marks the head's end)."""
    return NAME in chain and "cache_breakpoints" in chain[chain.index(NAME) + 1 :]


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
