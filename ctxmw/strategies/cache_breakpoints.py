"""``cache_breakpoints``: place Anthropic / Bedrock Claude cache marks where they pay.

Providers that cache only at explicit breakpoints read a cached prefix only up to a block marked
``cache_control``, four marks at most per request, and look for an earlier cache entry at most
20 blocks before each mark. The plan (:func:`ctxmw.telemetry.marks.plan_marks`), newest first,
within the four, counting the marks already there (the caller's own, and those litellm adds
from ``cache_control_injection_points``: the call's own, which a session hands the strategies
in ``ctx``, and those the strategy is built with). It runs last in the default chain, so a
Claude session caches without a strategy list of its own:

1. the last message, with the default 5-minute TTL: the next call extends this prompt;
2. the end of the stable prefix (the last message before the current epoch's new calls), with
   a 1-hour TTL: that prefix stays byte-stable for the whole epoch, so it still pays when the
   tail moves or the agent pauses longer than 5 minutes;
3. the end of the head (the last message before the first tool group and the compaction
   notice: the system prompt, the task), 1 hour, when it is at least the cache minimum (four
   characters a token) and ends before the stable prefix: an epoch boundary rewrites the
   prompt after the head, and this mark lets that call read the head back instead of writing
   it again;
4. bridges (5 minutes) every 20 blocks back from the tail while the tail is further than that
   from the stable prefix, so the previous call's tail is still found after a long step.

The epoch comes from the epoch strategy's ``ctx.stats`` entry (``keep_full`` minus
``epoch_full_tool_calls`` = the current epoch's calls). Without one (no epoch strategy ran, or
it changed nothing) it is computed from these messages with ``increment_epoch_plan``; below the
epoch threshold there is no stable-prefix mark. A message that already carries a mark is not
marked again. The plan is also put in ``ctx.stats["cache_breakpoints"]["marks"]`` as
``[index, ttl]`` pairs, and the ledger lists every mark the payload carried with its TTL
(``cache_marks``). For implicitly caching providers (OpenAI, DeepSeek, xAI, Gemini) the input
is returned unchanged. The input is never mutated: a marked message is a new dict.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ctxmw.context.tokens import CHARS_PER_TOKEN
from ctxmw.history import keep, resume
from ctxmw.messages.pairs import ToolIndex, index_tools
from ctxmw.strategies._registry import register_strategy
from ctxmw.strategies.shorten_tools_epoch_increment import increment_epoch_plan
from ctxmw.telemetry.marks import (
    MAX_BREAKPOINTS,
    count_marks,
    injected_indices,
    is_marked,
    plan_marks,
)
from ctxmw.telemetry.marks import with_mark as _with_mark
from ctxmw.telemetry.rules import cache_minimum, uses_breakpoints
from ctxmw.types import Messages, StrategyContext

__all__ = ["CacheBreakpoints", "cache_breakpoints"]


class CacheBreakpoints:
    """Mark the stable prefix and the last message for breakpoint-caching providers.

    Args:
        injection_points: the ``cache_control_injection_points`` the call passes to litellm;
            the marks litellm will add count against the limit of four.
    """

    def __init__(self, injection_points: Iterable[Mapping[str, Any]] | None = None) -> None:
        self.injection_points = list(injection_points or ())

    def __call__(self, messages: Messages, ctx: StrategyContext) -> Messages:
        """Return ``messages`` with the planned marks (see the module docstring)."""
        if not messages or not ctx.model or not uses_breakpoints(ctx.model):
            return messages
        injected = injected_indices(messages, self.injection_points) | injected_indices(
            messages, ctx.cache_control_injection_points
        )
        marks, marked = _existing_marks(messages, ctx.memo)
        budget = MAX_BREAKPOINTS - marks - len(injected)
        taken = injected | marked
        stable = _stable_end(messages, ctx)
        # The head's mark comes after the tail's and the stable prefix's, before bridges.
        room = budget >= (2 if stable is None else 3)
        head = _head_end(messages, ctx, stable, taken) if room else None
        plan = plan_marks(messages, head=stable, taken=taken, budget=budget - (head is not None))
        if head is not None:
            plan = sorted([*plan, (head, "1h")])
        ctx.stats["cache_breakpoints"] = {"marks": [[i, ttl] for i, ttl in plan]}
        if not plan:
            return messages
        out = list(messages)
        for i, ttl in plan:
            out[i] = _with_mark(messages[i], ttl if ttl != "5m" else None)
        return out


cache_breakpoints = register_strategy("cache_breakpoints")(CacheBreakpoints())

_SLOT = "cache_breakpoints:marks"


@dataclass(slots=True)
class _Marks:
    """The marks the previous input already carried: per message, and where."""

    counts: array[int]
    marked: list[int]


def _existing_marks(messages: Messages, memo: dict[str, Any] | None) -> tuple[int, set[int]]:
    """How many marks ``messages`` carry, and the indices of the marked ones.

    The memo keeps the previous input's counts: only messages past the first one that changed
    are looked at.
    """
    start, kept = resume(memo, _SLOT, messages)
    if not isinstance(kept, _Marks) or start == 0:
        kept = _Marks(array("q"), [])
    del kept.counts[start:]
    del kept.marked[bisect_left(kept.marked, start) :]
    for i in range(start, len(messages)):
        n = count_marks(messages[i])
        kept.counts.append(n)
        if n or is_marked(messages[i]):
            kept.marked.append(i)
    keep(memo, _SLOT, messages, kept)
    return sum(kept.counts), set(kept.marked)


def _stable_end(messages: Messages, ctx: StrategyContext) -> int | None:
    """Index of the last message before the current epoch's first call, or None."""
    index = index_tools(messages, ctx.memo, "cache_breakpoints")
    new_calls = _epoch_calls(ctx, index)
    if new_calls is None or new_calls <= 0 or new_calls > len(index.calls):
        return None
    # The assistant message that opens the first new call's group ends the stable prefix.
    return index.calls[len(index.calls) - new_calls].call_index - 1


def _head_end(
    messages: Messages, ctx: StrategyContext, stable: int | None, taken: set[int]
) -> int | None:
    """Index of the last message of the head (before the first tool group and the compaction
    notice), worth its own mark: a boundary move rewrites the prompt after it, and this mark
    lets that call read the head from the cache. None where it would not pay: no tool group
    yet, the head already marked or ending at the stable prefix, or under the cache minimum.
    """
    index = index_tools(messages, ctx.memo, "cache_breakpoints")
    if not index.groups:
        return None
    end = next(iter(index.groups)) - 1  # groups are keyed in message order
    if end >= 0 and _has_notice(ctx):
        end -= 1  # the notice sits just before the first surviving group and changes per move
    if end < 0 or (stable is not None and end >= stable) or any(i <= end for i in taken):
        return None
    chars = sum(len(str(m.get("content") or "")) for m in messages[: end + 1])
    return (
        end if chars // CHARS_PER_TOKEN >= cache_minimum("breakpoints", ctx.model or "") else None
    )


def _has_notice(ctx: StrategyContext) -> bool:
    """Whether a strategy of this chain compacted or dropped messages (and put its notice)."""
    return any(
        entry.get("messages_compacted", 0) or entry.get("messages_dropped", 0)
        for entry in ctx.stats.values()
        if "pinned" in entry
    )


def _epoch_calls(ctx: StrategyContext, index: ToolIndex) -> int | None:
    """Completed calls in the current epoch: from the epoch strategy's stats, else computed."""
    for entry in ctx.stats.values():
        if "pinned" in entry and "keep_full" in entry:
            # The economic schedule has its own full tier and names it in its entry.
            full = entry.get("full_tool_calls", ctx.settings.epoch_full_tool_calls)
            return int(entry["keep_full"]) - int(full)
    plan = increment_epoch_plan(len(index.calls), index.repeats(), ctx.settings)
    return None if plan is None else len(index.calls) - plan.pinned
