"""The read-back round of a ``/v1/messages`` or ``/v1/responses`` stream: events, not chunks.

The round is the library's own: :class:`~ctxmw.runtime._readback_stream.ReadbackStream`, whose
decisions are :class:`~ctxmw.runtime._readback.Round`'s. These two routes stream events, each of
a content block (Messages: ``index``) or an output item (Responses: ``output_index``), so the
stream's :class:`~ctxmw.runtime._readback_stream.Wire` is :class:`EventWire`: the events of a
``ctxmw_expand`` block or item are held back, the others pass with their index renumbered from
0 (on across the streams of one round), and the events that end the reply (``message_delta``,
``message_stop``; ``response.completed``) wait for the end of the provider's stream, when the
reply is known:

* it only read back: the waiting events are dropped, and the model's next reply goes on in the
  same stream, without its opening events: the client sees one message;
* otherwise the waiting events pass (a ``response.completed`` without the read-back items; a
  ``message_delta`` whose stop reason is ``end_turn`` when no call is left).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ctxmw.context.readback import READBACK_TOOL_NAME
from ctxmw.proxy._anthropic import chat_reply_of as anthropic_reply
from ctxmw.proxy._anthropic import streamed_message
from ctxmw.proxy._readback import ReadbackPlan, field_of, plain
from ctxmw.proxy._responses import chat_reply_of as responses_reply
from ctxmw.runtime._readback import Verdict
from ctxmw.runtime._readback_stream import ReadbackStream
from ctxmw.runtime.turn import Turn
from ctxmw.types import Message

__all__ = ["EventWire", "event_stream"]

_HEADS = {"message_start", "response.created", "response.in_progress"}
_ENDS = {
    "message_delta",
    "message_stop",
    "response.completed",
    "response.incomplete",
    "response.failed",
}


def event_stream(inner: Any, plan: ReadbackPlan, turn: Turn, rounds: Any) -> ReadbackStream:
    """The client's stream of one request on ``/v1/messages`` or ``/v1/responses``.

    Args:
        inner: the provider's stream (server-sent-event bytes; Responses event objects).
        plan: the request's read-back plan (its route, its prompt).
        turn: gets the splice of read-backs beside the client's own calls.
        rounds: makes the extra calls and answers read-backs (:class:`._readback_hook.Rounds`).
    """
    wire = EventWire(plan.route, rounds)
    return ReadbackStream(inner, plan.prompt, turn, rounds, intercept=True, wire=wire)


class EventWire:
    """The events of one route's streams (see the module docstring).

    Args:
        route: ``anthropic`` (server-sent-event bytes) or ``responses`` (event objects).
        rounds: gets, before each extra call, the reply it appends as the provider sent it.
    """

    def __init__(self, route: str, rounds: Any) -> None:
        self._anthropic, self._rounds = route == "anthropic", rounds
        self._held: list[Any] = []  # the events that end the reply
        self._reads: set[int] = set()  # this stream's indexes of read-back blocks or items
        self._shown: dict[int, int] = {}  # this stream's other indexes -> the client's
        self._next = 0  # the client's next index
        self._text = ""  # an unfinished server-sent event (bytes split anywhere)
        self._first = True
        self._reply: Any = None  # the ended stream's reply, as the route's response

    def parse(self, chunk: Any) -> list[Any]:
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

    def take(self, item: Any) -> list[Any]:
        kind = _kind(item)
        if kind in _HEADS:
            return [self._out(_without_reads(item))] if self._first else []
        if kind in _ENDS:
            self._held.append(item)
            return []
        key = "index" if self._anthropic else "output_index"
        index = field_of(item, key)
        if not isinstance(index, int):
            return [self._out(item)]
        if kind in ("content_block_start", "response.output_item.added") and _starts_read(item):
            self._reads.add(index)
        if index in self._reads:
            return []
        if index not in self._shown:
            self._shown[index] = self._next
            self._next += 1
        return [self._out(_with(item, key, self._shown[index]))]

    def message(self, items: list[Any]) -> Message:
        if self._anthropic:
            self._reply = streamed_message(items)
            chat = anthropic_reply(self._reply)
        else:
            ends = [e for e in items if _kind(e) == "response.output_item.done"]
            self._reply = {"output": [plain(field_of(e, "item")) for e in ends]}
            chat = responses_reply(self._reply)
        message: Message = chat["choices"][0]["message"]
        return message

    def again(self) -> list[Any]:
        self._rounds.reply = self._reply  # what the next call appends, as the provider sent it
        self._held, self._reads, self._shown, self._first = [], set(), {}, False
        return []

    def end(self, verdict: Verdict) -> list[Any]:
        return [self._out(self._ending(e, verdict)) for e in self._held]

    def _out(self, event: Any) -> Any:
        if not self._anthropic:
            return event
        return f"event: {event.get('type')}\ndata: {json.dumps(event)}\n\n".encode()

    def _ending(self, event: Any, verdict: Verdict) -> Any:
        """An ending event without the read-backs (``end_turn`` when no call is left)."""
        if not self._anthropic:
            return _without_reads(event)
        if event.get("type") == "message_delta" and verdict.dropped and not verdict.own:
            return {**event, "delta": {**(event.get("delta") or {}), "stop_reason": "end_turn"}}
        return event


def _kind(event: Any) -> str:
    return str(getattr(field_of(event, "type"), "value", field_of(event, "type")))


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
