"""``shorten_tools_epoch_increment``: epochs that grow with the session (the old default).

Longer sessions get longer epochs (fewer prefix breaks) and a wider compacted window; an epoch
in which a call repeats grows too, since repeats suggest the model lost something it needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ctxmw.messages.pairs import index_tools
from ctxmw.settings import Settings
from ctxmw.strategies._epochs import EpochPlan, apply_plan
from ctxmw.strategies._registry import register_strategy
from ctxmw.types import Messages, StrategyContext

__all__ = ["increment_epoch_plan", "shorten_tools_epoch_increment"]


@register_strategy("shorten_tools_epoch_increment")
def shorten_tools_epoch_increment(messages: Messages, ctx: StrategyContext) -> Messages:
    """Compact and drop old tool calls in growing epochs; cache-friendly and bounded."""
    index = index_tools(messages, ctx.memo, "shorten_tools_epoch_increment")
    plan = increment_epoch_plan(len(index.calls), index.repeats(), ctx.settings)
    if plan is None:
        return messages
    return apply_plan(messages, index, plan, ctx, "shorten_tools_epoch_increment")


def increment_epoch_plan(n: int, repeats: Sequence[int], settings: Settings) -> EpochPlan | None:
    """The plan for ``n`` completed calls given the forward positions of repeats (ascending).

    Returns None when nothing is to be shortened.
    """
    s = settings
    threshold, full = s.epoch_tool_call_threshold, s.epoch_full_tool_calls
    base_compacted, base_size = s.epoch_compacted_tool_calls, s.epoch_size
    if n <= threshold or (full == 0 and base_compacted == 0) or base_size <= 0:
        return None
    epoch, pinned, size = _current_epoch(n, repeats, s)
    growth = max(size - base_size, 0)
    max_compacted = max(s.epoch_increment_max_compacted_tool_calls, base_compacted)
    extra = math.floor(growth * s.epoch_increment_compacted_growth_ratio + 0.5)
    compacted = min(base_compacted + extra, max_compacted)
    keep_full = (n - pinned) + full
    return EpochPlan(epoch, pinned, size, keep_full, keep_full + compacted)


def _current_epoch(n: int, repeats: Sequence[int], s: Settings) -> tuple[int, int, int]:
    """Walk the schedule from the threshold to the epoch holding call ``n``."""
    base, per = s.epoch_size, s.epoch_increment_epochs_per_increase
    step, repeat_step = s.epoch_increment_size_increase, s.epoch_increment_repeat_increase
    max_size = max(s.epoch_increment_max_size, base)
    pinned, epoch, repeat_epochs, cursor = s.epoch_tool_call_threshold, 0, 0, 0
    while True:
        periodic = epoch // per if per > 0 else 0
        nominal = min(base + periodic * step + repeat_epochs * repeat_step, max_size)
        while cursor < len(repeats) and repeats[cursor] <= pinned:
            cursor += 1
        # Only the nominal part can grow an epoch: a repeat past it belongs to the next epoch,
        # so an already-observed boundary never moves back.
        grown = cursor < len(repeats) and repeats[cursor] <= min(pinned + nominal, n)
        size = min(nominal + repeat_step, max_size) if grown else nominal
        if n <= pinned + size:
            return epoch, pinned, size
        pinned += size
        epoch += 1
        repeat_epochs += grown
