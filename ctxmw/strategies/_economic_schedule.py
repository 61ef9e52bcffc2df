"""The economic schedule's pure decision (see :mod:`~ctxmw.strategies.shorten_tools_economic`).

Estimated sizes of a transcript (:class:`Sizes`: any call point's prompt under any boundary in
O(1)), the ski-rental step at one call point (:func:`step`, pure: the fold's state after it),
the moves a whole transcript gets (:func:`economic_moves`) and the epoch plan of a boundary
(:func:`boundary_plan`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctxmw.messages.pairs import ToolIndex
from ctxmw.settings import Settings
from ctxmw.strategies._economic_memo import FoldState, SizeTable
from ctxmw.strategies._economics import Economics
from ctxmw.strategies._epochs import EpochPlan

__all__ = [
    "Sizes",
    "boundary_plan",
    "economic_moves",
    "measure",
    "prompt_cost",
    "sizes_of",
    "step",
]


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
    return sizes_of(table, messages, index)


def sizes_of(table: SizeTable, messages: Sequence[Any], index: ToolIndex) -> Sizes:
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
        after = step(state, point, sizes, econ, settings, cold)
        if after.moves > state.moves:
            moves.append((point, after.boundary))
        state = after
    return moves


def step(
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
    baseline = state.baseline + prompt_cost(econ, plain, 0.0 if is_cold else state.plain)
    kept = prompt_cost(econ, stay, 0.0 if is_cold else state.sent)
    if moved >= stay:
        return replace(state, spent=state.spent + kept, baseline=baseline, sent=stay, plain=plain)
    # Carrying the reclaimable tokens costs a cache read each (a full read if uncached).
    rent = state.rent + (stay - moved) * (econ.read if econ.caches(stay) else econ.input)
    # A move rewrites the prompt after the head. Automatic caches read the head back; a
    # breakpoint move is priced as rewriting it too (a client may mark only the end), unless
    # the client marks the head (economic_head_mark).
    head = sizes.head if econ.head_read and econ.caches(sizes.head) else 0.0
    purchase = max(moved - head, 0.0) * (econ.write - econ.read)
    spent = state.spent + prompt_cost(econ, moved, 0.0 if is_cold else min(head, state.sent))
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


def prompt_cost(econ: Economics, prompt: float, cached: float) -> float:
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
