"""Replay recorded transcripts call by call through strategy lists, without calling any model.

A call point is the transcript just before each assistant message: what the agent sent to get
that message. At every call point each strategy list is applied to the transcript so far (a fresh
:class:`~ctxmw.types.StrategyContext`, no save_file), exactly as the wrapper would, and the prompt
is measured. A transcript's call points are replayed in order with one memo, as one session's
calls are, so each point costs the strategies what is new since the previous one. Measured:
tokens sent, the common prefix with the previous call's prompt, what each caching model reads
from and writes to the cache, and the cost at one model's prices (see
:mod:`ctxmw.replay.caching` for the caching models and where prices come from). ``none`` is
always replayed: it is the baseline of every ratio.

Beside cost, what the model loses (:mod:`ctxmw.replay.loss`): at every call point, the
references of the recorded next assistant message (its distinctive strings that first appeared
in a tool result) and how many the prompt still shows, only points to with an offload handle,
or no longer has. :func:`prompts` yields the very prompts measured, one per call point.

Token counts are litellm's (the model's tokenizer) unless another counter is passed; each distinct
message is counted once for the whole replay, whatever strategy list produced it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ctxmw.context.tokens import input_window
from ctxmw.errors import UsageError
from ctxmw.messages.canonical import canonical_bytes
from ctxmw.messages.pairs import unique_call_ids
from ctxmw.replay.caching import (
    CACHING_MODELS,
    MARKING_MODEL,
    Prices,
    auto_split,
    body_tokens,
    breakpoint_minimum,
    breakpoints_split,
    end_breakpoint_split,
    model_prices,
)
from ctxmw.replay.figures import CallFigures, ReplayResult, Retention, StrategyFigures, retention
from ctxmw.replay.load import load_transcript, synthetic_name
from ctxmw.replay.loss import CallLoss, Lost, ReferenceIndex, distinctive
from ctxmw.replay.optimal import Optimum, optimal_schedule
from ctxmw.replay.prompts import (
    DEFAULT_MODEL,
    call_points,
    prompts,
    resolve_list,
    session_prompts,
)
from ctxmw.replay.synthetic import synthetic_transcript
from ctxmw.settings import Settings, resolve_settings
from ctxmw.strategies._chain import NamedStrategy, apply_strategies
from ctxmw.strategies.cache_breakpoints import cache_breakpoints
from ctxmw.telemetry.counters import LiteLLMCounter, TokenCounter
from ctxmw.telemetry.prefix import PrefixTracker
from ctxmw.telemetry.rules import uses_breakpoints
from ctxmw.types import Message, Messages

__all__ = [
    "CACHING_MODELS",
    "DEFAULT_MODEL",
    "DEFAULT_STRATEGY_LISTS",
    "CallFigures",
    "CallLoss",
    "Lost",
    "Optimum",
    "Prices",
    "ReplayResult",
    "Retention",
    "StrategyFigures",
    "call_points",
    "distinctive",
    "load_transcript",
    "prompts",
    "replay",
    "synthetic_name",
    "synthetic_transcript",
]

logger = logging.getLogger("ctxmw")

DEFAULT_STRATEGY_LISTS = (
    "none",
    "shorten_tools_economic",
    "shorten_tools",
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment",
    "clear_tool_results",
)
BASELINE = "none"
_MARK: list[NamedStrategy] = [("cache_breakpoints", cache_breakpoints)]


async def replay(
    transcripts: Mapping[str, Sequence[Message]] | Sequence[Sequence[Message]],
    strategy_lists: Iterable[str | Sequence[str]] = DEFAULT_STRATEGY_LISTS,
    *,
    model: str = DEFAULT_MODEL,
    window: int | None = None,
    counter: TokenCounter | None = None,
    settings: Settings | Mapping[str, Any] | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    optimal: bool = True,
    progress: Callable[[str], None] | None = None,
) -> ReplayResult:
    """Replay ``transcripts`` through each strategy list and measure every call point.

    Args:
        transcripts: message lists, or a mapping of names (paths) to message lists.
        strategy_lists: each a comma-separated string (``"shorten_tools_epoch,cache_breakpoints"``)
            or a list of names; ``"none"`` (the baseline) is added when missing; ``"default"``
            is the default strategy list (``shorten_tools_economic,inbox,cache_breakpoints``).
        model: the litellm model whose prices (and tokenizer) are used for all caching models.
        window: the context window for ``over_window_calls``; default: the model's input window.
        counter: counts tokens; default litellm's ``token_counter`` (``ApproxCounter`` is fast).
        settings: strategy settings (a ``Settings`` or overrides); default: the environment.
        tools: the tool definitions the agent sent with every call (they lead every prompt).
        optimal: also compute the cheapest boundary schedule of each transcript
            (:mod:`ctxmw.replay.optimal`); ``cost_ratio_to_optimal`` is None without it.
        progress: called with one line after each transcript of each strategy list and each
            optimum (``ctxmw replay`` prints them on stderr); default: silent.

    Raises:
        UsageError: an unknown strategy, an unpriced model, or no call point at all.
    """
    named = _named(transcripts)
    calls = sum(len(call_points(messages)) for messages in named.values())
    if calls == 0:
        raise UsageError(
            "The transcripts hold no call point (no assistant message); nothing to replay."
        )
    resolved = resolve_settings(settings)
    lists = _with_baseline([_spec_name(spec) for spec in strategy_lists])
    chains = {name: resolve_list(name, resolved) for name in lists}
    prices = model_prices(model)
    shared = _SharedCounts(counter if counter is not None else LiteLLMCounter())
    run = _Run(model, window or input_window(model), prices, shared, resolved, tools)
    run.references = [ReferenceIndex(messages) for messages in named.values()]
    run.progress = _Progress(progress, len(lists) * len(named) + (len(named) if optimal else 0))
    figures = {name: await run.strategy_list(name, chains[name], named) for name in lists}
    optima = [run.optimum(path, messages) for path, messages in named.items()] if optimal else []
    return ReplayResult(list(named), calls, run.window, prices, figures, BASELINE, optima)


@dataclasses.dataclass(slots=True)
class _Run:
    model: str
    window: int
    prices: Prices
    counter: TokenCounter
    settings: Settings
    tools: Sequence[Mapping[str, Any]] | None = None
    references: list[ReferenceIndex] = dataclasses.field(default_factory=list)
    progress: _Progress | None = None

    async def strategy_list(
        self, name: str, chain: list[NamedStrategy], transcripts: Mapping[str, Messages]
    ) -> StrategyFigures:
        calls: list[CallFigures] = []
        kept: list[Retention] = []
        for t, (path, messages) in enumerate(transcripts.items()):
            kept.append(await self._transcript(t, messages, chain, calls))
            if self.progress is not None:
                self.progress.step(f"{name}: {path} ({len(call_points(messages))} calls)")
        return StrategyFigures(name, calls, sum(kept, Retention()), self.window, kept)

    def optimum(self, path: str, messages: Messages) -> Optimum:
        """The cheapest boundary schedule of one transcript (see :mod:`ctxmw.replay.optimal`)."""
        progress = self.progress
        rendered = None if progress is None else progress.part(f"optimum: {path}", "rendered")
        best = optimal_schedule(
            messages,
            call_points(messages),
            model=self.model,
            prices=self.prices,
            counter=self.counter,
            settings=self.settings,
            window=self.window,
            minimum=breakpoint_minimum(self.model),
            tools=self.tools,
            progress=rendered,
        )
        if self.progress is not None:
            self.progress.step(f"optimum: {len(call_points(messages))} calls")
        return best

    async def _transcript(
        self, t: int, messages: Messages, chain: list[NamedStrategy], out: list[CallFigures]
    ) -> Retention:
        plain, marked = PrefixTracker(self.counter), PrefixTracker(self.counter)
        marker = self.model if uses_breakpoints(self.model) else MARKING_MODEL
        minimum = breakpoint_minimum(self.model)
        previous = 0
        last: tuple[Messages, Messages, dict[str, dict[str, Any]]] | None = None
        references = self.references[t]
        async for point, prompt, ctx in session_prompts(messages, chain, self.settings, self.model):
            # The same stats (the epoch) with a Claude model name, so cache_breakpoints marks.
            with_marks = await apply_strategies(
                prompt, _MARK, dataclasses.replace(ctx, model=marker)
            )
            r = plain.observe(self.model, prompt, self.tools)
            m = marked.observe(self.model, with_marks, self.tools)
            body = body_tokens(r)
            splits = {
                "auto": auto_split(r),
                "breakpoints": breakpoints_split(m, with_marks, minimum),
                "end_breakpoint": end_breakpoint_split(r, body, minimum),
            }
            cost = {key: self.prices.cost(r.prompt_tokens, split) for key, split in splits.items()}
            loss = references.measure(point, prompt)
            shape = (r.prompt_tokens, r.prefix_tokens, previous, r.broke)
            out.append(CallFigures(t, point, *shape, splits, cost, loss))
            previous = body
            last = (messages[:point], prompt, ctx.stats)
        return retention(*last) if last is not None else Retention()


@dataclasses.dataclass(slots=True)
class _Progress:
    """Counts finished steps and reports each as ``[k/n] what`` (nothing without a callback)."""

    report: Callable[[str], None] | None
    total: int
    done: int = 0

    def step(self, what: str) -> None:
        self.done += 1
        if self.report is not None:
            self.report(f"[{self.done}/{self.total}] {what}")

    def part(self, what: str, unit: str) -> Callable[[int, int], None] | None:
        """A callback ``(done, of)`` for a long step: an indented line at every tenth of it."""
        report = self.report
        if report is None:
            return None
        tenths = [0]

        def advanced(done: int, of: int) -> None:
            tenth = 10 * done // max(of, 1)
            if tenth > tenths[0]:
                tenths[0] = tenth
                report(f"  {what}: {done}/{of} {unit}")

        return advanced


class _SharedCounts:
    """One count per distinct message for the whole replay, whatever tracker asks."""

    def __init__(self, counter: TokenCounter) -> None:
        self._counter = counter
        self._tokens: dict[bytes, int] = {}

    def message_tokens(self, model: str, message: Mapping[str, Any]) -> int:
        key = canonical_bytes(message)
        tokens = self._tokens.get(key)
        if tokens is None:
            tokens = self._tokens[key] = self._counter.message_tokens(model, message)
        return tokens

    def tools_tokens(self, model: str, tools: Sequence[Mapping[str, Any]], has_system: bool) -> int:
        return self._counter.tools_tokens(model, tools, has_system)

    def overhead_tokens(self, model: str) -> int:
        return self._counter.overhead_tokens(model)


def _named(
    transcripts: Mapping[str, Sequence[Message]] | Sequence[Sequence[Message]],
) -> dict[str, Messages]:
    if isinstance(transcripts, Mapping):
        items = [(str(name), messages) for name, messages in transcripts.items()]
    else:
        items = [(f"transcript {i}", messages) for i, messages in enumerate(transcripts, start=1)]
    return {name: _unique_ids(name, messages) for name, messages in items}


def _unique_ids(name: str, messages: Sequence[Message]) -> Messages:
    """Ids reused across turns, renamed: retention pairs results with what the prompt shows."""
    out, renamed = unique_call_ids(messages)
    if renamed:
        logger.warning(
            "replay: %r reuses tool_call ids across turns; %d call(s) and their results were "
            "renamed (id~2, id~3, ...) so that each result is counted once.",
            name,
            renamed,
        )
    return out


def _spec_name(spec: str | Sequence[str]) -> str:
    if isinstance(spec, str):
        return spec.strip() or BASELINE
    return ",".join(spec) or BASELINE


def _with_baseline(names: list[str]) -> list[str]:
    unique = list(dict.fromkeys(names))
    return unique if BASELINE in unique else [BASELINE, *unique]
