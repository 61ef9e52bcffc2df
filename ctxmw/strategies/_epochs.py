"""What the two epoch strategies share: the plan of one epoch, protected repeats, rendering."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ctxmw.messages.pairs import Call, ToolIndex, call_key
from ctxmw.strategies._regions import Region, render
from ctxmw.types import Messages, StrategyContext

__all__ = ["EpochPlan", "apply_plan", "protected_calls", "repeat_positions"]


@dataclass(frozen=True, slots=True)
class EpochPlan:
    """Where the current epoch stands and what it keeps.

    Attributes:
        epoch: index of the current epoch (0 = the first past the threshold).
        pinned: completed calls before the current epoch began.
        size: the current epoch's size.
        keep_full: calls, counted from the newest, kept full.
        truncate_to: calls, counted from the newest, kept at all (full or compacted).
    """

    epoch: int
    pinned: int
    size: int
    keep_full: int
    truncate_to: int


def protected_calls(calls: Sequence[Call], pinned: int) -> set[int]:
    """Forward numbers of the latest instance of every call repeated among calls ``1..pinned``.

    Evaluated only up to the epoch boundary, so the set changes only when an epoch ends.
    """
    latest: dict[str, int] = {}
    seen_twice: set[str] = set()
    for call in calls[:pinned]:
        key = call_key(call)
        if key in latest:
            seen_twice.add(key)
        latest[key] = call.f
    return {latest[key] for key in seen_twice}


def repeat_positions(calls: Sequence[Call]) -> list[int]:
    """Forward numbers of every occurrence after the first of a repeated call, ascending."""
    seen: set[str] = set()
    repeats = []
    for call in calls:
        key = call_key(call)
        if key in seen:
            repeats.append(call.f)
        seen.add(key)
    return repeats


def apply_plan(
    messages: Messages, index: ToolIndex, plan: EpochPlan, ctx: StrategyContext, name: str
) -> Messages:
    """Render ``plan`` (regions by reverse position, repeats protected) and report its stats."""
    n = len(index.calls)
    protected = protected_calls(index.calls, plan.pinned)
    regions = [_region(n - f0, plan, f0 + 1 in protected) for f0 in range(n)]
    out, counts = render(messages, index, regions, regions, ctx.settings, notice=True)
    stats: dict[str, Any] = asdict(plan)
    stats.update(asdict(counts), protected=len(protected))
    ctx.stats[name] = stats
    return out


def _region(p: int, plan: EpochPlan, protected: bool) -> Region:
    if p <= plan.keep_full or protected:
        return Region.FULL
    if p <= plan.truncate_to:
        return Region.COMPACTED
    return Region.DROPPED
