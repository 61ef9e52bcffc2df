"""Every prompt of a recorded conversation, as one session would have sent it.

A call point is the transcript just before an assistant message (after the first message): what
the agent sent to get that message. :func:`prompts` applies a strategy list at every call point
in order, with one memo for the whole conversation and a fresh
:class:`~ctxmw.types.StrategyContext` per call, as a :class:`~ctxmw.Session` does: strategies
whose schedule depends on earlier calls (the default's boundary, offload's frozen previews,
``summarize``'s anchored folds) see the same history of calls. ``ctxmw replay`` measures these
very prompts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from ctxmw._litellm import CompletionFn
from ctxmw.settings import Settings, resolve_settings
from ctxmw.strategies._chain import NamedStrategy, apply_strategies, resolve_strategies
from ctxmw.types import Message, Messages, StrategyContext, StrategySpec

__all__ = ["DEFAULT_ALIAS", "DEFAULT_MODEL", "call_points", "prompts", "resolve_list"]

DEFAULT_MODEL = "anthropic/claude-sonnet-4-5"
"""Priced by litellm with input, cache-read and cache-write prices."""
DEFAULT_ALIAS = "default"
"""The strategy list name that means the default list (``DEFAULT_STRATEGIES``)."""


def call_points(messages: Sequence[Any]) -> list[int]:
    """Indices of the assistant messages after the first message: ``messages[:i]`` was sent."""
    return [
        i
        for i, msg in enumerate(messages)
        if i > 0 and isinstance(msg, Mapping) and msg.get("role") == "assistant"
    ]


async def prompts(
    messages: Sequence[Message],
    prompt_strategies: StrategySpec = None,
    *,
    model: str = DEFAULT_MODEL,
    settings: Settings | Mapping[str, Any] | None = None,
    completion: CompletionFn | None = None,
) -> AsyncIterator[tuple[int, Messages]]:
    """Yield ``(index, prompt)`` for each call point of ``messages``, in order.

    ``index`` is the recorded assistant message's position: ``prompt`` is what the strategies
    made of ``messages[:index]``. The input is never mutated.

    Args:
        messages: the recorded conversation (OpenAI-format dicts).
        prompt_strategies: as for :func:`ctxmw.prepare_prompt`; ``"default"`` (or None) is the
            default list, ``"none"`` sends the history unchanged.
        model: the litellm model the strategies are told about (prices, window, tokenizer).
        settings: a ``Settings`` or overrides; default: the environment.
        completion: what strategies that call a model themselves (``summarize``) use, with
            ``litellm.acompletion``'s signature; default ``litellm.acompletion``.

    Raises:
        UnknownStrategyError: a name is not registered.
        StrategyError: a strategy raised.
    """
    resolved = resolve_settings(settings)
    chain = resolve_list(prompt_strategies, resolved)
    async for point, prompt, _ in session_prompts(messages, chain, resolved, model, completion):
        yield point, prompt


def resolve_list(spec: StrategySpec, settings: Settings) -> list[NamedStrategy]:
    """A strategy spec as named callables; ``"default"`` means the default list."""
    return resolve_strategies(None if spec == DEFAULT_ALIAS else spec, settings)


async def session_prompts(
    messages: Sequence[Message],
    chain: list[NamedStrategy],
    settings: Settings,
    model: str,
    completion: CompletionFn | None = None,
) -> AsyncIterator[tuple[int, Messages, StrategyContext]]:
    """:func:`prompts` with each call's context (its stats and the conversation's memo)."""
    memo: dict[str, Any] = {}  # one conversation is one session (offload keeps its store here)
    for point in call_points(messages):
        ctx = StrategyContext(settings=settings, model=model, memo=memo, completion=completion)
        yield point, await apply_strategies(messages[:point], chain, ctx), ctx
