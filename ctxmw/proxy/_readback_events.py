"""The read-back round of a ``/v1/messages`` or ``/v1/responses`` stream: events, not chunks.

The chat stream's round (:class:`~ctxmw.runtime._readback_stream.ReadbackStream`) reads chat
chunks; these two routes stream events, each of a content block (Messages: ``index``) or an
output item (Responses: ``output_index``). :class:`EventStream` does the same with them: the
events of a ``ctxmw_expand`` block or item are held back, the others pass with their index
renumbered from 0 (on across the streams of one round), and the events that end the reply
(``message_delta``, ``message_stop``; ``response.completed``) wait for the end of the
provider's stream, when the reply is known:

* it only read back: the read-backs are answered, the waiting events dropped, and the model's
  next reply (called through the router, streamed) goes on in the same stream, without its
  opening events: the client sees one message;
* otherwise the waiting events pass (a ``response.completed`` without the read-back items);
  read-backs beside the client's own calls are kept for the next prompts, as for a whole reply.
"""

from __future__ import annotations

import copy
import json
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from ctxmw.context.readback import READBACK_TOOL_NAME, split_readbacks
from ctxmw.messages.form import tool_calls_of
from ctxmw.proxy._anthropic import chat_reply_of as anthropic_reply
from ctxmw.proxy._anthropic import streamed_message
from ctxmw.proxy._readback import ReadbackPlan, field_of, plain
from ctxmw.proxy._responses import chat_reply_of as responses_reply
from ctxmw.runtime._readback import READBACK_ROUNDS, warn_once
from ctxmw.runtime._splices import Readbacks, Splice
from ctxmw.runtime.turn import Turn
from ctxmw.types import Message, Messages

__all__ = ["EventStream"]

_HEADS = {"message_start", "response.created", "response.in_progress"}
_ENDS = {
    "message_delta",
    "message_stop",
    "response.completed",
    "response.incomplete",
    "response.failed",
}


class EventStream:
    """The client's stream of one request on ``/v1/messages`` or ``/v1/responses``.

    Args:
        inner: the provider's stream (server-sent-event bytes; Responses event objects).
        plan: the request's read-back plan (its route, its prompt).
        turn: gets the splice of read-backs beside the client's own calls.
        rounds: makes the extra calls and answers read-backs (:class:`._readback_hook.Rounds`).
    """

    def __init__(self, inner: Any, plan: ReadbackPlan, turn: Turn, rounds: Any) -> None:
        self._plan, self._turn, self._rounds = plan, turn, rounds
        self._anthropic = plan.route == "anthropic"
        self._iter: AsyncIterator[Any] = inner.__aiter__()
        self._ready: deque[Any] = deque()
        self._raw: list[Any] = []  # this stream's events, parsed, as they came
        self._held: list[Any] = []  # the events that end the reply
        self._reads: set[int] = set()  # this stream's indexes of read-back blocks or items
        self._shown: dict[int, int] = {}  # this stream's other indexes -> the client's
        self._next = 0  # the client's next index
        self._sent: Messages = list(plan.prompt)
        self._text = ""  # an unfinished server-sent event (bytes split anywhere)
        self._n, self._done, self._first = 1, False, True

    def __aiter__(self) -> EventStream:
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
            for event in self._events(chunk):
                self._take(event)
        return self._ready.popleft()

    async def aclose(self) -> None:
        """Stop: close the provider stream being read."""
        self._done = True
        close = getattr(self._iter, "aclose", None)
        if close is not None:
            await close()

    def _events(self, chunk: Any) -> list[Any]:
        if not self._anthropic:
            return [chunk]
        self._text += chunk.decode("utf-8", "replace") if isinstance(chunk, bytes) else str(chunk)
        *complete, self._text = self._text.replace("\r\n", "\n").split("\n\n")
        out = []
        for block in complete:
            data = [line[5:].strip() for line in block.splitlines() if line.startswith("data:")]
            if data:
                out.append(json.loads("".join(data)))
        return out

    def _take(self, event: Any) -> None:
        self._raw.append(event)
        kind = str(getattr(field_of(event, "type"), "value", field_of(event, "type")))
        if kind in _HEADS:
            if self._first:
                self._ready.append(self._out(_without_reads(event)))
            return
        if kind in _ENDS:
            self._held.append(event)
            return
        key = "index" if self._anthropic else "output_index"
        index = field_of(event, key)
        if not isinstance(index, int):
            self._ready.append(self._out(event))
            return
        if kind in ("content_block_start", "response.output_item.added") and _starts_read(event):
            self._reads.add(index)
        if index in self._reads:
            return
        if index not in self._shown:
            self._shown[index] = self._next
            self._next += 1
        self._ready.append(self._out(_with(event, key, self._shown[index])))

    def _out(self, event: Any) -> Any:
        if not self._anthropic:
            return event
        return f"event: {event.get('type')}\ndata: {json.dumps(event)}\n\n".encode()

    async def _ended(self) -> None:
        """The provider's stream ended: answer and go on, or finish."""
        await self._rounds_recorded()
        message, reply = self._reply()
        own, reads = split_readbacks(tool_calls_of(message))
        if reads and not own and self._n <= READBACK_ROUNDS + 1:
            answers = await self._rounds.answer(reads, refuse=self._n > READBACK_ROUNDS)
            self._sent = [*self._sent, message, *answers]
            self._rounds.reply = reply  # what the next call appends, as the provider sent it
            inner = await self._rounds.again(self._sent)
            self._iter = inner.__aiter__()
            self._raw, self._held, self._reads, self._shown = [], [], set(), {}
            self._n, self._first = self._n + 1, False
            return
        if reads and own:
            answers = await self._rounds.answer(reads, refuse=False)
            self._turn.add_readbacks(Readbacks.of(Splice(message, tuple(answers))))
        elif reads:
            warn_once()
        self._ready.extend(self._out(self._ending(e, own=bool(own))) for e in self._held)
        self._done = True

    async def _rounds_recorded(self) -> None:
        recorded = getattr(self._rounds, "recorded", None)
        if recorded is not None:
            await recorded(self._raw, None)

    def _reply(self) -> tuple[Message, Any]:
        """The reply this stream made, in chat form and as the route's response."""
        if self._anthropic:
            built = streamed_message(self._raw)
            message: Message = anthropic_reply(built)["choices"][0]["message"]
            return message, built
        items = [
            plain(field_of(e, "item"))
            for e in self._raw
            if str(getattr(field_of(e, "type"), "value", field_of(e, "type")))
            == "response.output_item.done"
        ]
        message = responses_reply({"output": items})["choices"][0]["message"]
        return message, {"output": items}

    def _ending(self, event: Any, *, own: bool) -> Any:
        """An ending event without the read-backs (the reply's stop reason when none is left)."""
        if self._anthropic:
            if event.get("type") == "message_delta" and not own:
                delta = {**(event.get("delta") or {}), "stop_reason": "end_turn"}
                return {**event, "delta": delta}
            return event
        return _without_reads(event)


def _without_reads(event: Any) -> Any:
    """A Responses event whose ``response`` lists no read-back item (a copy when changed)."""
    response = field_of(event, "response")
    output = field_of(response, "output")
    if not isinstance(output, list) or not any(_starts_read({"item": i}) for i in output):
        return event
    kept = [i for i in output if not _starts_read({"item": i})]
    if isinstance(event, dict):
        return {**event, "response": {**response, "output": kept}}
    event = copy.deepcopy(event)
    event.response.output = kept
    return event


def _starts_read(event: Any) -> bool:
    block = field_of(event, "content_block")
    if block is None:
        block = field_of(event, "item")
    return bool(
        field_of(block, "type") in ("tool_use", "function_call")
        and field_of(block, "name") == READBACK_TOOL_NAME
    )


def _with(event: Any, key: str, index: int) -> Any:
    if field_of(event, key) == index:
        return event
    if isinstance(event, dict):
        return {**event, key: index}
    return event.model_copy(update={key: index})
