"""``Session``: one conversation, its tool loop, and its transcript.

Every round of a turn: the strategies run on the full-fidelity transcript (never on the previous
round's prompt) with a fresh :class:`~ctxmw.types.StrategyContext` carrying the save_file, the
model and the round; their output is sent; the assistant message and the tool results are
appended to the save_file with one write. What the strategies produce is never stored.

Decisions the specification leaves open:

* The save_file is locked for one turn, not for the session's life; a session reloads the file
  at the start of a turn if another writer changed it in between.
* A turn's file I/O takes as few worker-thread trips as the promises allow: one before the
  first model call (take the lock, see whether the file changed, list the inbox for the
  ``inbox`` strategy), a second only to read a changed file; one per commit (every unsaved
  round in one write and fsync, then the telemetry's ledger lines, built on the loop, the
  delivered inbox files settled, then the lock given back by the turn's last commit, or the
  inbox listed for the next round). The round is on disk before the call returns. The lock is
  free between turns, so the trip before a turn cannot be skipped: taking it is file I/O.
* A turn's input (the user message) is written together with the first round, so a provider
  error before any round completed leaves no dangling user message. The session keeps that
  input (``pending_input``) and sends it with the next ``run()``: ``run()`` with no messages
  continues with it, a retry with the same input sends it once, new input follows it.
* ctxmw runs a response's tool calls only when the session has Python tools and none of the calls
  names a tool given as a plain dict (a call to an unknown name then gets an error text). Without
  Python tools a turn is exactly one model call. In every other case the response is returned to
  the caller and the assistant message is saved: answer its calls with ``run([...tool results])``.
* A stateless caller (:meth:`Session.complete`, what ``acompletion`` calls) owns the
  conversation: its messages are what the strategies see, lined up against the record by
  :func:`~ctxmw.runtime.revisions.plan_history`; an edited history becomes a new revision of the
  same save_file, written with the turn's first round (a failed call records nothing). Only the
  tool rounds this loop ran for such a caller are marked as ctxmw's in the file (a stateful
  session's file stays plain messages).
* Inbox notes (``ctx.stats["inbox"]["delivered"]``): see :mod:`ctxmw.runtime.turn`. With
  ``inbox_persist`` they are written before the assistant message that answered them; otherwise
  they stay in the turn's working transcript, where they were delivered, until the turn ends.
  Notes carried by a call that raised are kept and delivered again (at the end of the next
  attempt's input) by this session. The real inbox's files stay claimed meanwhile and move to
  the removed folder only once the round that carried them is committed; a call that fails,
  is cancelled or whose stream breaks puts them back into the inbox (see
  :mod:`ctxmw.runtime._notes`), and :meth:`Session.aclose` gives back those still pending.
* A round whose save_file write failed (disk full) stays in ``messages``; the next successful
  write saves it. A retried ``ask()`` of a turn that failed after committing a tool round (the
  transcript ends with that user message and its unanswered tool loop) continues that turn
  instead of writing the user message twice.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import anyio
from anyio import to_thread

from ctxmw._litellm import (
    CompletionFn,
    default_completion,
    message_dict,
    message_dicts,
    response_message,
    stream_chunk_builder,
)
from ctxmw.errors import MaxRoundsExceeded, UsageError
from ctxmw.inbox import inbox_dir
from ctxmw.inbox._files import FileEntry
from ctxmw.messages._incremental import GROWN_SLOT, common_prefix
from ctxmw.messages.form import call_name, tool_calls_of
from ctxmw.messages.normal import same_message
from ctxmw.runtime._notes import HeldNotes
from ctxmw.runtime._open_round import set_aside_unanswered
from ctxmw.runtime.conversations import Carried, Conversation
from ctxmw.runtime.lock import SaveFileLock
from ctxmw.runtime.offload import OffloadOption, unwire_memory_offload, wire_offload
from ctxmw.runtime.revisions import plan_history
from ctxmw.runtime.stream import PersistingStream
from ctxmw.runtime.tool_runner import run_tool_calls
from ctxmw.runtime.tool_schema import ToolSet
from ctxmw.runtime.transcript import TranscriptFile, encode_lines
from ctxmw.runtime.turn import Turn, delivered_notes
from ctxmw.settings import Settings, resolve_settings
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.strategies.inbox import inbox, list_for_delivery
from ctxmw.telemetry.recorder import CallRecorder
from ctxmw.telemetry.response import provider_of
from ctxmw.types import Message, Messages, StrategyContext, StrategySpec

logger = logging.getLogger("ctxmw")

__all__ = ["Session", "ToolSpec"]

_NOT_FOR_SIDE_CALLS = ("stream", "stream_options")

ToolSpec = Mapping[str, Any] | Callable[..., Any]
"""An item of ``tools=``: an OpenAI tool dict or a Python callable (sync or async)."""


class Session:
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
            and the loop answers the ``ctxmw_expand`` tool itself; or pass your own
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
        self.strategies, self.offload_store = wire_offload(
            offload,
            resolve_strategies(prompt_strategies, self.settings),
            self.tools,
            save_file,
            self.settings,
            lambda: self._memo,
        )
        self.max_rounds = _check_rounds(max_rounds, self.settings)
        self.on_call = list(on_call)
        self._system = system
        self._completion = completion
        self._kwargs = completion_kwargs
        self._path = Path(save_file) if save_file is not None else None
        self._file = TranscriptFile(self._path) if self._path is not None else None
        # Whether the turn's trips list the inbox the real ``inbox`` strategy reads. Its folder
        # is made in the trip (a path is two tracked objects each full gc pass walks).
        lists = any(fn is inbox for _, fn in self.strategies)
        self._chain = tuple(name for name, _ in self.strategies)  # StrategyContext.chain
        self._lists_inbox = self._path is not None and lists
        self._messages: Messages = []
        self._ours: list[bool] = []  # per message: made by this loop for Python callables
        # A stateless caller's messages matched to _messages[:len(_hint)] by the last commit, and
        # normal keys by message object: the next call compares only what is new.
        # Empty, these are the shared empty tuple: an empty list is one more tracked object
        # per session that every full gc pass walks.
        self._hint: Sequence[Message] = ()
        self._keys: dict[int, tuple[Any, str]] = {}
        self._loaded = False
        self._pending: Sequence[Message] = ()
        self._unsent: Sequence[Message] = ()  # a failed turn's input that no round committed
        self._unsaved: Sequence[tuple[Messages, Any, list[bool]]] = ()  # not yet on disk
        self._notes = HeldNotes(self.settings.inbox_keep_delivered)
        self._busy = anyio.Lock(fast_acquire=True)  # uncontended: no extra loop step a turn
        self._memo: dict[str, Any] = {}  # strategies' per-session scratch (StrategyContext.memo)
        # The last turn's working list and the transcript list it grew beside (see _working).
        self._last: tuple[Messages, Messages] | None = None
        self._clock = clock
        self._session_id = session
        # Built on first use: a stateless call resumes its conversation's recorder instead.
        self._recorder: CallRecorder | None = None

    @property
    def recorder(self) -> CallRecorder:
        """The telemetry of this session: one record per model call (ledger, logger, hooks)."""
        if self._recorder is None:
            path = self._path
            self._recorder = CallRecorder(
                self._session_id or (str(path) if path is not None else f"session-{uuid4().hex}"),
                save_file=path,
                settings=self.settings,
                on_call=self.on_call,
            )
        return self._recorder

    @recorder.setter
    def recorder(self, recorder: CallRecorder) -> None:
        self._recorder = recorder

    @property
    def save_file(self) -> Path | None:
        """The transcript file, if any."""
        return self._path

    @property
    def messages(self) -> Messages:
        """The committed transcript, full fidelity (a new list; the dicts are shared)."""
        return list(self._messages)

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

    def _resume(self, conversation: Conversation) -> None:
        """Continue from what the previous call of a stateless conversation left (the wrapper's).

        The memo and the recorder are the conversation's; its loaded transcript is taken when it
        is this session's save_file (:meth:`_sync` still reads the file again if it changed).
        """
        self._memo = conversation.memo_for((self.settings, [n for n, _ in self.strategies]))
        if conversation.recorder is not None:
            self.recorder = conversation.recorder
            self.recorder.settings, self.recorder.hooks = self.settings, list(self.on_call)
        carried = conversation.transcript
        if carried is not None and self._path is not None and carried.file.path == self._path:
            self._file, self._messages, self._ours = carried.file, carried.messages, carried.ours
            self._hint, self._keys, self._loaded = carried.hint, carried.keys, True

    def _without_memory_offload(self) -> None:
        """A stateless call with no conversation identity: see ``unwire_memory_offload``."""
        self.strategies, self.offload_store = unwire_memory_offload(
            self.strategies, self.tools, self.offload_store
        )
        self._chain = tuple(name for name, _ in self.strategies)

    def _hand_over(self, conversation: Conversation, *, exact: bool) -> None:
        """Leave this call's state for the conversation's next call (see :meth:`_resume`).

        The transcript is left only when ``exact`` (the call succeeded and has committed
        everything) and nothing is waiting to be written: otherwise the next call reads the file.
        """
        conversation.recorder = self.recorder
        conversation.transcript = None
        if exact and self._file is not None and self._loaded and not self._unsaved:
            conversation.transcript = Carried(
                self._file, self._messages, self._ours, self._hint, self._keys
            )

    async def load(self) -> Messages:
        """Read the save_file now (resuming it) and return the transcript."""
        async with self._busy:
            await self._sync()
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
            committed = set_aside_unanswered(turn, self._messages, answers, self._path)
            if _retries_interrupted_turn(committed, given):
                given = []
            staged = _after_unsent(self._unsent, given)
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
        """
        async with self._turn(history) as turn:
            return await self._loop(turn)

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
            await self._flush_ledger()
            if lock is not None:
                await lock.release()
            raise

        saved = False

        async def complete(chunks: list[Any]) -> None:
            nonlocal saved
            call = turn.stream_call
            if call is not None:
                await self._record(call, chunks, time.perf_counter() - call.started, stream)
            built = stream_chunk_builder(chunks, messages=prompt)
            if built is not None:
                turn.add_round([response_message(built)])
                await self._commit(turn, last=True)  # gives the lock back in the same trip
                saved = True

        async def close() -> None:
            await self._notes.release(self._pending)  # a stream that broke committed nothing
            await self._flush_ledger()
            if lock is not None:
                await lock.release()  # no trip when the commit gave it back
            if on_end is not None:
                await on_end(saved)

        return PersistingStream(stream, complete, close)

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
                await self._flush_ledger()  # no trip when a commit wrote the lines
                if lock is not None:
                    await lock.release()  # no trip when the turn's last commit gave it back

    def _new_lock(self) -> SaveFileLock | None:
        return SaveFileLock(self._path) if self._path is not None else None

    async def _open(self, lock: SaveFileLock | None) -> tuple[Path, list[FileEntry]] | None:
        """One worker-thread trip before a turn: take the lock, see whether the save_file
        changed, and list the inbox when the real ``inbox`` strategy runs; a changed file is
        then read (a second trip, only then). Returns the inbox listing, if made.
        """
        file = self._file
        if file is None:
            self._loaded = True
            return None
        # A module function and its arguments, not a closure: a closure's cells are tracked
        # objects held by every call waiting for a worker thread.
        stale, listing = await to_thread.run_sync(
            _open_now, file, lock, self._loaded, self._lists_inbox
        )
        if stale:
            await self._reload()
        self._loaded = True
        return listing

    async def _begin(self, history: Sequence[Any] | None, lock: SaveFileLock | None) -> Turn:
        listing = await self._open(lock)
        turn = self._plan_turn(history)
        turn.listing = listing
        return turn

    def _plan_turn(self, history: Sequence[Any] | None) -> Turn:
        if history is None:
            working = self._working()
            self._last = (working, self._messages)
            return self._start_turn(working)
        self._last = None  # a stateless turn's list holds the caller's objects: never reused
        given, same = self._given(history)
        plan = plan_history(
            self._messages, self._ours, given, hint=self._hint, keys=self._keys, same=same
        )
        if plan.edit is not None:
            self._forget_keys(given)
        turn = self._start_turn(plan.conversation[: len(plan.conversation) - len(plan.appended)])
        turn.edit, turn.stateless = plan.edit, True
        # A system message staged ahead of the caller's would shift the record's positions.
        turn.hint = None if turn.unwritten else plan.conversation
        turn.stage(plan.appended)
        return turn

    def _given(self, history: Sequence[Any]) -> tuple[Messages, int]:
        """The caller's messages as dicts, and how many lead with the previous call's (hint).

        One comparison at C speed finds the messages the previous call already converted and
        lined up (the same objects, or equal ones: those are then the previous call's dicts);
        only the rest is converted.
        """
        hint = self._hint
        same = common_prefix(hint, history) if hint else 0
        if not same or not isinstance(hint, list):  # no hint: the empty tuple
            return message_dicts(history), 0
        given = hint[:same]
        given += message_dicts(history[same:])
        return given, same

    def _working(self) -> Messages:
        """A turn's working list: the last turn's own list when it still is the transcript.

        A turn's list only grows, and its commits append what it added, in order, to the
        transcript: so when the transcript is still the same list object (not reloaded, edited
        or handed over) and as long as the turn's list, ending with the same message, every
        message the turn added was committed and the two hold the same messages. The list then
        goes on growing, and the strategies know its head without comparing it (GROWN_SLOT).
        """
        messages, last = self._messages, self._last
        if last is None or last[1] is not messages or len(last[0]) != len(messages):
            return list(messages)
        if messages and last[0][-1] is not messages[-1]:
            return list(messages)
        return last[0]

    def _start_turn(self, working: Messages) -> Turn:
        turn = Turn(working=working, persist_notes=self.settings.inbox_persist)
        if not working and not self._messages and self._system is not None:
            turn.stage([{"role": "system", "content": self._system}])
        return turn

    def _forget_keys(self, given: Messages) -> None:
        """Keep the normal keys of live messages only (the record's and the caller's)."""
        if len(self._keys) > 2 * (len(self._messages) + len(given)):
            live = {id(m) for m in (*self._messages, *given)}
            self._keys = {k: v for k, v in self._keys.items() if k in live}

    async def _sync(self) -> None:
        if self._file is not None and (not self._loaded or await self._file.changed()):
            await self._reload()
        self._loaded = True

    async def _reload(self) -> None:
        if self._file is not None:
            self._messages = await self._file.load()
            self._ours = list(self._file.ours)
            self._hint, self._keys = (), {}
            if self._unsaved:
                logger.warning(
                    "%s was changed by another writer; %d write(s) that could not be made "
                    "earlier are dropped in favour of the file.",
                    self._path,
                    len(self._unsaved),
                )
                self._unsaved = ()

    async def _loop(self, turn: Turn) -> Any:
        for round_ in range(self.max_rounds):
            # Not a coroutine of its own: each is one more tracked object per call in flight.
            response, _ = await self._send(turn, round_)
            message = response_message(response)
            turn.add_round([message])
            calls = tool_calls_of(message)
            if not calls or not self._runnable(calls):
                await self._commit(turn, last=True)
                return response
            results = await run_tool_calls(calls, self.tools, self.settings.tool_timeout)
            turn.add_round(results)
            turn.mark_ours(message, *results)
            await self._commit(turn)
        save_file = str(self._path) if self._path is not None else None
        raise MaxRoundsExceeded(self.max_rounds, save_file)

    async def _send(self, turn: Turn, round_: int, **extra: Any) -> tuple[Any, Messages]:
        """Strategies on the working transcript, then one model call; tracks inbox notes."""
        turn.add_notes(self._take_pending())
        # One snapshot of the working transcript serves the side calls and the telemetry record
        # (the strategies' input: an inbox note they deliver is their output, so a stateless
        # caller's next call, which never carries it, is a bust of the inbox, not of the
        # transcript): a pointer copy, the round's only per-message work outside the strategies
        # and the telemetry.
        snapshot = list(turn.working)
        side = _SideCall(self, snapshot, round_)
        ctx = StrategyContext(
            self.settings,
            save_file=self._path,
            model=self.model,
            round=round_,
            completion=side,
            memo=self._memo,
            hold_inbox=True,
            now=self._clock(),
            inbox_listing=[turn.listing] if turn.listing else [],
            chain=self._chain,  # as the chain runner would set it: no copy of the context
            cache_control_injection_points=self._kwargs.get("cache_control_injection_points") or (),
        )
        turn.listing = None
        self._memo[GROWN_SLOT] = turn.working  # it only grows: the chain's kept head holds
        trace: list[tuple[str, Messages]] = []
        try:
            try:
                prompt = await apply_strategies(turn.working, self.strategies, ctx, trace=trace)
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
        """Send one prompt: the single place every model call goes through, and is recorded.

        A streamed call is recorded when the stream has been read (see :meth:`stream`).
        """
        kwargs = dict(self.recorder.prepare_kwargs({**self.wire_kwargs(prompt), **extra}))
        completion = self._completion or default_completion()
        started = time.perf_counter()
        response = await completion(**kwargs)
        call.kwargs, call.started = kwargs, started
        if not self.settings.telemetry:
            return response
        if kwargs.get("stream"):
            turn.stream_call = call
        else:
            await self._record(call, response, time.perf_counter() - started)
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
            await self._record(call, response, time.perf_counter() - started)
        return response

    async def _record(self, call: _Call, response: Any, latency: float, stream: Any = None) -> None:
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
                hold_ledger=True,  # written by the commit's trip (or _flush_ledger)
            )
        except Exception:
            logger.warning(
                "ctxmw telemetry failed for one call; the call itself went on.", exc_info=True
            )

    def wire_kwargs(self, prompt: Messages) -> dict[str, Any]:
        """The keyword arguments one model call sends for ``prompt``."""
        kwargs: dict[str, Any] = {**self._kwargs, "model": self.model, "messages": prompt}
        if self.tools.schemas:
            kwargs["tools"] = self.tools.schemas
        return kwargs

    async def _commit(self, turn: Turn, *, last: bool = False) -> None:
        """Write what the turn added, settle its inbox notes and, when ``last``, give the lock
        back: one worker-thread trip (none when there is nothing to do)."""
        # Shielded: a cancellation must not leave the file and the memory disagreeing.
        with anyio.CancelScope(shield=True):
            new, edit = turn.take_unwritten(), turn.take_edit()
            ours = turn.ours_flags(new)
            # Memory first: kept if the write fails (disk full), so the next commit saves it.
            if edit is not None:
                self._messages, self._ours = edit.apply(self._messages, self._ours)
            self._messages.extend(new)
            self._ours.extend(ours)
            if turn.hint is not None:  # the caller's messages now line up with the record's
                self._hint, turn.hint = turn.hint, None
            if self._file is not None and (new or edit is not None):
                self._unsaved = [*self._unsaved, (new, edit, ours)]
            await self._write_out(turn, last=last)

    async def _write_out(self, turn: Turn, *, last: bool) -> None:
        """The commit's one trip: every unsaved round in one write and fsync, the inbox notes
        settled, then the lock given back (``last``) or the inbox listed for the next round."""
        file, notes = self._file, self._notes
        data = b"".join(encode_lines(m, edit=e, ours=o) for m, e, o in self._unsaved)
        lock = turn.lock if last and turn.lock is not None and turn.lock.held else None
        lists = file is not None and self._lists_inbox and not last
        ledger = self._recorder.take_held() if self._recorder is not None else None
        if data or notes.held or lock is not None or lists or ledger is not None:
            turn.listing = await to_thread.run_sync(
                _commit_now, file, data, ledger, notes, lock, lists
            )
        self._unsaved = ()

    async def _flush_ledger(self) -> None:
        """Write the ledger lines no commit took (a turn that failed after a call was recorded)."""
        job = self._recorder.take_held() if self._recorder is not None else None
        if job is not None:
            with anyio.CancelScope(shield=True):
                await to_thread.run_sync(_write_ledger, job)

    def _runnable(self, calls: list[dict[str, Any]]) -> bool:
        # Without Python tools there is no loop: one call, its response returned (the promise).
        if not self.tools.executable:
            return False
        names = {call_name(c) for c in calls}
        return not names & self.tools.declared

    def _take_pending(self) -> Sequence[Message]:
        out, self._pending = self._pending, ()
        return out


_ENDPOINT_KEYS = ("api_base", "base_url", "api_key", "client")


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
    """``StrategyContext.completion`` for one round: :meth:`Session._side_call` on its
    transcript. One tracked object where a ``functools.partial`` of a bound method is three,
    held through every call in flight."""

    session: Session
    transcript: Messages
    round: int

    def __call__(self, **kwargs: Any) -> Awaitable[Any]:
        return self.session._side_call(self.transcript, self.round, **kwargs)


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


def _write_ledger(job: Callable[[], None]) -> None:
    """Worker thread: the telemetry's ledger lines; a failure never fails the call."""
    try:
        job()
    except Exception:
        logger.warning(
            "ctxmw could not write the telemetry ledger; the call went on.", exc_info=True
        )


def _open_now(
    file: TranscriptFile, lock: SaveFileLock | None, loaded: bool, lists: bool
) -> tuple[bool, tuple[Path, list[FileEntry]] | None]:
    """Worker thread, the trip before a turn (see ``Session._open``): take the lock, whether
    the file must be read, and the inbox listing when ``lists``."""
    if lock is not None:
        lock.acquire_now()
    stale = not loaded or file.changed_now()
    return stale, _list_inbox(file.path) if lists else None


def _commit_now(
    file: TranscriptFile | None,
    data: bytes,
    ledger: Callable[[], None] | None,
    notes: HeldNotes,
    lock: SaveFileLock | None,
    lists: bool,
) -> tuple[Path, list[FileEntry]] | None:
    """Worker thread, a commit's one trip (see ``Session._write_out``)."""
    try:
        if file is not None and data:
            file.write_now(data)
    finally:  # after the fsync, still under the lock; a failure is only logged
        if ledger is not None:
            _write_ledger(ledger)
    notes.settle_now()
    if lock is not None:
        lock.release_now()
    return _list_inbox(file.path) if lists and file is not None else None


def _list_inbox(save_file: Path) -> tuple[Path, list[FileEntry]]:
    """Worker thread: the inbox folder of ``save_file`` and its entries, for the strategy."""
    folder = inbox_dir(save_file)
    return folder, list_for_delivery(folder)


def _after_unsent(unsent: Sequence[Message], given: Messages) -> Messages:
    """The input of a run: the unsent input of a failed turn, then ``given`` unless a retry."""
    retry = len(given) == len(unsent) and all(map(same_message, unsent, given))
    return given if retry or not unsent else [*unsent, *given]


def _retries_interrupted_turn(committed: Messages, given: Messages) -> bool:
    """Whether ``given`` is the user message of the turn the transcript ends with, unfinished.

    A turn that failed after committing a tool round leaves its user message followed by tool
    rounds and no answer; asking the same again is a retry of that turn, not a new question.
    """
    if len(given) != 1 or given[0].get("role") != "user" or not committed:
        return False
    if committed[-1].get("role") != "tool":
        return False
    for message in reversed(committed):
        role = message.get("role")
        if role == "user":
            return same_message(message, given[0])
        if role != "tool" and not (role == "assistant" and message.get("tool_calls")):
            return False  # an answer or a system message: the turn had finished
    return False


def _check_rounds(max_rounds: int | None, settings: Settings) -> int:
    if max_rounds is None:
        return settings.max_rounds
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise UsageError(f"max_rounds={max_rounds!r} must be an integer >= 1.")
    return max_rounds
