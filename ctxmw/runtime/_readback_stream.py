"""The read-back round of a streamed call: the caller's stream never carries a read-back.

:class:`ReadbackStream` reads the provider's stream for the caller. Text deltas pass as they
come. A tool-call delta of ``ctxmw_expand`` is held back; the caller's own tool-call deltas pass
with their indices renumbered from 0, so the chunks the caller gets assemble into a
well-formed message (``litellm.stream_chunk_builder``). The chunk that finishes the reply, and
any after it (the usage), wait for the end of the provider's stream, when the reply is known:

* it only read back: ctxmw answers the read-backs, drops the waiting chunks (their text, if
  any, passes) and streams the model's next reply to the same prompt plus the reply and the
  answers, in the same stream: the caller sees no intermediate ``finish_reason``. For a reply
  that was text and read-backs, the caller sees that text followed by the next reply's;
* otherwise the waiting chunks pass and the stream ends; read-backs beside the caller's own
  calls are answered and kept for the next prompts, as for a whole response
  (:mod:`ctxmw.runtime._readback`).

Every provider stream is recorded by the telemetry when it ends (the extra ones as read-backs).
Closing this stream closes the provider stream being read.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, Protocol

from ctxmw._litellm import stream_chunk_builder
from ctxmw.context.readback import READBACK_TOOL_NAME, split_readbacks
from ctxmw.messages.form import response_message, tool_calls_of
from ctxmw.runtime._readback import READBACK_ROUNDS, Rounds, set_field, warn_once
from ctxmw.runtime._splices import Readbacks, Splice
from ctxmw.runtime.turn import Turn
from ctxmw.types import Message, Messages

__all__ = ["ReadbackStream", "StreamRounds"]


class StreamRounds(Rounds, Protocol):
    """:class:`~ctxmw.runtime._readback.Rounds`, and the record of each provider stream."""

    async def recorded(self, chunks: list[Any], stream: Any) -> None:
        """Record the call whose stream ended with ``chunks``."""
        ...


class ReadbackStream:
    """The caller's stream of one round (see the module docstring).

    Args:
        inner: the provider's stream for ``prompt``.
        prompt: the prompt the strategies produced.
        turn: the turn, which gets the reply's read-back lines for the save_file.
        rounds: makes the extra calls, answers read-backs, records each stream.
        intercept: whether read-backs are answered here (False: chunks pass unchanged).
    """

    def __init__(
        self, inner: Any, prompt: Messages, turn: Turn, rounds: StreamRounds, *, intercept: bool
    ) -> None:
        self._inner = inner
        self._iter: AsyncIterator[Any] = inner.__aiter__()
        self._sent, self._turn, self._rounds, self._intercept = prompt, turn, rounds, intercept
        self._ready: deque[Any] = deque()  # chunks for the caller
        self._raw: list[Any] = []  # the provider stream's chunks, as they came
        self._held: list[Any] = []  # the finishing chunk and those after it
        self._kinds: dict[Any, bool] = {}  # tool-call index -> whether it reads back
        self._own: dict[Any, int] = {}  # the caller's own calls: index -> index the caller sees
        self._answered: Messages = []
        self._n = 1
        self._done = False

    def __aiter__(self) -> ReadbackStream:
        return self

    async def __anext__(self) -> Any:
        while not self._ready:
            if self._done:
                raise StopAsyncIteration
            try:
                chunk = await self._iter.__anext__()
            except StopAsyncIteration:
                await self._ended()
                continue
            self._raw.append(chunk)
            self._take(chunk)
        return self._ready.popleft()

    async def aclose(self) -> None:
        """Stop: close the provider stream being read."""
        self._done = True
        self._ready.clear()
        close = getattr(self._iter, "aclose", None)
        if close is not None:
            await close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _take(self, chunk: Any) -> None:
        if not self._intercept:
            self._ready.append(chunk)
            return
        chunk = self._own_calls_only(chunk)
        if self._held or _finishes(chunk):
            self._held.append(chunk)
        else:
            self._ready.append(chunk)

    def _own_calls_only(self, chunk: Any) -> Any:
        """``chunk`` without read-back deltas, own calls renumbered (a copy when changed)."""
        calls = _delta_calls(chunk)
        if not calls:
            return chunk
        keep: list[tuple[Any, int]] = []
        for call in calls:
            index = _get(call, "index")
            if index not in self._kinds:
                name = _get(_get(call, "function"), "name")
                self._kinds[index] = name == READBACK_TOOL_NAME
            if not self._kinds[index]:
                keep.append((call, self._own.setdefault(index, len(self._own))))
        if len(keep) == len(calls) and all(_get(c, "index") == i for c, i in keep):
            return chunk
        chunk = copy.deepcopy(chunk)
        calls = _delta_calls(chunk)
        kept = []
        for call in calls:
            index = _get(call, "index")
            if not self._kinds[index]:
                set_field(call, "index", self._own[index])
                kept.append(call)
        set_field(_delta(chunk), "tool_calls", kept or None)
        return chunk

    async def _ended(self) -> None:
        """The provider's stream ended: record it; go on with the next one, or finish."""
        await self._rounds.recorded(self._raw, self._inner)
        if not self._intercept:
            self._done = True
            return
        built = stream_chunk_builder(self._raw)  # its calls only: no prompt to count
        message: Message = response_message(built) if built is not None else {}
        own, reads = split_readbacks(tool_calls_of(message))
        if reads and not own and self._n <= READBACK_ROUNDS + 1:
            await self._again(message, reads)
            return
        splice = None
        if reads and own:
            answers = await self._rounds.answer(reads, refuse=False)
            splice = Readbacks.of(Splice(message, tuple(answers)))
        elif reads:
            warn_once()
            self._held = [_finished(c, "stop") for c in self._held]
        if self._answered:
            self._turn.add_readbacks(Readbacks(tuple(self._answered)))
        if splice is not None:
            self._turn.add_readbacks(splice)
        self._ready.extend(self._held)
        self._done = True

    async def _again(self, message: Message, reads: list[Any]) -> None:
        """Answer a reply that only read back, and stream the model's next reply."""
        answers = await self._rounds.answer(reads, refuse=self._n > READBACK_ROUNDS)
        self._answered += [message, *answers]
        self._sent = [*self._sent, message, *answers]
        self._ready.extend(_finished(c, None) for c in self._held if _has_text(c))
        self._raw, self._held, self._kinds, self._own = [], [], {}, {}
        self._n += 1
        self._inner = await self._rounds.again(self._sent)
        self._iter = self._inner.__aiter__()


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _delta(chunk: Any) -> Any:
    choices = _get(chunk, "choices")
    return _get(choices[0], "delta") if choices else None


def _delta_calls(chunk: Any) -> list[Any]:
    calls = _get(_delta(chunk), "tool_calls")
    return list(calls) if calls else []


def _finishes(chunk: Any) -> bool:
    return any(_get(choice, "finish_reason") for choice in _get(chunk, "choices") or ())


def _has_text(chunk: Any) -> bool:
    return bool(_get(_delta(chunk), "content"))


def _finished(chunk: Any, reason: str | None) -> Any:
    """A copy of ``chunk`` whose choices finish with ``reason`` (None: they do not finish)."""
    if not _finishes(chunk):
        return chunk
    chunk = copy.deepcopy(chunk)
    for choice in _get(chunk, "choices") or ():
        if _get(choice, "finish_reason"):
            set_field(choice, "finish_reason", reason)
    return chunk
