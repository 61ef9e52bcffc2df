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
in a tool result) and how many the prompt still shows, only points to with a read-back handle,
or no longer has. A point whose next action needs what only a handle points to pays one more
call, the read-back (:mod:`ctxmw.replay.readbacks`), in its cost. A list that can show handles
declares ``ctxmw_expand`` on every call, as ctxmw does. :func:`prompts` yields the very prompts
measured, one per call point.

Token counts are litellm's (the model's tokenizer) unless another counter is passed; each distinct
message is counted once for the whole replay, whatever strategy list produced it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ctxmw.context.readback import READBACK_TOOL, handles_in
from ctxmw.context.survival import message_text
from ctxmw.context.tokens import input_window
from ctxmw.errors import UsageError
from ctxmw.messages.canonical import canonical_bytes
from ctxmw.messages.form import role_of
from ctxmw.messages.pairs import unique_call_ids
from ctxmw.replay.caching import (
    CACHING_MODELS,
    MARKING_MODEL,
    Prices,
    Split,
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
from ctxmw.replay.readbacks import Readback, head_message, readback_rounds
from ctxmw.replay.synthetic import synthetic_transcript
from ctxmw.settings import Settings, resolve_settings
from ctxmw.strategies._chain import NamedStrategy, apply_strategies, reads_back
from ctxmw.strategies.cache_breakpoints import cache_breakpoints
from ctxmw.telemetry.counters import LiteLLMCounter, TokenCounter
from ctxmw.telemetry.prefix import PrefixResult, PrefixTracker
from ctxmw.telemetry.rules import uses_breakpoints
from ctxmw.types import Message, Messages, StrategyContext

__all__ = [
    "CACHING_MODELS",
    "DEFAULT_MODEL",
    "DEFAULT_STRATEGY_LISTS",
    "CallFigures",
    "CallLoss",
    "Lost",
    "Optimum",
    "Prices",
    "Readback",
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
    head_tokens: int = 0,
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
        head_tokens: a system message of about this many tokens before every transcript: the
            system prompt and tool definitions a real agent sends on every call (0: none).

    Raises:
        UsageError: an unknown strategy, an unpriced model, or no call point at all.
    """
    named = _named(transcripts)
    shared = _SharedCounts(counter if counter is not None else LiteLLMCounter())
    if head_tokens > 0:
        head = head_message(head_tokens, shared, model)
        named = {name: [head, *messages] for name, messages in named.items()}
    calls = sum(len(call_points(messages)) for messages in named.values())
    if calls == 0:
        raise UsageError(
            "The transcripts hold no call point (no assistant message); nothing to replay."
        )
    resolved = resolve_settings(settings)
    lists = _with_baseline([_spec_name(spec) for spec in strategy_lists])
    chains = {name: resolve_list(name, resolved) for name in lists}
    prices = model_prices(model)
    run = _Run(model, window or input_window(model), prices, shared, resolved, tools)
    run.references = [ReferenceIndex(messages) for messages in named.values()]
    run.progress = _Progress(progress, len(lists) * len(named) + (len(named) if optimal else 0))
    figures = {name: await run.strategy_list(name, chains[name], named) for name in lists}
    items = enumerate(named.items())
    optima = [run.optimum(t, path, m) for t, (path, m) in items] if optimal else []
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
        tools = self._tools_of([name for name, _ in chain])
        for t, (path, messages) in enumerate(transcripts.items()):
            kept.append(await self._transcript(t, messages, chain, calls, tools))
            if self.progress is not None:
                self.progress.step(f"{name}: {path} ({len(call_points(messages))} calls)")
        return StrategyFigures(name, calls, sum(kept, Retention()), self.window, kept)

    def optimum(self, t: int, path: str, messages: Messages) -> Optimum:
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
            tools=self._tools_of(["shorten_tools_economic"]),
            references=self.references[t],
            progress=rendered,
        )
        if self.progress is not None:
            self.progress.step(f"optimum: {len(call_points(messages))} calls")
        return best

    def _tools_of(self, chain: Sequence[str]) -> list[Mapping[str, Any]] | None:
        """The tools every call of the chain (its strategies' names) declares: the agent's,
        and ``ctxmw_expand`` when its prompts can show read-back handles."""
        if not reads_back(chain, self.settings):
            return list(self.tools) if self.tools is not None else None
        return [*(self.tools or ()), READBACK_TOOL]

    async def _transcript(
        self,
        t: int,
        messages: Messages,
        chain: list[NamedStrategy],
        out: list[CallFigures],
        tools: Sequence[Mapping[str, Any]] | None,
    ) -> Retention:
        pricing = _Pricing(self, PrefixTracker(self.counter), PrefixTracker(self.counter), tools)
        previous, since = 0, 0
        last: tuple[Messages, Messages, dict[str, dict[str, Any]]] | None = None
        references = self.references[t]
        async for point, prompt, ctx in session_prompts(messages, chain, self.settings, self.model):
            r, splits, cost = await pricing.call(prompt, ctx)
            loss = references.measure(point, prompt)
            pointed = [item.pointed for item in loss.lost if item.recoverable]
            new = [i for i in range(since, point) if role_of(messages[i]) == "tool"]
            shown = _shown(messages, prompt, [*pointed, *new])
            fresh = [i for i in new if i in shown and handles_in(message_text(shown[i]))]
            chars = self.settings.readback_max_chars
            rounds = readback_rounds(messages, point, loss.lost, shown, chars, fresh)
            readback = await pricing.readback(prompt, rounds, ctx) if rounds else None
            shape = (r.prompt_tokens, r.prefix_tokens, previous, r.broke)
            out.append(CallFigures(t, point, *shape, splits, cost, loss, readback))
            previous, since = body_tokens(r), point
            last = (messages[:point], prompt, ctx.stats)
        return retention(*last) if last is not None else Retention()


@dataclasses.dataclass(slots=True)
class _Pricing:
    """Prices one transcript's calls under every caching model, in order."""

    run: _Run
    plain: PrefixTracker
    marked: PrefixTracker
    tools: Sequence[Mapping[str, Any]] | None

    async def call(
        self, prompt: Messages, ctx: StrategyContext, *, remember: bool = True
    ) -> tuple[PrefixResult, dict[str, Split], dict[str, float]]:
        """Measure one call's prompt against the previous call's and price it."""
        run = self.run
        marker = run.model if uses_breakpoints(run.model) else MARKING_MODEL
        minimum = breakpoint_minimum(run.model)
        # The same stats (the epoch) with a Claude model name, so cache_breakpoints marks.
        with_marks = await apply_strategies(prompt, _MARK, dataclasses.replace(ctx, model=marker))
        r = self.plain.observe(run.model, prompt, self.tools, remember=remember)
        m = self.marked.observe(run.model, with_marks, self.tools, remember=remember)
        splits = {
            "auto": auto_split(r),
            "breakpoints": breakpoints_split(m, with_marks, minimum),
            "end_breakpoint": end_breakpoint_split(r, body_tokens(r), minimum),
        }
        cost = {key: run.prices.cost(r.prompt_tokens, split) for key, split in splits.items()}
        return r, splits, cost

    async def readback(
        self, prompt: Messages, rounds: Sequence[Messages], ctx: StrategyContext
    ) -> Readback:
        """The read-back calls after ``prompt``'s, each priced against the one before it (which
        it extends); the next call point is measured against ``prompt``, whose call cached it."""
        run = self.run
        fork = _Pricing(run, PrefixTracker(run.counter), PrefixTracker(run.counter), self.tools)
        await fork.call(prompt, ctx)  # what the provider holds after the point's own call
        sent = list(prompt)
        cost = dict.fromkeys(CACHING_MODELS, 0.0)
        reads = dict.fromkeys(CACHING_MODELS, 0)
        writes = dict.fromkeys(CACHING_MODELS, 0)
        output = 0
        for extra in rounds:
            sent += extra
            r, splits, priced = await fork.call(sent, ctx)
            out = run.counter.message_tokens(run.model, extra[0])
            output += out
            for key in CACHING_MODELS:
                cost[key] += priced[key] + out * run.prices.output
                reads[key] += splits[key].reads
                writes[key] += splits[key].writes
        summed = {key: Split(reads[key], writes[key]) for key in CACHING_MODELS}
        return Readback(len(rounds), r.prompt_tokens, output, summed, cost)


def _shown(messages: Messages, prompt: Messages, originals: Sequence[int]) -> dict[int, Any]:
    """What ``prompt`` shows of each of the ``originals`` (tool results) it changed, by index."""
    wanted = {str(messages[i].get("tool_call_id")): i for i in originals}
    return {
        wanted[str(m.get("tool_call_id"))]: m
        for m in prompt
        if m.get("role") == "tool"
        and str(m.get("tool_call_id")) in wanted
        and m is not messages[wanted[str(m.get("tool_call_id"))]]
    }


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
