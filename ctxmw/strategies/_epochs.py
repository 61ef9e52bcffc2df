"""What the two epoch strategies share: the plan of one epoch, protected repeats, rendering."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ctxmw.messages.pairs import Call, ToolIndex, call_key
from ctxmw.strategies._notice import Reason, Recovery, notice_fields, offloads_before
from ctxmw.strategies._regions import Region, render
from ctxmw.types import Messages, StrategyContext

__all__ = ["EpochPlan", "apply_plan", "plan_regions", "protected_calls", "repeat_positions"]


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
    messages: Messages,
    index: ToolIndex,
    plan: EpochPlan,
    ctx: StrategyContext,
    name: str,
    *,
    reason: Reason = "cost",
    lines: int = 0,
    handles: bool = False,
    whole: Collection[str] = (),
) -> Messages:
    """Render ``plan`` (regions by reverse position, repeats protected) and report its stats.

    ``reason``: why the notice says this was done (cost or the window); ``lines``: compacted
    results keep this many characters of whole lines (:func:`~ctxmw.messages.outline.outline`;
    0: head and tail); ``handles``: their headers name a read-back handle; ``whole``: tools
    whose results stay full in the compacted tier (they are dropped with it).
    With a session memo, the previous call's output is reused up to the first message whose
    region changed (:func:`~ctxmw.strategies._regions.render`).
    """
    protected = index.protected(plan.pinned)
    kept_whole = _whole(index, plan, whole)
    regions = plan_regions(index, plan, protected | kept_whole if kept_whole else protected)
    out, counts = render(
        messages,
        index,
        regions,
        regions,
        ctx.settings,
        notice=True,
        memo=ctx.memo,
        owner=name,
        paired=True,
        fields=notice_fields(reason, _recovery(ctx.chain, name, bool(lines) and handles)),
        lines=lines,
        handles=handles,
    )
    stats: dict[str, Any] = asdict(plan)
    stats.update(asdict(counts), protected=len(protected))
    ctx.stats[name] = stats
    return out


def _whole(index: ToolIndex, plan: EpochPlan, names: Collection[str]) -> frozenset[int]:
    """Forward numbers of the compacted tier's calls of the ``names`` tools."""
    if not names:
        return frozenset()
    n = len(index.calls)
    tier = index.calls[max(n - plan.truncate_to, 0) : max(n - plan.keep_full, 0)]
    return frozenset(call.f for call in tier if call.name in names)


def _recovery(chain: Sequence[str], name: str, handles: bool) -> Recovery:
    """How the notice says content comes back: by handles, by offload previews, or not."""
    if handles:
        return "readback"
    return "offload" if offloads_before(chain, name) else "none"


def plan_regions(index: ToolIndex, plan: EpochPlan, protected: Collection[int]) -> bytes:
    """The region of every call under ``plan``, pairs and groups kept whole, by forward number.

    Reverse position ``p = n - f0``: full within ``keep_full`` (or protected), compacted within
    ``truncate_to``, else dropped. Built as runs of bytes; only the groups that can hold a
    dropped call beside a kept one (the one at the drop edge, those of protected calls, those
    with an unanswered entry) are looked at.
    """
    n = len(index.calls)
    dropped = min(max(n - plan.truncate_to, 0), n)
    compacted = max(min(max(n - plan.keep_full, 0), n), dropped)
    out = bytearray(
        bytes([Region.DROPPED]) * dropped
        + bytes([Region.COMPACTED]) * (compacted - dropped)
        + bytes([Region.FULL]) * (n - compacted)
    )
    for f in protected:
        out[f - 1] = Region.FULL
    if dropped == 0:
        return bytes(out)
    suspects = {index.calls[f - 1].call_index for f in protected if f <= dropped}
    suspects.update(g for g in index.partial if g in index.groups)
    if dropped < n:
        suspects.add(index.calls[dropped].call_index)
    for g in suspects:
        members = index.groups[g]
        if all(f is not None and out[f - 1] == Region.DROPPED for f in members):
            continue
        # A group survives whole: its would-be-dropped calls are compacted instead.
        for member in members:
            if member is not None and out[member - 1] == Region.DROPPED:
                out[member - 1] = Region.COMPACTED
    return bytes(out)
