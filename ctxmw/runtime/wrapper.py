"""``ctxmw.acompletion``: a drop-in for ``litellm.acompletion`` with prompt strategies.

Each call builds a :class:`~ctxmw.runtime.session.Session` of its own (settings read now) and
hands it the caller's whole history (:meth:`~ctxmw.runtime.session.Session.complete`, or
:meth:`~ctxmw.runtime.session.Session.stream` with ``stream=True``): the caller's messages are
the conversation, recorded in ``save_file`` as described in :mod:`ctxmw.runtime.revisions`. It
runs one round, or the tool loop when ``tools`` holds Python callables.

ctxmw's options may also come in ``metadata={"ctxmw": {...}}`` (what agent frameworks pass
through to litellm, see :mod:`ctxmw.runtime.options`); explicit keyword arguments win, and the
``"ctxmw"`` entry never reaches the provider.

Consecutive stateless calls of one conversation (one save_file, or one explicit ``session=``
id, or litellm's ``litellm_session_id`` / ``metadata["session_id"]``) continue from what the
previous call left: the strategies' memo, the telemetry recorder (its previous call) and the
loaded transcript, re-read only when the file changed. They live in a bounded in-process
registry (:mod:`ctxmw.runtime.conversations`: by conversations and by bytes held, the least
recently used forgotten first; a forgotten conversation's next call starts cold, with the same
result). A call that names no conversation continues the one of this process whose messages it
extends, found by its head (:mod:`ctxmw.runtime._heads`).

Without a save_file the records go to the default ledger (:mod:`ctxmw.telemetry.default_ledger`),
which ``ctxmw stats`` reads with no argument; the first such call of the process says where in
one INFO line on the ``ctxmw`` logger, and every call logs its own (reported against expected
cache reads, the session's hit rate so far, the bust if any).

A stateless call has no session to keep an inbox note in when the provider call that carried it
fails, so such notes are put back into the inbox: the real inbox's files under their own names
(``Session.aclose``), notes of other strategies through ``ctxmw.inbox.deliver``. The next call
on the same save_file, in this process or another, delivers them again.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from ctxmw._litellm import CompletionFn
from ctxmw.errors import StrategyError, UnknownStrategyError
from ctxmw.messages.form import message_dicts
from ctxmw.runtime._heads import HeadThreads
from ctxmw.runtime.conversations import Conversation, Conversations
from ctxmw.runtime.identity import conversation_identity
from ctxmw.runtime.options import split_options
from ctxmw.runtime.session import Session, ToolSpec
from ctxmw.settings import Settings
from ctxmw.strategies._chain import ARGUMENT
from ctxmw.telemetry.default_ledger import announce, default_ledger_path
from ctxmw.telemetry.recorder import CallRecorder
from ctxmw.types import Message, StrategySpec

__all__ = ["acompletion"]

logger = logging.getLogger("ctxmw")

_METADATA = 'the metadata["ctxmw"]["prompt_strategies"] of the call'


async def acompletion(
    model: str,
    messages: Sequence[Any] | None = None,
    *,
    prompt_strategies: StrategySpec = None,
    save_file: str | os.PathLike[str] | None = None,
    strategy_options: Mapping[str, Any] | None = None,
    settings: Settings | Mapping[str, Any] | None = None,
    tools: Sequence[ToolSpec] | None = None,
    max_rounds: int | None = None,
    completion: CompletionFn | None = None,
    on_call: Sequence[Callable[..., Any]] = (),
    session: str | None = None,
    clock: Callable[[], float] | None = None,
    **kwargs: Any,
) -> Any:
    """Call the model like ``litellm.acompletion``, with the prompt strategies applied.

    Without Python callables in ``tools`` this is one call of the completion function (default
    ``litellm.acompletion``) with the strategies' output as ``messages``: same return value (a
    ``ModelResponse``, or an async stream with ``stream=True``), same exceptions (litellm's pass
    through unwrapped). A reply that only reads a compacted result back (``ctxmw_expand``) is
    answered by ctxmw and the model called again, so the caller gets the final reply and never a
    ``ctxmw_expand`` call (see docs/readback.md). With callables it runs the tool loop and
    returns the final response.

    Args:
        model: the litellm model name.
        messages: the whole conversation so far (OpenAI-format dicts or litellm Messages).
        prompt_strategies: see :func:`ctxmw.prepare_prompt`.
        save_file: the conversation's JSONL transcript; an edited history is recorded as a new
            revision of the same file (every earlier one stays readable).
        strategy_options: per-call setting overrides.
        settings: a ``Settings`` or a mapping.
        tools: OpenAI tool dicts (sent as they are) and/or Python callables (run by the loop).
        max_rounds: model calls before :class:`~ctxmw.errors.MaxRoundsExceeded`.
        completion: the completion function (for tests: ``ctxmw.testing.FakeCompletion``).
        on_call: telemetry hooks, called with each call's record (sync or async).
        session: the telemetry session id; consecutive calls with the same id (default: the
            same save_file, else ``litellm_session_id`` or ``metadata["session_id"]``, else
            the earlier call of this process whose messages this one extends) are compared
            with each other for cache reuse.
        clock: wall-clock seconds (``StrategyContext.now``, default ``time.time``): the
            strategies see the time since the conversation's previous call (a cold cache).
        **kwargs: everything else ``litellm.acompletion`` takes. ``metadata["ctxmw"]`` may hold
            any of the options above (not ``tools`` or ``completion``); it is removed before the
            provider call.

    Raises:
        UsageError: invalid arguments (``metadata["ctxmw"]`` included), or ``stream=True`` with
            Python tools.
        MaxRoundsExceeded: the loop ran out of rounds; the message names the save_file.
        SaveFileBusy: another writer holds the save_file.
    """
    options, rest = split_options(kwargs)
    given = {
        "prompt_strategies": prompt_strategies,
        "save_file": save_file,
        "strategy_options": strategy_options,
        "settings": settings,
        "max_rounds": max_rounds,
        "session": session,
        "on_call": on_call or None,
    }
    chosen = {**options, **{k: v for k, v in given.items() if v is not None}}
    chosen["on_call"] = chosen.get("on_call") or ()
    history, named = list(messages or []), True
    if chosen.get("session") is None and chosen.get("save_file") is None:
        identity = conversation_identity(rest, head=False)
        named = identity is not None
        chosen["session"] = identity.conversation if identity is not None else _by_head(history)
    if clock is not None:
        chosen["clock"] = clock
    try:
        return await _run(model, history, tools, completion, chosen, rest, named=named)
    except UnknownStrategyError as exc:
        # The list came from metadata["ctxmw"] (a framework's way in), not from the argument.
        from_metadata = prompt_strategies is None and "prompt_strategies" in options
        if from_metadata and exc.source == ARGUMENT and not isinstance(exc, StrategyError):
            raise exc.named_from(_METADATA) from None
        raise


def _by_head(history: Sequence[Any]) -> str:
    try:
        dicts = message_dicts(history)
    except TypeError:  # not messages at all: the session says so, with the index, right after
        dicts = [m for m in history if isinstance(m, dict)]
    return _heads.session_for(dicts, lambda session: _conversations.in_use((None, session)))


async def _run(
    model: str,
    history: list[Any],
    tools: Sequence[ToolSpec] | None,
    completion: CompletionFn | None,
    options: dict[str, Any],
    kwargs: dict[str, Any],
    *,
    named: bool = True,
) -> Any:
    convo = Session(model, tools=tools, completion=completion, **options, **kwargs)
    key = _conversation_key(options)
    entry = _conversations.check_out(key) if key is not None else None
    if entry is not None:
        convo._join(entry)
        if options.get("save_file") is None:
            _default_ledger(convo, entry, str(options.get("session")))
    if entry is None or not named:
        # Found by its head only (a guess a rewritten history defeats), or not at all: no
        # later call is sure to read an original back, so nothing is offloaded to memory.
        convo._without_memory_offload()

    async def end(exact: bool) -> None:
        if entry is not None and key is not None:
            entry.end(exact=exact)
            _conversations.check_in(key, entry)
        await _return_to_inbox(convo)

    if kwargs.get("stream"):
        # The call ends with its stream (saved once read): the conversation is handed over then.
        try:
            return await convo.stream(history, on_end=end)
        except BaseException:
            await end(False)
            raise
    exact = False
    try:
        response = await convo.complete(history)
        exact = True
        return response
    finally:
        await end(exact)


_conversations = Conversations()
_heads = HeadThreads()


def _default_ledger(convo: Session, entry: Conversation, session: str) -> None:
    """A conversation without a save_file records its calls in the default ledger."""
    if entry.recorder is not None or not convo.settings.telemetry:
        return  # its recorder already writes where its first call chose
    path = default_ledger_path(convo.settings)
    announce(path)
    if path is not None:
        convo.recorder = CallRecorder(
            session, ledger=path, settings=convo.settings, on_call=convo.on_call
        )


def _conversation_key(options: Mapping[str, Any]) -> tuple[str | None, str | None] | None:
    """The registry key of a call's conversation: its save_file and session id (None: none)."""
    save_file, session = options.get("save_file"), options.get("session")
    if save_file is None and session is None:
        return None
    return (os.fspath(save_file) if save_file is not None else None, session)


async def _return_to_inbox(session: Session) -> None:
    if not session.pending_notes or session.save_file is None:
        return
    with anyio.CancelScope(shield=True):  # a cancelled call must still give its notes back
        await session.aclose()
        await _deliver_again(session.save_file, session.pending_notes)


async def _deliver_again(save_file: Path, notes: Sequence[Message]) -> None:
    try:
        deliver = importlib.import_module("ctxmw.inbox").deliver
    except ImportError:  # pragma: no cover - the inbox ships with ctxmw
        logger.warning("%d inbox note(s) could not be returned to the inbox.", len(notes))
        return
    for note in notes:
        content = note.get("content")
        if isinstance(content, str):
            await deliver(save_file, content)
        else:
            logger.warning("An inbox note with non-text content could not be redelivered.")
