"""``shorten_tools_epoch``: tiered compaction on fixed epochs, so the prompt prefix stays put."""

from __future__ import annotations

from ctxmw.messages.pairs import index_tools
from ctxmw.settings import Settings
from ctxmw.strategies._epochs import EpochPlan, apply_plan
from ctxmw.strategies._registry import register_strategy
from ctxmw.types import Messages, StrategyContext

__all__ = ["fixed_epoch_plan", "shorten_tools_epoch"]


@register_strategy("shorten_tools_epoch")
def shorten_tools_epoch(messages: Messages, ctx: StrategyContext) -> Messages:
    """Compact and drop old tool calls in fixed epochs; the prefix only moves at epoch ends."""
    index = index_tools(messages, ctx.memo, "shorten_tools_epoch")
    plan = fixed_epoch_plan(len(index.calls), ctx.settings)
    if plan is None:
        return messages
    return apply_plan(messages, index, plan, ctx, "shorten_tools_epoch")


def fixed_epoch_plan(n: int, settings: Settings) -> EpochPlan | None:
    """The epoch plan for ``n`` completed calls, or None when nothing is to be shortened."""
    threshold = settings.epoch_tool_call_threshold
    full = settings.epoch_full_tool_calls
    compacted = settings.epoch_compacted_tool_calls
    size = settings.epoch_size
    if n <= threshold or (full == 0 and compacted == 0) or size <= 0:
        return None
    epoch = (n - threshold - 1) // size
    pinned = threshold + epoch * size
    keep_full = (n - pinned) + full
    return EpochPlan(epoch, pinned, size, keep_full, keep_full + compacted)
