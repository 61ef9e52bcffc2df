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
message that changed. Cold-cache moves are remembered in the memo too. The decision itself
(sizes, the step at one call point, the plan) is pure: :mod:`~ctxmw.strategies._economic_schedule`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ctxmw.messages.pairs import ToolIndex, index_tools
from ctxmw.settings import Settings
from ctxmw.strategies._economic_memo import CHARS_PER_TOKEN, FoldState, SizeTable, resume_fold
from ctxmw.strategies._economic_schedule import (
    Sizes,
    boundary_plan,
    economic_moves,
    measure,
    sizes_of,
)
from ctxmw.strategies._economic_schedule import step as _step
from ctxmw.strategies._economics import DEFAULT_TTL, Economics, economics
from ctxmw.strategies._epochs import apply_plan
from ctxmw.strategies._notice import Reason
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
    "measure",
    "shorten_tools_economic",
]

NAME = "shorten_tools_economic"


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
        tuple(s.economic_whole_tools),
    )

    def make_step(table: SizeTable) -> Callable[[FoldState, int], FoldState]:
        sizes = sizes_of(table, messages, index)
        return lambda state, point: _step(state, point, sizes, econ, s, cold)

    table, fold = resume_fold(messages, index, s, key, cold, ctx.memo, f"{NAME}:fold", make_step)
    if not fold.moves:
        return messages
    plan = boundary_plan(len(index.calls), fold.boundary, fold.previous, fold.moves, s)
    out = apply_plan(
        messages,
        index,
        plan,
        ctx,
        NAME,
        lines=s.economic_compacted_result_chars,
        handles=s.readback,
        whole=s.economic_whole_tools,
        reason=_reason(sizes_of(table, messages, index), index, fold.boundary, econ, s),
    )
    ctx.stats[NAME].update(
        rule=econ.rule,
        moves=fold.moves,
        cold=len(messages) in cold,
        full_tool_calls=s.economic_full_tool_calls,
    )
    return out


def _reason(sizes: Sizes, index: ToolIndex, boundary: int, econ: Economics, s: Settings) -> Reason:
    """Why the boundary stands where it is: the window, when everything would not have fit at
    the call point it moved at, else cost (decided by the boundary alone: a stable notice)."""
    point = index.calls[boundary - 1].result_index + 1 if boundary else 0
    return "window" if sizes.prompt(point, 0, s) > econ.limit else "cost"


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
