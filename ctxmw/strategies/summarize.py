"""``summarize``: a cheap model summarises the older history, checked for every durable item.

Same trigger and the same stepped range as ``compact`` (see ``_fold``), but the folded messages
are summarised by ``summary_model`` through ``ctx.completion`` (default ``litellm.acompletion``),
with a prompt that demands every id, amount and explicit decision be kept and lists the durable
items literally. The survival check runs on the answer; if an item is missing, or the call
fails, the strategy falls back to ``compact``'s model-free summary (truncation that keeps the
durable lines) and logs why.

Summaries are cached in-process (a module-level LRU of :data:`CACHE_SIZE` entries) keyed by a
digest of the folded messages, the summary model, the durable patterns and
:data:`PROMPT_VERSION`. Both outcomes are cached, so within one step every call sends the same
bytes and the model is asked once; the next step folds a new range and asks again. Two
concurrent calls for the same range may both ask the model; the first answer cached wins.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ctxmw._litellm import default_completion
from ctxmw.context.survival import message_text
from ctxmw.context.tokens import TokenCounter
from ctxmw.strategies._fold import (
    Fold,
    digest,
    due_fold,
    folded_items,
    mechanical_summary,
    refuse,
    splice,
    survival_loss,
)
from ctxmw.strategies._registry import register_strategy
from ctxmw.types import Messages, StrategyContext

__all__ = [
    "CACHE_SIZE",
    "PROMPT_VERSION",
    "SUMMARY_PROMPT",
    "Summarize",
    "clear_cache",
    "summarize",
]

PROMPT_VERSION = "1"
CACHE_SIZE = 256

SUMMARY_PROMPT = """\
You compress the earlier part of an agent's conversation so the agent can continue its work.
Write a brief summary of the excerpt: what was asked, what was done, what was found, what is
still open. Keep every identifier (order ids, ticket and tracking numbers, file names), every
amount and every explicit decision, copied character for character. Copy every line that starts
with DECISION, OPEN or ERROR verbatim on its own line. These items must appear verbatim:
{items}
Answer with the summary only."""

_cache: OrderedDict[str, str | None] = OrderedDict()


def clear_cache() -> None:
    """Forget every cached summary (for tests, or after changing the summary prompt)."""
    _cache.clear()


class Summarize:
    """Summarise older history with a cheap model; survival-checked, cached, stepped.

    Args:
        counter: a :class:`~ctxmw.context.tokens.TokenCounter`; default litellm's for the call's
            model.
    """

    def __init__(self, *, counter: TokenCounter | None = None) -> None:
        self.counter = counter

    async def __call__(self, messages: Messages, ctx: StrategyContext) -> Messages:
        """Return ``messages`` with the older part summarised, or unchanged below the trigger."""
        fold = due_fold(messages, ctx, self.counter, "summarize")
        if fold is None:
            return messages
        stats = ctx.stats["summarize"]
        text, cached = await self._summary(messages, fold, ctx)
        source = "model" if text is not None else "fallback"
        if text is None:
            text = mechanical_summary(messages, fold, ctx.settings.resolved_durable_patterns)
            lost = survival_loss(messages, fold, text, ctx.settings)
            if lost:
                return refuse("summarize", lost, messages, ctx)
        stats.update(folded=fold.size, source=source, cached=cached)
        return splice(messages, fold, text)

    async def _summary(
        self, messages: Messages, fold: Fold, ctx: StrategyContext
    ) -> tuple[str | None, bool]:
        """The checked model summary (None: fall back) and whether it came from the cache."""
        s = ctx.settings
        folded = messages[fold.start : fold.end]
        key = digest(folded, s.summary_model, PROMPT_VERSION, *s.resolved_durable_patterns)
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key], True
        text = await self._ask(messages, fold, ctx)
        # setdefault: if a concurrent call cached this range meanwhile, its answer wins, so both
        # calls send the same bytes.
        text = _cache.setdefault(key, text)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
        return text, False

    async def _ask(self, messages: Messages, fold: Fold, ctx: StrategyContext) -> str | None:
        items = folded_items(messages, fold, ctx.settings.resolved_durable_patterns)
        request = [
            {"role": "system", "content": SUMMARY_PROMPT.format(items=_bullets(items))},
            {"role": "user", "content": transcript_text(messages[fold.start : fold.end])},
        ]
        try:
            response = await _completion(ctx)(model=ctx.settings.summary_model, messages=request)
            text = response_text(response)
        except Exception as exc:  # any provider failure: fall back, never break the call
            ctx.logger.warning(
                "ctxmw: summarize fell back to truncation: the summary call to %r failed: %s: %s",
                ctx.settings.summary_model,
                type(exc).__name__,
                exc,
            )
            return None
        lost = survival_loss(messages, fold, text, ctx.settings)
        if lost:
            ctx.logger.warning(  # the items are message content: counted, never logged
                "ctxmw: summarize fell back to truncation: the summary by %r dropped %d durable "
                "item(s).",
                ctx.settings.summary_model,
                len(lost),
            )
            return None
        return text


def _completion(ctx: StrategyContext) -> Callable[..., Awaitable[Any]]:
    return ctx.completion if ctx.completion is not None else default_completion()


def _bullets(items: Sequence[str]) -> str:
    return "\n".join(f"- {item}" for item in items) if items else "- (none)"


def transcript_text(messages: Sequence[Any]) -> str:
    """The folded messages as plain text for the summariser, one block per message."""
    blocks = []
    for msg in messages:
        role = msg.get("role", "?") if isinstance(msg, dict) else "?"
        blocks.append(f"[{role}]\n{message_text(msg)}")
    return "\n\n".join(blocks)


def response_text(response: Any) -> str:
    """The answer text of a litellm-like response (attribute or mapping access).

    Raises:
        ValueError: the response holds no text answer.
    """
    choices = response["choices"] if isinstance(response, dict) else response.choices
    message = choices[0]["message"] if isinstance(choices[0], dict) else choices[0].message
    content = message["content"] if isinstance(message, dict) else message.content
    if not isinstance(content, str) or not content.strip():
        raise ValueError(f"the summary response holds no text (content={content!r})")
    return content.strip()


summarize = register_strategy("summarize")(Summarize())
"""The registered instance: ``prompt_strategies="summarize"``."""
