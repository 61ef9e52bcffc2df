"""Contracts shared by every layer: message aliases, the strategy shape and its context.

Messages stay litellm's own OpenAI-format dicts. These aliases document intent; they do not
wrap or convert anything, so unknown keys (``cache_control``, ``thinking_blocks``, ...) survive.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from ctxmw.inbox._files import FileEntry
    from ctxmw.settings import Settings

__all__ = ["Message", "Messages", "Strategy", "StrategyContext", "StrategySpec"]

Message: TypeAlias = dict[str, Any]
"""One chat message in the OpenAI wire format that ``litellm.acompletion`` accepts."""

Messages: TypeAlias = list[Message]
"""A transcript or a prompt: a list of messages."""

Strategy: TypeAlias = Callable[[Messages, "StrategyContext"], "Messages | Awaitable[Messages]"]
"""A prompt strategy: ``(messages, ctx) -> list`` or an awaitable of one. Never mutates input."""

StrategySpec: TypeAlias = "str | Strategy | Sequence[str | Strategy] | None"
"""What ``prompt_strategies`` accepts: ``None``, ``"a,b"``, a callable, or a mixed list."""


@dataclass(frozen=True, slots=True)
class StrategyContext:
    """What a strategy knows about the call it is preparing a prompt for.

    Attributes:
        settings: the resolved settings for this call.
        save_file: the conversation's transcript path, if any (locates the inbox).
        model: the litellm model name, if known.
        round: the tool-loop round (0 for the first model call of a turn).
        logger: where strategies log; the ``"ctxmw"`` logger by default.
        stats: per-call facts strategies report (counts, epoch), keyed by strategy name; read by
            the telemetry. Strategies add their own entry; nothing else is shared between calls.
        completion: the completion function strategies use for their own model calls (the
            ``summarize`` strategy); ``litellm.acompletion``'s signature. None: strategies use
            ``litellm.acompletion`` itself.
        memo: a session's scratch space, the same dict on every call of one session (None for
            one-off calls): strategies may keep data derived from their input there, keyed by
            their name, to do per call only the work the new messages need.
        hold_inbox: the caller commits this call's round and then settles the inbox files it
            delivered (a ``Session`` does), so the ``inbox`` strategy only claims them. False:
            they move to the removed folder at once.
        now: the call's wall-clock time in seconds (``time.time()``), None when unknown (replay,
            one-off ``prepare_prompt``); strategies derive the time since the previous call.
        inbox_listing: the inbox folder and its settled entries, listed by the caller in a
            worker-thread trip of its own just before this call (a ``Session`` does), at most one;
            the first ``inbox`` run takes it out of the list, a later one lists again.
        chain: the names of the strategies this call runs, in order (set by the chain runner;
            ``shorten_tools_economic`` reads whether ``cache_breakpoints`` comes after it).
        cache_control_injection_points: the call's own ``cache_control_injection_points``:
            litellm marks those messages after the strategies ran, so ``cache_breakpoints``
            counts them against the provider's limit of four.
    """

    settings: Settings
    save_file: Path | None = None
    model: str | None = None
    round: int = 0
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("ctxmw"))
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    completion: Callable[..., Awaitable[Any]] | None = None
    memo: dict[str, Any] | None = None
    hold_inbox: bool = False
    now: float | None = None
    inbox_listing: list[tuple[Path, list[FileEntry]]] = field(default_factory=list)
    chain: tuple[str, ...] = ()
    cache_control_injection_points: Sequence[Mapping[str, Any]] = ()
