"""The tool loop of a :class:`~ctxmw.runtime.session.Session`: rounds, model calls, side calls.

Every round of a turn: the strategies run on the full-fidelity working transcript (never on the
previous round's prompt) with a fresh :class:`~ctxmw.types.StrategyContext`; their output is
sent; the assistant message (and, when ctxmw ran them, the tool results) is committed. What the
strategies produce is never stored.

ctxmw runs a response's tool calls only when the session has Python tools and none of the calls
names a tool given as a plain dict (a call to an unknown name then gets an error text). Without
Python tools a turn is exactly one round. In every other case the response is returned to the
caller and the assistant message is saved: answer its calls with ``run([...tool results])``.
Read-backs (``ctxmw_expand``) are answered inside the round, before any of this
(:mod:`ctxmw.runtime._readback`): a reply that only reads back costs one more model call.

Every model call, the agent's and a strategy's own (a summary), goes through this module and is
recorded by the session's :class:`~ctxmw.telemetry.recorder.CallRecorder`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxmw._litellm import CompletionFn, default_completion
from ctxmw.context.offload import ResultStore
from ctxmw.context.readback import answer
from ctxmw.errors import MaxRoundsExceeded, SaveFileWriteError
from ctxmw.history import history_of
from ctxmw.messages.form import call_name, response_message, tool_calls_of
from ctxmw.runtime._notes import HeldNotes
from ctxmw.runtime._readback import read_back, refusal, tools_to_send
from ctxmw.runtime._readback_stream import ReadbackStream
from ctxmw.runtime._splices import Key, Splice, splice_in
from ctxmw.runtime.tool_runner import run_tool_calls
from ctxmw.runtime.tool_schema import ToolSet
from ctxmw.runtime.turn import Turn, delivered_notes
from ctxmw.settings import Settings
from ctxmw.strategies._chain import NamedStrategy, apply_strategies, reads_back
from ctxmw.telemetry.recorder import CallRecorder
from ctxmw.telemetry.response import provider_of
from ctxmw.types import Message, Messages, StrategyContext

logger = logging.getLogger("ctxmw")

__all__ = ["ToolLoop"]

_NOT_FOR_SIDE_CALLS = ("stream", "stream_options")
_ENDPOINT_KEYS = ("api_base", "base_url", "api_key", "client")


class ToolLoop:
    """The rounds of a turn and the model calls they make (a base of ``Session``)."""

    model: str
    settings: Settings
    tools: ToolSet
    strategies: list[NamedStrategy]
    max_rounds: int
    recorder: CallRecorder
    offload_store: ResultStore | None
    _completion: CompletionFn | None
    _kwargs: dict[str, Any]
    _notes: HeldNotes
    _pending: Sequence[Message]
    _chain: tuple[str, ...]
    _clock: Callable[[], float]

    @property
    def save_file(self) -> Path | None:
        raise NotImplementedError

    @property
    def _memo(self) -> dict[str, Any]:
        raise NotImplementedError

    async def _commit(self, turn: Turn, *, last: bool = False) -> None:
        raise NotImplementedError

    async def _loop(self, turn: Turn) -> Any:
        for round_ in range(self.max_rounds):
            response, _ = await self._send(turn, round_)
            message = response_message(response)
            turn.add_round([message])
            calls = tool_calls_of(message)
            if not calls or not self._runnable(calls):
                await self._saving(turn, response, last=True)
                return response
            results = await run_tool_calls(calls, self.tools, self.settings.tool_timeout)
            turn.add_round(results)
            turn.mark_ours(message, *results)
            await self._saving(turn, None)
        save_file = str(self.save_file) if self.save_file is not None else None
        raise MaxRoundsExceeded(self.max_rounds, save_file)

    async def _saving(self, turn: Turn, response: Any, *, last: bool = False) -> None:
        """Commit a round; a stateless caller's failed write says what is kept (``response``:
        the answer it paid for, when this is the turn's last round)."""
        try:
            await self._commit(turn, last=last)
        except SaveFileWriteError as exc:
            if not turn.stateless or exc.what != "save_file":
                raise
            raise exc.for_caller(response) from exc.__cause__

    async def _send(self, turn: Turn, round_: int, **extra: Any) -> tuple[Any, Messages]:
        """Strategies on the working transcript, then one model call; tracks inbox notes."""
        turn.add_notes(self._take_pending())
        # The strategies' input, for the side calls and the telemetry record: an inbox note
        # they deliver is their output, so a stateless caller's next call, which never carries
        # it, is a bust of the inbox, not of the transcript. Read-backs kept beside the
        # caller's calls go back where they belong (a new list, when there are any).
        source = splice_in(turn.working, self._record_splices)
        snapshot = list(source)
        ctx = StrategyContext(
            self.settings,
            save_file=self.save_file,
            model=self.model,
            round=round_,
            completion=_SideCall(self, snapshot, round_),
            memo=self._memo,
            hold_inbox=True,
            now=self._clock(),
            inbox_listing=[turn.listing] if turn.listing else [],
            chain=self._chain,  # as the chain runner would set it
            cache_control_injection_points=self._kwargs.get("cache_control_injection_points") or (),
        )
        turn.listing = None
        history_of(self._memo, self._chain).grows(turn.working)  # its kept head holds
        trace: list[tuple[str, Messages]] = []
        try:
            try:
                prompt = await apply_strategies(source, self.strategies, ctx, trace=trace)
            finally:
                self._notes.add(ctx)
            turn.add_notes(delivered_notes(ctx))
            call = _Call(snapshot, ctx, trace, round_)
            response = await self._call_model(prompt, call, turn, **extra)
        except BaseException:
            self._pending = [*turn.unconfirmed, *turn.unseen(delivered_notes(ctx))]
            raise
        turn.carried()
        return response, prompt

    async def _call_model(self, prompt: Messages, call: _Call, turn: Turn, **extra: Any) -> Any:
        """Send one prompt and answer the reply's read-backs (:mod:`ctxmw.runtime._readback`):
        the single place every agent model call goes through, and is recorded.

        A stream is returned as a :class:`~ctxmw.runtime._readback_stream.ReadbackStream`,
        which records each provider stream when it ends.
        """
        response = await self._model_call(prompt, call, **extra)
        backing = _Backing(self, call, extra)
        if call.kwargs.get("stream"):
            return ReadbackStream(response, prompt, turn, backing, intercept=self._reads_back)
        if not self._reads_back:
            return response
        return await read_back(response, prompt, turn, backing)

    async def _model_call(self, prompt: Messages, call: _Call, **extra: Any) -> Any:
        """One call of the completion function; recorded unless streamed."""
        kwargs = dict(self.recorder.prepare_kwargs({**self.wire_kwargs(prompt), **extra}))
        completion = self._completion or default_completion()
        started = time.perf_counter()
        response = await completion(**kwargs)
        call.kwargs, call.started = kwargs, started
        if self.settings.telemetry and not kwargs.get("stream"):
            await self._record_call(call, response, time.perf_counter() - started)
        return response

    async def _side_call(self, transcript: Messages, round_: int, **kwargs: Any) -> Any:
        """A strategy's own model call (a summary): this session's completion function, its
        connection arguments and tools, and its telemetry (recorded as ``kind="summary"``).

        ``kwargs`` override the session's; a value of None removes a key (``tools=None``).
        Summaries are never streamed. The call goes to this session's deployment: a model on
        another provider (``summary_model``) is used only when the session names no endpoint
        or key of its own (see :func:`_side_model`).
        """
        wire = {**self.wire_kwargs(list(kwargs.pop("messages", []))), **kwargs}
        wire["model"] = _side_model(str(wire.get("model") or self.model), self.model, self._kwargs)
        wire = {k: v for k, v in wire.items() if v is not None and k not in _NOT_FOR_SIDE_CALLS}
        completion = self._completion or default_completion()
        started = time.perf_counter()
        response = await completion(**wire)
        if self.settings.telemetry:
            call = _Call(transcript, StrategyContext(self.settings), [], round_, "summary")
            call.kwargs = wire
            await self._record_call(call, response, time.perf_counter() - started)
        return response

    async def _record_call(
        self, call: _Call, response: Any, latency: float, stream: Any = None
    ) -> None:
        """Telemetry for one finished call; it never breaks the call it describes."""
        try:
            await self.recorder.record(
                model=str(call.kwargs.get("model", self.model)),
                wire_kwargs=call.kwargs,
                transcript=call.transcript,
                trace=call.trace,
                stats=call.ctx.stats,
                response=response,
                latency_s=latency,
                round=call.round,
                stream=stream,
                kind=call.kind,
                readback=call.readback,
                hold_ledger=True,  # written by the commit's trip (or flush_ledger)
            )
        except Exception:
            logger.warning(
                "ctxmw telemetry failed for one call; the call itself went on.", exc_info=True
            )

    def wire_kwargs(self, prompt: Messages) -> dict[str, Any]:
        """The keyword arguments one model call sends for ``prompt``."""
        kwargs: dict[str, Any] = {**self._kwargs, "model": self.model, "messages": prompt}
        tools = tools_to_send(self.tools.schemas, prompt, self._reads_back)
        if tools:
            kwargs["tools"] = tools
        return kwargs

    @property
    def _reads_back(self) -> bool:
        """Whether the strategies can show read-back handles (ctxmw then answers them)."""
        return reads_back(self._chain, self.settings)

    @property
    def _record_splices(self) -> Mapping[Key, Splice]:
        raise NotImplementedError

    def _runnable(self, calls: list[dict[str, Any]]) -> bool:
        # Without Python tools there is no loop: one call, its response returned (the promise).
        if not self.tools.executable:
            return False
        names = {call_name(c) for c in calls}
        return not names & self.tools.declared

    def _take_pending(self) -> Sequence[Message]:
        out, self._pending = self._pending, ()
        return out


def _side_model(asked: str, own: str, kwargs: Mapping[str, Any]) -> str:
    """The model of a side call: ``asked``, unless it is on another provider than ``own`` while
    the session carries its own endpoint or key, which must never go to another provider."""
    if asked == own or not any(kwargs.get(k) for k in _ENDPOINT_KEYS):
        return asked
    theirs, ours = provider_of(asked, {}), provider_of(own, kwargs)
    if not theirs or not ours or theirs == ours:
        return asked
    logger.warning(
        "ctxmw: a summary asked for %r (provider %r), but this session's endpoint and key are "
        "for %r: the summary uses %r instead. Set summary_model to a model of the same "
        "deployment, or pass no api_base/api_key so each model uses its own.",
        asked,
        theirs,
        ours,
        own,
    )
    return own


@dataclass(slots=True)
class _SideCall:
    """``StrategyContext.completion`` for one round: the loop's side call on its transcript."""

    loop: ToolLoop
    transcript: Messages
    round: int

    def __call__(self, **kwargs: Any) -> Awaitable[Any]:
        return self.loop._side_call(self.transcript, self.round, **kwargs)


@dataclass(slots=True)
class _Call:
    """What one model call's telemetry record is built from."""

    transcript: Messages
    ctx: StrategyContext
    trace: list[tuple[str, Messages]]
    round: int
    kind: str = "agent"
    kwargs: dict[str, Any] = field(default_factory=dict)
    started: float = 0.0
    readback: bool = False

    def again(self) -> _Call:
        """The call made after this one to go on past read-backs (its own record)."""
        return _Call(self.transcript, self.ctx, self.trace, self.round, self.kind, readback=True)


@dataclass(slots=True)
class _Backing:
    """What the read-back round of one call asks of the loop (see
    :class:`~ctxmw.runtime._readback_stream.StreamRounds`)."""

    loop: ToolLoop
    call: _Call
    extra: dict[str, Any]

    async def again(self, sent: Messages) -> Any:
        self.call = self.call.again()
        return await self.loop._model_call(sent, self.call, **self.extra)

    async def answer(self, calls: Sequence[Mapping[str, Any]], *, refuse: bool) -> Messages:
        if refuse:
            return [refusal(c) for c in calls]
        limit, store = self.loop.settings.readback_max_chars, self.loop.offload_store
        transcript = self.call.transcript
        return [await answer(c, transcript, max_chars=limit, store=store) for c in calls]

    async def recorded(self, chunks: list[Any], stream: Any) -> None:
        if self.loop.settings.telemetry:
            latency = time.perf_counter() - self.call.started
            await self.loop._record_call(self.call, chunks, latency, stream)
