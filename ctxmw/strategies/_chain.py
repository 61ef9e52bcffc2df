"""The strategy chain: resolve ``prompt_strategies`` and apply it left to right."""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxmw.errors import Aborted, StrategyError, UnknownStrategyError, UsageError
from ctxmw.history import History, as_dicts, history_of
from ctxmw.messages._memo import session_memo
from ctxmw.settings import DEFAULT_STRATEGIES, Settings, resolve_settings
from ctxmw.strategies._registry import get_strategy
from ctxmw.types import Messages, Strategy, StrategyContext, StrategySpec

__all__ = ["ARGUMENT", "apply_strategies", "prepare_prompt", "reads_back", "resolve_strategies"]

NamedStrategy = tuple[str, Strategy]

ARGUMENT = "the prompt_strategies argument"
"""Where a strategy list given to a function came from, as an unknown name's error says it."""
_VARIABLE = "CTXMW_PROMPT_STRATEGIES"

_HANDLE_MAKERS = ("shorten_tools_economic",)
"""The strategies whose compacted results name a read-back handle when ``readback`` is on."""


def reads_back(chain: Sequence[str], settings: Settings) -> bool:
    """Whether a chain's prompts can name read-back handles, so every call of the conversation
    declares ``ctxmw_expand`` (:data:`~ctxmw.context.readback.READBACK_TOOL`) and ctxmw answers
    it: ``offload`` is in the chain, or a strategy that makes handles with ``readback`` on."""
    if "offload" in chain:
        return True
    return settings.readback and any(name in chain for name in _HANDLE_MAKERS)


async def prepare_prompt(
    messages: Sequence[dict[str, Any]],
    prompt_strategies: StrategySpec = None,
    *,
    save_file: str | os.PathLike[str] | None = None,
    settings: Settings | Mapping[str, Any] | None = None,
    model: str | None = None,
) -> Messages:
    """Return the prompt the model would see: ``messages`` after the strategies.

    The input list and its dicts are never mutated; unchanged messages are passed on as the
    same objects.

    Args:
        messages: the full-fidelity transcript (OpenAI-format dicts; litellm ``Message``
            objects are read as the dicts they dump to).
        prompt_strategies: ``None`` (the ``CTXMW_PROMPT_STRATEGIES`` setting, else
            ``shorten_tools_economic,inbox,cache_breakpoints``), ``"a,b"``, a callable, a list
            mixing names and callables, or ``"none"``.
        save_file: the conversation's transcript path; strategies such as ``inbox`` use it.
        settings: a ``Settings`` or a mapping of overrides; unset keys come from the environment.
        model: the litellm model name, passed to strategies.

    Raises:
        UnknownStrategyError: a name is not registered.
        StrategyError: a strategy raised (the original is chained); when it raised one of
            ctxmw's own errors, the error is also an instance of that class.
        Aborted: the inbox held an ``abort`` file.
    """
    resolved = resolve_settings(settings)
    ctx = StrategyContext(
        settings=resolved,
        save_file=Path(save_file) if save_file is not None else None,
        model=model,
    )
    return await apply_strategies(messages, resolve_strategies(prompt_strategies, resolved), ctx)


def resolve_strategies(
    spec: StrategySpec, settings: Settings, source: str = ARGUMENT
) -> list[NamedStrategy]:
    """Turn any accepted form of ``prompt_strategies`` into named callables, in order.

    Args:
        spec: the strategy list; ``None`` takes the ``prompt_strategies`` setting, else the
            default list.
        settings: the call's settings.
        source: where ``spec`` came from, for the error an unknown name raises.

    Raises:
        UnknownStrategyError: a name is not registered; the message names ``source`` (or the
            setting or variable ``None`` read), the close name and every valid one.
    """
    if spec is None:
        spec, source = settings.prompt_strategies, _setting_source(settings)
        if spec is None:
            spec = list(DEFAULT_STRATEGIES)
    items: Sequence[str | Strategy]
    if isinstance(spec, str):
        items = [part.strip() for part in spec.split(",")]
    elif callable(spec):
        items = [spec]
    elif isinstance(spec, Sequence):
        items = spec
    else:
        raise UsageError(
            f"prompt_strategies={spec!r} is not a strategy spec; pass None, 'a,b', a callable, "
            "or a list of names and callables."
        )
    try:
        return [named for item in items if (named := _resolve_item(item)) is not None]
    except UnknownStrategyError as exc:
        raise exc.named_from(source) from None


def _setting_source(settings: Settings) -> str:
    """The variable when the setting's value is the variable's, else the setting."""
    variable = os.environ.get(_VARIABLE, "").strip()
    if variable and variable == (settings.prompt_strategies or "").strip():
        return f"the {_VARIABLE} variable"
    return "the prompt_strategies setting"


def _resolve_item(item: str | Strategy) -> NamedStrategy | None:
    if isinstance(item, str):
        name = item.strip()
        if name in ("", "none"):
            return None
        return name, get_strategy(name)
    if callable(item):
        return _callable_name(item), item
    raise UsageError(
        f"prompt_strategies item {item!r} is neither a strategy name nor a callable "
        "(messages, ctx) -> list."
    )


async def apply_strategies(
    messages: Sequence[dict[str, Any]],
    strategies: Sequence[NamedStrategy],
    ctx: StrategyContext,
    *,
    trace: list[tuple[str, Messages]] | None = None,
) -> Messages:
    """Feed ``messages`` through each strategy in turn and return the last output.

    Args:
        messages: the full-fidelity transcript.
        strategies: named strategies, applied left to right.
        ctx: the call's context, shared by every strategy.
        trace: when given, ``(name, output)`` is appended after each strategy (the telemetry's
            bust attribution reads it).
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise UsageError(
            "messages must be a list of OpenAI-format message dicts, "
            f"got {type(messages).__name__}."
        )
    # What strategies derive from the transcript is cached in the session's memo (this call's
    # own without a session), never for the process: it goes when the conversation does.
    names = tuple(name for name, _ in strategies)
    if ctx.chain != names:
        # A shallow copy: stats, memo and the inbox listing stay the caller's own objects.
        ctx = dataclasses.replace(ctx, chain=names)
    with session_memo(ctx.memo):
        if ctx.memo is None:
            # A new list (a strategy that appends to its input cannot touch the caller's), dicts.
            return await _run_all(as_dicts(messages), strategies, ctx, trace)
        history = history_of(ctx.memo, names)
        current = history.update(messages)
        with history.publish(current):
            return await _run_all(current, strategies, ctx, trace, history)


async def _run_all(
    current: Messages,
    strategies: Sequence[NamedStrategy],
    ctx: StrategyContext,
    trace: list[tuple[str, Messages]] | None,
    history: History | None = None,
) -> Messages:
    for name, strategy in strategies:
        if history is not None and (current is not history.source or not _built_in(strategy)):
            # The History describes the chain's input only, and a strategy of the caller's may
            # change its input list before a helper reads it.
            history.source = None
        current = await _run_one(name, strategy, current, ctx)
        if trace is not None:
            trace.append((name, current))
    return current


def _built_in(strategy: Strategy) -> bool:
    return str(getattr(strategy, "__module__", "")).startswith("ctxmw.strategies.")


async def _run_one(
    name: str, strategy: Strategy, messages: Messages, ctx: StrategyContext
) -> Messages:
    try:
        result = strategy(messages, ctx)
        if inspect.isawaitable(result):
            result = await result
    except Aborted:
        raise
    except Exception as exc:
        raise StrategyError.wrap(name, exc) from exc
    if not isinstance(result, list):
        problem = TypeError(f"returned {type(result).__name__}, expected a list of messages")
        raise StrategyError(name, problem)
    return result


def _callable_name(strategy: Strategy) -> str:
    return str(getattr(strategy, "__qualname__", None) or type(strategy).__name__)
