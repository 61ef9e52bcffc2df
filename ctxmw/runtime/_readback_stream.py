"""The read-back round of a streamed call: the caller's stream never carries a read-back.

:class:`ReadbackStream` reads the provider's stream for the caller, and the round's decisions
are :class:`~ctxmw.runtime._readback.Round`'s, as for a whole reply. What depends on the stream's
format is a :class:`Wire`: chat chunks (:class:`ChatWire`, here), or the events of the proxy's
``/v1/messages`` and ``/v1/responses`` (:class:`~ctxmw.proxy._readback_events.EventWire`).

For chat chunks: text deltas pass as they come. A tool-call delta of ``ctxmw_expand`` is held
back; the caller's own tool-call deltas pass with their indices renumbered from 0, so the
chunks the caller gets assemble into a well-formed message (``litellm.stream_chunk_builder``).
The chunk that finishes the reply, and any after it (the usage), wait for the end of the
provider's stream, when the reply is known:

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
from ctxmw.context.readback import READBACK_TOOL_NAME
from ctxmw.messages.form import response_message
from ctxmw.runtime._readback import Round, Rounds, Verdict, set_field
from ctxmw.runtime.turn import Turn
from ctxmw.types import Message, Messages

__all__ = ["ChatWire", "ReadbackStream", "StreamRounds", "Wire"]


class StreamRounds(Rounds, Protocol):
    """:class:`~ctxmw.runtime._readback.Rounds`, and the record of each provider stream."""

    async def recorded(self, chunks: list[Any], stream: Any) -> None:
        """Record the call whose stream ended with ``chunks``."""
        ...


class Wire(Protocol):
    """What a stream's format decides: what of each item the caller gets, and when."""

    def parse(self, chunk: Any) -> list[Any]:
        """The items (chunks, events) a chunk of the provider's stream holds."""
        ...

    def take(self, item: Any) -> list[Any]:
        """What the caller gets of ``item`` now (what ends the reply is held)."""
        ...

    def message(self, items: list[Any]) -> Message:
        """The assistant message (chat form) of a provider stream that ended with ``items``."""
        ...

    def again(self) -> list[Any]:
        """The reply only read back and the next stream follows: what the caller gets of the
        held items; the next stream's items are read afresh."""
        ...

    def end(self, verdict: Verdict) -> list[Any]:
        """The reply is the caller's: the held items it gets, as ``verdict`` leaves them."""
        ...


class ReadbackStream:
    """The caller's stream of one round (see the module docstring).

    Args:
        inner: the provider's stream for ``prompt``.
        prompt: the prompt the strategies produced.
        turn: the turn, which gets the reply's read-back lines for the save_file.
        rounds: makes the extra calls, answers read-backs, records each stream.
        intercept: whether read-backs are answered here (False: chunks pass unchanged).
        wire: the stream's format (default: chat chunks, :class:`ChatWire`).
    """

    def __init__(
        self,
        inner: Any,
        prompt: Messages,
        turn: Turn,
        rounds: StreamRounds,
        *,
        intercept: bool,
        wire: Wire | None = None,
    ) -> None:
        self._inner = inner
        self._iter: AsyncIterator[Any] = inner.__aiter__()
        self._round, self._rounds, self._intercept = Round(prompt, turn, rounds), rounds, intercept
        self._wire: Wire = wire if wire is not None else ChatWire()
        self._ready: deque[Any] = deque()  # items for the caller
        self._raw: list[Any] = []  # the provider stream's items, as they came
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
            for item in self._wire.parse(chunk):
                self._raw.append(item)
                self._ready.extend(self._wire.take(item) if self._intercept else [item])
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

    async def _ended(self) -> None:
        """The provider's stream ended: record it; go on with the next one, or finish."""
        await self._rounds.recorded(self._raw, self._inner)
        if not self._intercept:
            self._done = True
            return
        verdict = await self._round.after(self._wire.message(self._raw))
        if verdict.again is None:
            self._ready.extend(self._wire.end(verdict))
            self._done = True
            return
        self._ready.extend(self._wire.again())
        self._raw = []
        self._inner = await self._rounds.again(verdict.again)
        self._iter = self._inner.__aiter__()


class ChatWire:
    """Chat chunks (see the module docstring): the read-backs' deltas held back, the caller's
    own calls renumbered, the finishing chunk and those after it held."""

    def __init__(self) -> None:
        self._held: list[Any] = []  # the finishing chunk and those after it
        self._kinds: dict[Any, bool] = {}  # tool-call index -> whether it reads back
        self._own: dict[Any, int] = {}  # the caller's own calls: index -> index the caller sees

    def parse(self, chunk: Any) -> list[Any]:
        return [chunk]

    def take(self, item: Any) -> list[Any]:
        chunk = self._own_calls_only(item)
        if self._held or _finishes(chunk):
            self._held.append(chunk)
            return []
        return [chunk]

    def message(self, items: list[Any]) -> Message:
        built = stream_chunk_builder(items)  # its calls only: no prompt to count
        return response_message(built) if built is not None else {}

    def again(self) -> list[Any]:
        text = [_finished(c, None) for c in self._held if _has_text(c)]
        self._held, self._kinds, self._own = [], {}, {}
        return text

    def end(self, verdict: Verdict) -> list[Any]:
        if verdict.dropped and not verdict.own:
            return [_finished(c, "stop") for c in self._held]
        return self._held

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
