"""``ctxmw.acompletion``: a drop-in for ``litellm.acompletion`` with prompt strategies.

Each call builds a :class:`~ctxmw.runtime.session.Session` of its own (settings read now), treats
``messages`` as the caller's whole history (saved to ``save_file`` as described in
:mod:`ctxmw.runtime.transcript`), and runs one round, or the tool loop when ``tools`` holds Python
callables.

Telemetry needs the previous call of the same session: consecutive stateless calls on one
save_file (or one explicit ``session=`` id) share one recorder, kept in a bounded in-process
registry (the least recently used of more than 1,024 sessions is forgotten; its next call is
then measured as a first call).

A stateless call has no session to keep an inbox note in when the provider call that carried it
fails, so such notes are put back into the inbox: the real inbox's files under their own names
(``Session.aclose``), notes of other strategies through ``ctxmw.inbox.deliver``. The next call
on the same save_file, in this process or another, delivers them again.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from ctxmw._litellm import CompletionFn
from ctxmw.errors import UsageError
from ctxmw.runtime.session import Session, ToolSpec
from ctxmw.settings import Settings
from ctxmw.telemetry.recorder import CallRecorder
from ctxmw.types import Message, StrategySpec

__all__ = ["acompletion"]

logger = logging.getLogger("ctxmw")


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
    **kwargs: Any,
) -> Any:
    """Call the model like ``litellm.acompletion``, with the prompt strategies applied.

    Without Python callables in ``tools`` this is exactly one call of the completion function
    (default ``litellm.acompletion``) with the strategies' output as ``messages``: same return
    value (a ``ModelResponse``, or an async stream with ``stream=True``), same exceptions
    (litellm's pass through unwrapped). With callables it runs the tool loop and returns the
    final response.

    Args:
        model: the litellm model name.
        messages: the whole conversation so far (OpenAI-format dicts or litellm Messages).
        prompt_strategies: see :func:`ctxmw.prepare_prompt`.
        save_file: the JSONL transcript to append to; a diverged history starts a new
            generation (``agent.1.jsonl`` keeps the old one).
        strategy_options: per-call setting overrides.
        settings: a ``Settings`` or a mapping.
        tools: OpenAI tool dicts (sent as they are) and/or Python callables (run by the loop).
        max_rounds: model calls before :class:`~ctxmw.errors.MaxRoundsExceeded`.
        completion: the completion function (for tests: ``ctxmw.testing.FakeCompletion``).
        on_call: telemetry hooks, called with each call's record (sync or async).
        session: the telemetry session id; consecutive calls with the same id (default: the
            same save_file) are compared with each other for cache reuse.
        **kwargs: everything else ``litellm.acompletion`` takes.

    Raises:
        UsageError: invalid arguments, or ``stream=True`` with Python tools.
        MaxRoundsExceeded: the loop ran out of rounds; the message names the save_file.
        SaveFileBusy: another writer holds the save_file.
    """
    convo = Session(
        model,
        save_file=save_file,
        prompt_strategies=prompt_strategies,
        tools=tools,
        settings=settings,
        strategy_options=strategy_options,
        max_rounds=max_rounds,
        completion=completion,
        on_call=on_call,
        session=session,
        **kwargs,
    )
    if session is not None or save_file is not None:
        convo.recorder = _shared_recorder(convo.recorder, convo.settings, on_call)
    history = list(messages or [])
    try:
        if kwargs.get("stream"):
            _check_streamable(convo)
            return await convo._open_stream(history)
        return await convo._run_history(history)
    finally:
        await _return_to_inbox(convo)


_MAX_RECORDERS = 1024
# Each recorder holds its conversation's last payload: bound what all of them keep (about four
# bytes a token), so conversations a stateless caller has finished do not pin their transcripts.
_MAX_HELD_TOKENS = 8_000_000
_recorders: OrderedDict[str, CallRecorder] = OrderedDict()


def _shared_recorder(
    fresh: CallRecorder, settings: Settings, on_call: Sequence[Callable[..., Any]]
) -> CallRecorder:
    """The recorder of this session id from earlier calls, updated for this call; else ``fresh``."""
    known = _recorders.pop(fresh.session, None)
    recorder = fresh if known is None else known
    recorder.settings, recorder.hooks = settings, list(on_call)
    _recorders[fresh.session] = recorder
    held = sum(r.held_tokens for r in _recorders.values())
    while len(_recorders) > 1 and (len(_recorders) > _MAX_RECORDERS or held > _MAX_HELD_TOKENS):
        held -= _recorders.popitem(last=False)[1].held_tokens
    return recorder


def _check_streamable(session: Session) -> None:
    if session.tools.executable:
        raise UsageError(
            "stream=True cannot be combined with Python callables in tools: the tool loop "
            "needs whole responses. Stream without tools, or drop stream=True."
        )


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
