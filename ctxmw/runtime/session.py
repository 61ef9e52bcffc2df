"""``Session``: one conversation, its turns, its tool loop and its record.

A session is three parts, each in its own module:

* the turn runner (here): what a turn's input is (``run``, ``complete``, ``stream``), the
  per-session lock, and the save_file's lock around each turn;
* the tool loop (:mod:`ctxmw.runtime._rounds`): each round's strategies, model call and
  telemetry record;
* the record (:mod:`ctxmw.runtime._record`): the committed transcript in memory and on disk.

Decisions the specification leaves open:

* The save_file is locked for one turn, not for the session's life; a session reloads the file
  at the start of a turn if another writer changed it in between.
* A turn's input (the user message) is written together with the first round, so a provider
  error before any round completed leaves no dangling user message. The session keeps that
  input (``pending_input``) and sends it with the next ``run()``: ``run()`` with no messages
  continues with it, a retry with the same input sends it once, new input follows it.
* A stateless caller (:meth:`Session.complete`, what ``acompletion`` calls) owns the
  conversation: its messages are what the strategies see, lined up against the record by
  :func:`~ctxmw.runtime.revisions.plan_history`; an edited history becomes a new revision of the
  same save_file, written with the turn's first round (a failed call records nothing). Only the
  tool rounds this loop ran for such a caller are marked as ctxmw's in the file (a stateful
  session's file stays plain messages).
* Inbox notes: see :mod:`ctxmw.runtime.turn`; a retried ``ask()`` of an interrupted turn:
  :func:`~ctxmw.runtime.turn.retries_interrupted_turn`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

import anyio

from ctxmw._litellm import CompletionFn, stream_chunk_builder
from ctxmw.errors import SaveFileWriteError, UsageError
from ctxmw.messages.form import message_dict, response_message
from ctxmw.runtime._kept import keep, repeated
from ctxmw.runtime._notes import HeldNotes
from ctxmw.runtime._open_round import set_aside_unanswered
from ctxmw.runtime._readback import check_tool_names
from ctxmw.runtime._record import Record, flush_ledger
from ctxmw.runtime._rounds import ToolLoop
from ctxmw.runtime._splices import Key, Splice
from ctxmw.runtime.conversations import Conversation
from ctxmw.runtime.lock import SaveFileLock
from ctxmw.runtime.offload import OffloadOption, unwire_memory_offload, wire_offload
from ctxmw.runtime.options import check_rounds
from ctxmw.runtime.stream import PersistingStream
from ctxmw.runtime.tool_schema import ToolSet
from ctxmw.runtime.turn import Turn, retries_interrupted_turn, run_input
from ctxmw.settings import Settings, resolve_settings
from ctxmw.strategies._chain import resolve_strategies
from ctxmw.strategies.inbox import inbox
from ctxmw.telemetry.recorder import CallRecorder
from ctxmw.types import Message, Messages, StrategySpec

__all__ = ["Session", "ToolSpec"]

ToolSpec = Mapping[str, Any] | Callable[..., Any]
"""An item of ``tools=``: an OpenAI tool dict or a Python callable (sync or async)."""


class Session(ToolLoop):
    """One conversation: model, save_file, strategies, tools, settings, completion function.

    Sessions share nothing: many may run concurrently in one event loop. Calls on one session
    are serialised.

    Args:
        model: the litellm model name (``"openai/gpt-4o-mini"``, ``"anthropic/..."``, ...).
        save_file: the JSONL transcript; loaded on first use (resuming it), appended every round.
        prompt_strategies: see :func:`ctxmw.prepare_prompt`; ``None`` means the settings' list.
        tools: OpenAI tool dicts and/or Python callables; callables run in the loop.
        settings: a ``Settings`` or a mapping; read now, not at call time.
        strategy_options: overrides on top of ``settings``.
        max_rounds: model calls per turn (default: the ``max_rounds`` setting, 25).
        system: a system message written first when the transcript is empty.
        completion: the completion function (default ``litellm.acompletion``).
        on_call: telemetry hooks, called with each call's :class:`~ctxmw.telemetry.CallRecord`
            (sync or async; a failing hook is logged, never raised).
        session: the telemetry session id (default: the save_file path, else a random id).
        offload: True (or a strategy list naming ``offload``): large tool results are sent as
            a preview and a handle, the originals kept beside the save_file (else in memory),
            and ctxmw answers the model's ``ctxmw_expand`` calls itself; or pass your own
            :class:`~ctxmw.context.offload.ResultStore`. See :mod:`ctxmw.strategies.offload`.
        clock: wall-clock seconds, read before every model call (``StrategyContext.now``: the
            strategies see the time since the previous call); default ``time.time``.
        **completion_kwargs: passed to every model call (``temperature``, ``api_base``, ...).

    Raises:
        UsageError: an argument is invalid (bad tools, strategies, settings, max_rounds).
    """

    def __init__(
        self,
        model: str,
        *,
        save_file: str | os.PathLike[str] | None = None,
        prompt_strategies: StrategySpec = None,
        tools: Sequence[ToolSpec] | None = None,
        settings: Settings | Mapping[str, Any] | None = None,
        strategy_options: Mapping[str, Any] | None = None,
        max_rounds: int | None = None,
        system: str | None = None,
        completion: CompletionFn | None = None,
        on_call: Sequence[Callable[..., Any]] = (),
        session: str | None = None,
        offload: OffloadOption = None,
        clock: Callable[[], float] = time.time,
        **completion_kwargs: Any,
    ) -> None:
        self.model = model
        self.settings = resolve_settings(settings, strategy_options)
        self.tools = ToolSet.build(tools)
        chain = resolve_strategies(prompt_strategies, self.settings)
        self.strategies, self.offload_store = wire_offload(
            offload, chain, save_file, lambda: self._memo
        )
        self.max_rounds = check_rounds(max_rounds, self.settings.max_rounds)
        self.on_call = list(on_call)
        self._system = system
        self._completion = completion
        self._kwargs = completion_kwargs
        # What one call leaves for the next; a stateless call works on its registry's instead.
        path = Path(save_file) if save_file is not None else None
        self._conversation = Conversation(record=Record(path))
        self._lists_inbox = save_file is not None and any(fn is inbox for _, fn in self.strategies)
        self._chain = tuple(name for name, _ in self.strategies)  # StrategyContext.chain
        check_tool_names(self.tools.declared | set(self.tools.executable), self._reads_back)
        self._pending: Sequence[Message] = ()
        self._unsent: Sequence[Message] = ()  # a failed turn's input that no round committed
        self._notes = HeldNotes(self.settings.inbox_keep_delivered)
        self._busy = anyio.Lock(fast_acquire=True)
        self._clock = clock
        self._session_id = session

    @property
    def recorder(self) -> CallRecorder:
        """The telemetry of this session: one record per model call (ledger, logger, hooks)."""
        if self._conversation.recorder is None:
            path = self._record.path
            self._conversation.recorder = CallRecorder(
                self._session_id or (str(path) if path is not None else f"session-{uuid4().hex}"),
                save_file=path,
                settings=self.settings,
                on_call=self.on_call,
            )
        return self._conversation.recorder

    @recorder.setter
    def recorder(self, recorder: CallRecorder) -> None:
        self._conversation.recorder = recorder

    @property
    def _recorder(self) -> CallRecorder | None:
        return self._conversation.recorder

    @property
    def _record(self) -> Record:
        return self._conversation.record

    @property
    def _memo(self) -> dict[str, Any]:  # the strategies' per-session scratch (ctx.memo)
        return self._conversation.memo

    @property
    def _record_splices(self) -> Mapping[Key, Splice]:  # read-backs kept beside caller calls
        return self._record.splices

    @property
    def save_file(self) -> Path | None:
        """The transcript file, if any."""
        return self._record.path

    @property
    def messages(self) -> Messages:
        """The committed transcript, full fidelity (a new list; the dicts are shared)."""
        return list(self._record.messages)

    @property
    def pending_input(self) -> Messages:
        """Input of a turn that failed before its first round was saved; sent by the next run."""
        return list(self._unsent)

    @property
    def pending_notes(self) -> Messages:
        """Inbox notes whose model call failed; delivered again on the next attempt."""
        return list(self._pending)

    async def aclose(self) -> None:
        """Give the inbox files of :attr:`pending_notes` back to the inbox (own names, own order).

        Call it when you will not retry a failed call: the notes are then delivered by the next
        reader of the inbox, in this process or another, instead of by this session.
        """
        returned = await self._notes.release_only(self._pending)
        self._pending = [n for n in self._pending if not any(n is r for r in returned)]

    def _join(self, conversation: Conversation) -> None:
        """Work on a stateless conversation's own state (the wrapper's registry entry) from now
        on: its memo, recorder and record, not this session's (see :class:`Conversation`)."""
        conversation.begin((self.settings, [n for n, _ in self.strategies]), self.save_file)
        if conversation.recorder is not None:
            conversation.recorder.settings = self.settings
            conversation.recorder.hooks = list(self.on_call)
        self._conversation = conversation

    def _without_memory_offload(self) -> None:
        """A stateless call with no conversation identity: see ``unwire_memory_offload``."""
        self.strategies, self.offload_store = unwire_memory_offload(
            self.strategies, self.offload_store
        )
        self._chain = tuple(name for name, _ in self.strategies)

    async def load(self) -> Messages:
        """Read the save_file now (resuming it) and return the transcript."""
        async with self._busy:
            await self._record.sync()
        return self.messages

    async def ask(self, content: str | list[dict[str, Any]]) -> Any:
        """Add a user message and run the loop until the model answers; returns its response."""
        return await self.run([{"role": "user", "content": content}])

    async def run(self, messages: Sequence[Message] = ()) -> Any:
        """Add ``messages`` (user input, or results of tools you ran) and run the loop.

        With no messages it continues the transcript as it stands (after
        :class:`~ctxmw.errors.MaxRoundsExceeded` or an error). The input of a turn that failed
        before its first round was saved (:attr:`pending_input`) is sent first: once when
        ``messages`` repeats it (a retry), else followed by ``messages``.

        Returns:
            The completion function's response to the last round.

        Raises:
            MaxRoundsExceeded: ``max_rounds`` model calls went by without a final answer.
            SaveFileBusy: another writer holds the save_file.
        """
        async with self._turn() as turn:
            given = [message_dict(m) for m in messages]
            answers = [*self._unsent, *given]
            committed = set_aside_unanswered(turn, self._record.messages, answers, self.save_file)
            if retries_interrupted_turn(committed, given):
                given = []
            staged = run_input(self._unsent, given)
            turn.stage(staged)
            self._unsent = ()
            try:
                return await self._loop(turn)
            except BaseException:
                if any(m is s for m in turn.unwritten for s in staged):
                    self._unsent = staged  # no round committed it: keep it for the next run
                raise

    async def complete(self, history: Sequence[Any]) -> Any:
        """A stateless call: ``history`` is the caller's whole conversation (the litellm habit).

        The caller's messages are the conversation: the strategies run on exactly those (plus
        inbox notes), never on anything the caller did not pass, except the tool rounds this
        loop ran for Python callables in an earlier call, put back when the caller's history is
        the history before them plus the answer that followed (see
        :func:`~ctxmw.runtime.revisions.plan_history`). An edited history is recorded as a new
        revision of the same save_file. Then the loop runs as in :meth:`run`.

        Returns:
            The completion function's response to the last round.

        Raises:
            SaveFileWriteError: the round could not be written; the answer is kept (``.response``,
                and for the next call: :mod:`ctxmw.runtime._kept`).
        """
        async with self._turn(history) as turn:
            reply = repeated(self._conversation, turn)
            try:
                if reply is None:
                    return await self._loop(turn)
                await self._commit(turn, last=True)
                return reply
            except SaveFileWriteError as exc:
                raise keep(self._conversation, exc, reply) from exc.__cause__

    async def stream(
        self,
        history: Sequence[Any],
        on_end: Callable[[bool], Awaitable[None]] | None = None,
    ) -> PersistingStream:
        """A stateless streaming call of one round (``stream=True`` in the completion kwargs).

        ``history`` is treated as in :meth:`complete`; the reply is saved when the stream has
        been read to its end. The per-session lock is not taken, so the stream may be read from
        another task than the one that opened it: do not overlap calls on one session.
        ``on_end`` is awaited once the stream has ended (read, broken or closed), with whether
        the reply was saved.

        Raises:
            UsageError: the session has Python callables in ``tools`` (the loop needs whole
                responses).
        """
        if self.tools.executable:
            raise UsageError(
                "stream=True cannot be combined with Python callables in tools: the tool loop "
                "needs whole responses. Stream without tools, or drop stream=True."
            )
        lock = self._new_lock()
        try:
            turn = await self._begin(history, lock)
            turn.lock = lock
            stream, prompt = await self._send(turn, 0)
        except BaseException:
            await self._notes.release(self._pending)
            await flush_ledger(self._recorder)
            if lock is not None:
                await lock.release()
            raise

        saved = False

        async def complete(chunks: list[Any]) -> None:
            nonlocal saved  # each provider stream was recorded when it ended
            built = stream_chunk_builder(chunks, messages=prompt)
            if built is not None:
                turn.add_round([response_message(built)])
                await self._commit(turn, last=True)  # gives the lock back in the same trip
                saved = True

        async def close() -> None:
            await self._notes.release(self._pending)  # a stream that broke committed nothing
            await flush_ledger(self._recorder)
            if lock is not None:
                await lock.release()  # no trip when the commit gave it back
            if on_end is not None:
                await on_end(saved)

        release = lock.release_now if lock is not None else None
        return PersistingStream(stream, complete, close, release=release, what=str(self.save_file))

    @contextlib.asynccontextmanager
    async def _turn(self, history: Sequence[Any] | None = None) -> AsyncIterator[Turn]:
        async with self._busy:
            lock = self._new_lock()
            try:
                turn = await self._begin(history, lock)
                turn.lock = lock
                yield turn
            except BaseException:
                await self._notes.release(self._pending)  # carried, but not committed
                raise
            finally:
                await flush_ledger(self._recorder)  # no trip when a commit wrote the lines
                if lock is not None:
                    await lock.release()  # no trip when the turn's last commit gave it back

    def _new_lock(self) -> SaveFileLock | None:
        path = self.save_file
        return SaveFileLock(path) if path is not None else None

    async def _begin(self, history: Sequence[Any] | None, lock: SaveFileLock | None) -> Turn:
        listing = await self._record.open(lock, self._lists_inbox)
        turn = self._plan_turn(history)
        turn.listing = listing
        return turn

    def _plan_turn(self, history: Sequence[Any] | None) -> Turn:
        if history is None:
            working = self._record.working()
            self._record.last = (working, self._record.messages)
            return self._start_turn(working)
        plan = self._record.plan(history)
        turn = self._start_turn(plan.conversation[: len(plan.conversation) - len(plan.appended)])
        turn.edit, turn.stateless = plan.edit, True
        # A system message staged ahead of the caller's would shift the record's positions.
        turn.hint = None if turn.unwritten else plan.conversation
        turn.stage(plan.appended)
        return turn

    def _start_turn(self, working: Messages) -> Turn:
        turn = Turn(working=working, persist_notes=self.settings.inbox_persist)
        if not working and not self._record.messages and self._system is not None:
            turn.stage([{"role": "system", "content": self._system}])
        return turn

    async def _commit(self, turn: Turn, *, last: bool = False) -> None:
        """Write what the turn added, settle its inbox notes and, when ``last``, give the lock
        back: one worker-thread trip (none when there is nothing to do)."""
        # Shielded: a cancellation must not leave the file and the memory disagreeing.
        with anyio.CancelScope(shield=True):
            self._record.apply(turn)
            ledger = self._recorder.take_held() if self._recorder is not None else None
            await self._record.write_out(
                turn, self._notes, ledger, last=last, lists=self._lists_inbox
            )
