"""``shorten_tools``: tiered keep/compact/drop recomputed on every call (the seed's baseline).

Its boundaries slide with every new call, so the prompt prefix changes every time: it exists
for compatibility and as the baseline the epoch strategies beat on cache reuse.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from ctxmw.messages.pairs import ToolIndex, index_tools
from ctxmw.settings import Settings
from ctxmw.strategies._regions import Region, render
from ctxmw.strategies._registry import register_strategy
from ctxmw.types import Messages, StrategyContext

__all__ = ["shorten_tools"]

NAME = "shorten_tools"


@register_strategy(NAME)
def shorten_tools(messages: Messages, ctx: StrategyContext) -> Messages:
    """Newest results full within a budget, the rest of the newest 40 compacted, older dropped.

    The newest ``full_tool_outputs`` results are full, and more while the kept characters stay
    under ``max_tool_chars``; the rest of the newest ``max_tool_calls`` calls are compacted; every
    older call is dropped with its result. Recomputed on every call.
    """
    index = index_tools(messages, ctx.memo, NAME)
    if not index.calls:
        return messages
    calls, results = _regions(messages, index, ctx.settings)
    out, counts = render(
        messages, index, calls, results, ctx.settings, notice=False, memo=ctx.memo, owner=NAME
    )
    ctx.stats[NAME] = asdict(counts)
    return out


def _regions(messages: Messages, index: ToolIndex, s: Settings) -> tuple[bytes, bytes]:
    """Regions of each call's arguments and result, walking newest to oldest.

    The walk stops at the first call past every tier count once the budget is spent (and the
    current turn, if protected, is behind): every older call is dropped, whatever its size.
    """
    n = len(index.calls)
    calls = bytearray(n)  # Region.FULL is 0
    results = bytearray(n)
    budget = _Budget(s.max_tool_chars)
    deepest = max(s.full_tool_outputs, s.resolved_max_tool_outputs, s.full_tool_calls)
    deepest = max(deepest, s.max_tool_calls)
    protect = s.shorten_tools_protect_current_turn
    for p, call in enumerate(reversed(index.calls), start=1):
        f0 = n - p
        current = protect and call.result_index > index.last_user_index
        if p > deepest and budget.spent() and not current:
            calls[: f0 + 1] = results[: f0 + 1] = _DROPPED * (f0 + 1)
            break
        output = _size(messages[call.result_index].get("content"))
        if current:
            # Kept full, and like any call kept full it spends the budget: it protects the
            # turn, not older calls.
            budget.spend(output + _size(call.arguments))
            continue
        results[f0] = _tier(p, s.full_tool_outputs, s.resolved_max_tool_outputs, budget, output)
        calls[f0] = _tier(p, s.full_tool_calls, s.max_tool_calls, budget, _size(call.arguments))
        if Region.DROPPED in (results[f0], calls[f0]):
            # A pair is dropped whole: beyond either maximum, both sides go.
            results[f0] = calls[f0] = Region.DROPPED
    return bytes(calls), bytes(results)


_DROPPED = bytes([Region.DROPPED])


class _Budget:
    """Characters of tool traffic kept full, newest first.

    A message is kept while the characters retained before it are below the limit, so the one
    that crosses the limit is kept (the seed's rule); after it, nothing more is.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.retained = 0

    def spend(self, size: int) -> None:
        self.retained += size

    def spent(self) -> bool:
        """True once nothing more can be kept full."""
        return self.retained >= self.limit

    def take(self, size: int) -> bool:
        if self.retained < self.limit:
            self.retained += size
            return True
        return False


def _tier(p: int, full: int, maximum: int, budget: _Budget, size: int) -> Region:
    if p <= full:
        budget.spend(size)
        return Region.FULL
    if budget.take(size):
        return Region.FULL
    return Region.DROPPED if p > maximum else Region.COMPACTED


def _size(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    return 0 if value is None else len(json.dumps(value, default=str))
