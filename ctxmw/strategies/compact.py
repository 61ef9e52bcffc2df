"""``compact``: fold the expendable middle of a long history, keeping every durable line.

Once the prompt uses ``compact_trigger`` of the input window, the messages between the head
(system messages and the task) and the newest ``compact_keep_recent`` turns are folded into one
labelled summary message that lists the folded tool calls and keeps every durable line verbatim
(``durable_patterns``: DECISION/OPEN/ERROR lines, order ids, amounts, tracking numbers by
default). Then every durable item is checked to appear literally in the prompt; if one would be
lost, the strategy refuses (``compact_on_loss``: raise or send the unfolded prompt). No model is
called. The folded range advances in steps of ``summary_step`` messages, so the prompt prefix is
byte-stable between steps.
"""

from __future__ import annotations

from ctxmw.context.tokens import TokenCounter
from ctxmw.history import kept_while_unchanged
from ctxmw.settings import Settings
from ctxmw.strategies._fold import (
    Fold,
    due_fold,
    measure,
    mechanical_summary,
    refuse,
    splice,
    survival_loss,
)
from ctxmw.strategies._registry import register_strategy
from ctxmw.types import Messages, StrategyContext

__all__ = ["Compact", "compact"]


class Compact:
    """Fold old history into one summary that keeps every durable line verbatim (no model call).

    Args:
        counter: a :class:`~ctxmw.context.tokens.TokenCounter`; default litellm's for the call's
            model. Inside a session each distinct message is counted once.
    """

    def __init__(self, *, counter: TokenCounter | None = None) -> None:
        self.counter = counter

    def __call__(self, messages: Messages, ctx: StrategyContext) -> Messages:
        """Return ``messages`` with the expendable middle folded, or unchanged below the trigger."""
        fold = due_fold(messages, ctx, self.counter, "compact")
        if fold is None:
            return messages
        stats = ctx.stats["compact"]
        patterns = ctx.settings.resolved_durable_patterns
        text, lost = kept_while_unchanged(
            messages,
            fold.end,
            (fold, patterns),
            ctx.memo,
            "compact:summary",
            lambda: _summary(messages, fold, ctx.settings),
        )
        if lost:
            stats["lost"] = len(lost)
            return refuse("compact", lost, messages, ctx)
        out = splice(messages, fold, text)
        after = measure(out, ctx, self.counter, slot="fold:prompt:compact")
        stats.update(folded=fold.size, utilisation_after=round(after.utilisation, 4))
        return out


def _summary(messages: Messages, fold: Fold, settings: Settings) -> tuple[str, list[str]]:
    """The mechanical summary of ``fold`` and the durable items it would lose."""
    text = mechanical_summary(messages, fold, settings.resolved_durable_patterns)
    return text, survival_loss(messages, fold, text, settings)


compact = register_strategy("compact")(Compact())
"""The registered instance: ``prompt_strategies="compact"``."""
