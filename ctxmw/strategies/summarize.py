"""``summarize``: a model summarises the older history, checked for every durable item.

Same trigger and the same stepped range as ``compact`` (see ``_fold``). Two ways to ask
(``summary_mode``):

* ``aligned`` (default): the summary request is the agent's own prompt, as it would be sent now
  without the new fold, plus one trailing instruction (:data:`ALIGNED_PROMPT`): the same model
  (``ctx.model``), and, inside a ``Session``, the same tools and connection arguments. Its bytes up
  to the fold repeat the agent's previous call, so the provider reads almost all of it from its
  prompt cache. The answer is a structured summary (intent, decisions, files, open items,
  identifiers verbatim), *anchored*: a later fold asks for the new summary on top of the earlier
  one, which the prompt already holds, and the earlier summary's content is carried forward.
* ``cheap``: a separate short prompt (:data:`SUMMARY_PROMPT` and the folded text) to
  ``summary_model``, without the agent's tools.

Either way the call goes through ``ctx.completion`` (a Session passes its own completion
function, connection arguments and telemetry: the ledger marks the call ``"kind": "summary"``;
default ``litellm.acompletion``). The survival check runs on the answer; if an item is missing,
or the call fails, the strategy falls back to ``compact``'s model-free summary (truncation that
keeps the durable lines) and logs why.

A summary is frozen until the next fold: summaries are cached in-process (a module-level LRU of
:data:`CACHE_SIZE` entries) keyed by a digest of the folded messages, the mode, the model, the
durable patterns and :data:`PROMPT_VERSION`. Both outcomes are cached, so within one step every
call sends the same bytes and the model is asked once; the next step folds a new range and asks
again. Two concurrent calls for the same range may both ask the model; the first answer cached
wins. The session's memo remembers the fold last sent, which anchors the next one.
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
from ctxmw.strategies._summary_prompts import ALIGNED_MARK, ALIGNED_PROMPT, EARLIER, SUMMARY_PROMPT
from ctxmw.types import Message, Messages, StrategyContext

__all__ = [
    "ALIGNED_MARK",
    "ALIGNED_PROMPT",
    "CACHE_SIZE",
    "PROMPT_VERSION",
    "SUMMARY_PROMPT",
    "Summarize",
    "clear_cache",
    "summarize",
]

PROMPT_VERSION = "2"
CACHE_SIZE = 256

_cache: OrderedDict[str, str | None] = OrderedDict()


def clear_cache() -> None:
    """Forget every cached summary (for tests, or after changing the summary prompt)."""
    _cache.clear()


class Summarize:
    """Summarise older history with a model; survival-checked, cached, stepped.

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
                _freeze(ctx, None)
                return refuse("summarize", lost, messages, ctx)
        stats.update(folded=fold.size, source=source, cached=cached)
        _freeze(ctx, (fold, text, digest(messages[fold.start : fold.end])))
        return splice(messages, fold, text)

    async def _summary(
        self, messages: Messages, fold: Fold, ctx: StrategyContext
    ) -> tuple[str | None, bool]:
        """The checked model summary (None: fall back) and whether it came from the cache."""
        s = ctx.settings
        folded = fold.folded(messages)
        model = _model(ctx)
        key = digest(folded, s.summary_mode, model, PROMPT_VERSION, *s.resolved_durable_patterns)
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
        request = summary_request(messages, fold, ctx)
        model = _model(ctx)
        extra: dict[str, Any] = {} if ctx.settings.summary_mode == "aligned" else {"tools": None}
        try:
            response = await _completion(ctx)(model=model, messages=request, **extra)
            text = response_text(response)
        except Exception as exc:  # any provider failure: fall back, never break the call
            ctx.logger.warning(  # the error's text may quote the prompt: its type only
                "ctxmw: summarize fell back to truncation: the summary call to %r failed (%s).",
                model,
                _failure(exc),
            )
            return None
        lost = survival_loss(messages, fold, text, ctx.settings)
        if lost:
            ctx.logger.warning(  # the items are message content: counted, never logged
                "ctxmw: summarize fell back to truncation: the summary by %r dropped %d durable "
                "item(s).",
                model,
                len(lost),
            )
            return None
        return text


def summary_request(messages: Messages, fold: Fold, ctx: StrategyContext) -> Messages:
    """The messages of the summary request for ``fold`` (see the module docstring)."""
    items = _bullets(folded_items(messages, fold, ctx.settings.resolved_durable_patterns))
    if ctx.settings.summary_mode == "cheap":
        return [
            {"role": "system", "content": SUMMARY_PROMPT.format(items=items)},
            {"role": "user", "content": transcript_text(fold.folded(messages))},
        ]
    earlier = _frozen(ctx, messages, fold)
    prompt = splice(messages, earlier[0], earlier[1]) if earlier else list(messages)
    kept = len(messages) - fold.end
    text = ALIGNED_PROMPT.format(kept=kept, earlier=EARLIER if earlier else "", items=items)
    instruction: Message = {"role": "user", "content": text}
    return [*prompt, instruction]


def _model(ctx: StrategyContext) -> str:
    if ctx.settings.summary_mode == "aligned" and ctx.model:
        return ctx.model
    return ctx.settings.summary_model


def _freeze(ctx: StrategyContext, sent: tuple[Fold, str, str] | None) -> None:
    """Remember the fold this call sends (None: it sent none), to anchor the next one."""
    if ctx.memo is not None:
        ctx.memo["summarize"] = sent


def _frozen(ctx: StrategyContext, messages: Messages, fold: Fold) -> tuple[Fold, str] | None:
    """The fold the previous call sent, if it is still the start of this one."""
    entry = ctx.memo.get("summarize") if ctx.memo is not None else None
    if entry is None:
        return None
    earlier, text, key = entry
    if earlier.start != fold.start or earlier.end > fold.end:
        return None
    return (earlier, text) if digest(messages[earlier.start : earlier.end]) == key else None


def _completion(ctx: StrategyContext) -> Callable[..., Awaitable[Any]]:
    return ctx.completion if ctx.completion is not None else default_completion()


def _failure(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}, HTTP {status}" if isinstance(status, int) else type(exc).__name__


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
