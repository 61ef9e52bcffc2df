"""What ``compact`` and ``summarize`` share: when to fold, which range, and the survival check.

The transcript is read as a *head* (leading system messages and the first user message: the
task), then *turns*: a turn is one message, or one assistant message with its tool results (the
``tool`` messages, or the next user message's ``tool_result`` blocks for Anthropic-native
``tool_use`` blocks), so a fold boundary never splits a tool group. The folded range starts
after the head and ends at a turn boundary that advances in steps of ``summary_step``
messages, keeping at least ``compact_keep_recent`` turns unfolded: between steps, the prompt is
head + the same summary + the growing tail, so its prefix is byte-identical from call to call.
The current instruction (the last user message after the head) is never folded: when the range
passes it, it is sent verbatim right after the summary.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections import Counter as Tally
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from ctxmw.context.budget import Budget, budget, budget_from_counts
from ctxmw.context.survival import durable_items, durable_lines, message_text, missing_items
from ctxmw.context.tokens import TokenCounter, as_counter, count_messages, input_window
from ctxmw.errors import CompactionLossError
from ctxmw.history import kept_indices, kept_per_message
from ctxmw.messages.blocks import tool_result_ids
from ctxmw.messages.canonical import canonical_json
from ctxmw.messages.form import call_names, role_of
from ctxmw.settings import Settings
from ctxmw.types import Message, Messages, StrategyContext

__all__ = [
    "Fold",
    "digest",
    "due_fold",
    "folded_items",
    "measure",
    "mechanical_summary",
    "plan_fold",
    "refuse",
    "splice",
    "survival_loss",
]

SUMMARY_LABEL = "[Summary of {n} earlier messages, written by ctxmw to fit the context window]"


@dataclass(frozen=True, slots=True)
class Fold:
    """The range ``[start, end)`` of messages to fold into one summary.

    ``kept``: the index of the current instruction when it lies in the range: it is not folded
    but sent after the summary.
    """

    start: int
    end: int
    kept: int | None = None

    @property
    def size(self) -> int:
        """How many messages are folded."""
        return self.end - self.start - (self.kept is not None)

    def folded(self, messages: Sequence[Any]) -> list[Any]:
        """The messages this fold summarises, in order (the kept instruction left out)."""
        if self.kept is None:
            return list(messages[self.start : self.end])
        return [*messages[self.start : self.kept], *messages[self.kept + 1 : self.end]]


def measure(
    messages: Sequence[Any],
    ctx: StrategyContext,
    counter: TokenCounter | None,
    *,
    slot: str = "fold:input",
) -> Budget:
    """The budget of ``messages`` for this call's model and settings.

    In a session (``ctx.memo``), each message object is counted once: its count is kept beside
    it, so a growing transcript only counts its new messages however long it gets (a cache keyed
    by content and bounded by bytes would, past its bound, miss on every message of every call).
    The counts by position are kept under ``slot``: the strategy's input's (the default, which
    also lets go of the messages no longer sent), or its prompt's.
    """
    s = ctx.settings
    if ctx.memo is None:
        return budget(
            messages,
            ctx.model,
            output_reservation=s.output_reservation,
            context_window=s.context_window,
            counter=counter,
        )
    count = as_counter(counter)
    name = ctx.model or ""
    return budget_from_counts(
        messages,
        kept_per_message(
            messages,
            ctx.memo,
            slot,
            (count, name),
            lambda new: count_messages(count, name, new),
            by_object=_counted(ctx.memo, (count, name)),
            prune=slot == "fold:input",
        ),
        0,
        window=s.context_window if s.context_window is not None else input_window(ctx.model),
        output_reservation=s.output_reservation,
        overhead=count.overhead_tokens(name),
    )


def _counted(memo: dict[str, Any], key: Hashable) -> dict[int, tuple[Any, int]]:
    """Token counts by message object, shared by the input's and the prompt's counts (the
    prompt's tail after the summary is the input's own messages), under one counter and model."""
    seen = memo.get("fold:counts")
    if seen is None or seen[0] != key:
        seen = memo["fold:counts"] = (key, {})
    return seen[1]


def due_fold(
    messages: Sequence[Any], ctx: StrategyContext, counter: TokenCounter | None, name: str
) -> Fold | None:
    """The fold ``name`` should make now, or None: below the trigger, or nothing to fold.

    Records the prompt's utilisation and band in ``ctx.stats[name]`` either way.
    """
    before = measure(messages, ctx, counter)
    stats = ctx.stats.setdefault(name, {})
    stats.update(utilisation=round(before.utilisation, 4), band=before.band, folded=0)
    if before.utilisation < ctx.settings.compact_trigger:
        return None
    return plan_fold(
        messages,
        ctx.settings,
        kept_indices(messages, ctx.memo, f"fold:starts:{name}", _starts_turn),
    )


def plan_fold(
    messages: Sequence[Any], settings: Settings, turns: Sequence[int] | None = None
) -> Fold | None:
    """The stepped range to fold, or None when there is nothing to fold.

    ``turns``: the index of every message that starts a turn, when known (the kept ones).
    """
    head = _head_end(messages)
    if turns is None:
        turns = [i for i in range(len(messages)) if _starts_turn(messages[i])]
    starts = turns[bisect_left(turns, head) :]
    keep = settings.compact_keep_recent
    if len(starts) <= keep:
        return None
    limit = starts[len(starts) - keep]
    step = settings.summary_step
    stepped = head + ((limit - head) // step) * step
    end = max((i for i in starts if i <= stepped), default=head)
    if end <= head:
        return None
    instruction = _last_instruction(messages)
    return Fold(head, end, instruction if head <= instruction < end else None)


def _starts_turn(msg: Any) -> bool:
    # A turn starts at any message but a tool result: an OpenAI ``tool`` message, or a user
    # message answering Anthropic-native tool_use blocks (it must stay with its tool_use).
    return role_of(msg) != "tool" and not tool_result_ids(msg)


def _last_instruction(messages: Sequence[Any]) -> int:
    """The index of the last user message that is not a tool result (-1 if there is none)."""
    for i in range(len(messages) - 1, -1, -1):
        if role_of(messages[i]) == "user" and not tool_result_ids(messages[i]):
            return i
    return -1


def _head_end(messages: Sequence[Any]) -> int:
    i = 0
    while i < len(messages) and role_of(messages[i]) in ("system", "developer"):
        i += 1
    return i + 1 if i < len(messages) and role_of(messages[i]) == "user" else i


def folded_items(messages: Sequence[Any], fold: Fold, patterns: tuple[str, ...]) -> list[str]:
    """Every durable item of the folded messages, without repeats."""
    found: dict[str, None] = {}
    for msg in fold.folded(messages):
        found.update(dict.fromkeys(durable_items(message_text(msg), patterns)))
    return list(found)


def mechanical_summary(messages: Sequence[Any], fold: Fold, patterns: tuple[str, ...]) -> str:
    """A summary without a model: what was folded, and every durable line verbatim."""
    lines: dict[str, None] = {}
    tools: Tally[str] = Tally()
    for msg in fold.folded(messages):
        lines.update(dict.fromkeys(durable_lines(message_text(msg), patterns)))
        tools.update(name or "?" for name in call_names(msg))
    calls = ", ".join(f"{name} x{n}" for name, n in sorted(tools.items())) or "none"
    kept = "\n".join(lines) if lines else "(none)"
    return (
        f"Tool calls folded: {calls}.\n"
        "Durable lines (decisions, open items, errors, identifiers), kept verbatim:\n"
        f"{kept}"
    )


def splice(messages: Sequence[Any], fold: Fold, text: str) -> Messages:
    """The prompt: the head, one labelled summary message, the current instruction if the
    fold passed it, then the unfolded tail.

    The summary is a ``user`` message: every provider accepts one at this position, whereas a
    mid-conversation ``system`` message is rejected by some chat templates and would give text
    derived from tool output the authority of the system prompt.
    """
    label = SUMMARY_LABEL.format(n=fold.size)
    summary: Message = {"role": "user", "content": f"{label}\n{text}"}
    kept = [messages[fold.kept]] if fold.kept is not None else []
    return [*messages[: fold.start], summary, *kept, *messages[fold.end :]]


def survival_loss(messages: Sequence[Any], fold: Fold, text: str, settings: Settings) -> list[str]:
    """Durable items of the folded range that do not appear literally in ``text``.

    Unfolded messages are passed on as the same objects, so their items survive by identity;
    only the folded range needs checking.
    """
    items = folded_items(messages, fold, settings.resolved_durable_patterns)
    return missing_items(items, text)


def digest(messages: Sequence[Any], *extra: str) -> str:
    """A stable digest of ``messages`` (canonical JSON) and ``extra`` strings."""
    h = hashlib.sha256()
    for msg in messages:
        h.update(canonical_json(msg).encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    for part in extra:
        h.update(part.encode("utf-8", "surrogatepass") + b"\1")
    return h.hexdigest()


def refuse(strategy: str, lost: list[str], messages: Messages, ctx: StrategyContext) -> Messages:
    """Never send a lossy prompt: raise, or (``compact_on_loss='fallback'``) send it unfolded."""
    if ctx.settings.compact_on_loss == "raise":
        raise CompactionLossError(strategy, lost)
    ctx.logger.warning(  # the items are message content: counted, never logged
        "ctxmw: %s did not fold the history: %d durable item(s) would have been lost; "
        "sending the unfolded prompt instead.",
        strategy,
        len(lost),
    )
    return messages
