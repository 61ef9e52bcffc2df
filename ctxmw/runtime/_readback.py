"""The read-back round: ctxmw answers the model's ``ctxmw_expand`` calls itself, on every path.

Every model call of a conversation whose strategies can show read-back handles
(:func:`~ctxmw.strategies._chain.reads_back`) declares
:data:`~ctxmw.context.readback.READBACK_TOOL` after the caller's tools (:func:`tools_to_send`),
and every reply is looked at before the caller gets it, by one :class:`Round` whichever the
path: :func:`read_back` for a whole reply, :class:`~ctxmw.runtime._readback_stream.ReadbackStream`
for a stream (chat chunks, or the LiteLLM Proxy's Messages and Responses events):

* a reply whose tool calls all read back: ctxmw answers each one
  (:func:`~ctxmw.context.readback.answer`, from the strategies' input) and calls the model again
  with the same prompt plus the reply and the answers at its end (the strategies do not run
  again: the prompt only grows at its end, so the provider's cache serves it). Up to
  :data:`READBACK_ROUNDS` times in a row; then once more with every read-back refused (a
  stable text saying so); a reply that still reads back loses its read-backs. The caller gets
  the last reply only. These rounds are recorded in the save_file beside the reply, never
  sent again;
* a reply that also calls the caller's tools: the caller gets its own calls only, and the
  read-backs, answered at once, become a :class:`~ctxmw.runtime._splices.Splice` that the
  next prompts carry.

Each extra call has its own telemetry record, marked ``readback``.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ctxmw.context.readback import (
    READBACK_TOOL,
    READBACK_TOOL_NAME,
    is_readback,
    split_readbacks,
)
from ctxmw.errors import UsageError
from ctxmw.messages.form import message_dict, response_message, tool_calls_of
from ctxmw.runtime._splices import Readbacks, Splice
from ctxmw.runtime.turn import Turn
from ctxmw.types import Message, Messages

__all__ = [
    "READBACK_ROUNDS",
    "Round",
    "Rounds",
    "Verdict",
    "check_tool_names",
    "read_back",
    "refusal",
    "set_field",
    "tools_to_send",
    "warn_once",
    "without_readbacks",
]

logger = logging.getLogger("ctxmw")

READBACK_ROUNDS = 3
"""Replies in a row that only read back and are answered; the next one's read-backs are refused,
and a reply after that which still reads back loses its read-backs."""

_warned: set[str] = set()


class Rounds(Protocol):
    """What the read-back round needs from the loop that made the call."""

    async def again(self, sent: Messages) -> Any:
        """One more model call, ``sent`` as its prompt, recorded as a read-back."""
        ...

    async def answer(self, calls: Sequence[Mapping[str, Any]], *, refuse: bool) -> Messages:
        """The ``tool`` messages answering ``calls`` (refused ones say so)."""
        ...


def tools_to_send(
    schemas: Sequence[dict[str, Any]], prompt: Sequence[Message], reads_back: bool
) -> list[dict[str, Any]]:
    """The tools a call sends: the caller's, then the read-back tool when the chain shows
    handles and the call has tools or tool results (the same dict, at the same place, on
    every call of such a conversation)."""
    if reads_back and (schemas or any(m.get("role") == "tool" for m in prompt)):
        return [*schemas, READBACK_TOOL]
    return list(schemas)


def check_tool_names(names: set[str], reads_back: bool) -> None:
    """Refuse a caller tool named ``ctxmw_expand`` where ctxmw declares and answers it.

    Raises:
        UsageError: ``reads_back`` and one of ``names`` is ``ctxmw_expand``.
    """
    if reads_back and READBACK_TOOL_NAME in names:
        raise UsageError(
            f"A tool is already named {READBACK_TOOL_NAME!r}; ctxmw declares that tool and "
            "answers it itself when the strategies show read-back handles. Rename yours, or "
            "turn read-back off (readback=False, or a strategy list without handles)."
        )


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the round makes of one reply (:meth:`Round.after`).

    Attributes:
        again: the next call's prompt (the reply and its answers at its end), or None: the
            reply is the caller's.
        dropped: the caller gets the reply without its read-backs.
        own: the reply calls the caller's own tools.
    """

    again: Messages | None = None
    dropped: bool = False
    own: bool = False


class Round:
    """The round's decisions, one reply at a time: the one implementation that a whole reply
    (:func:`read_back`), a chat stream and the proxy's event streams
    (:class:`~ctxmw.runtime._readback_stream.ReadbackStream`) all drive; they differ only in
    how they read a reply and what they show the caller.

    Args:
        prompt: the prompt the strategies produced.
        turn: gets the answered read-backs (the save_file's record) and the splice to keep.
        rounds: answers read-backs.
    """

    def __init__(self, prompt: Messages, turn: Turn, rounds: Rounds) -> None:
        self.sent, self._turn, self._rounds = prompt, turn, rounds
        self._answered: Messages = []
        self._n = 1

    async def after(self, message: Message) -> Verdict:
        """The verdict on the reply whose assistant message (chat form) is ``message``: its
        read-backs answered (refused past :data:`READBACK_ROUNDS`) and the model called again,
        or kept beside the caller's own calls, or dropped; see the module docstring."""
        own, reads = split_readbacks(tool_calls_of(message))
        if reads and not own and self._n <= READBACK_ROUNDS + 1:
            answers = await self._rounds.answer(reads, refuse=self._n > READBACK_ROUNDS)
            self._answered += [message, *answers]
            self.sent = [*self.sent, message, *answers]
            self._n += 1
            return Verdict(again=self.sent)
        if self._answered:
            self._turn.add_readbacks(Readbacks(tuple(self._answered)))
        if reads and own:
            answers = await self._rounds.answer(reads, refuse=False)
            self._turn.add_readbacks(Readbacks.of(Splice(message, tuple(answers))))
        elif reads:
            warn_once()
        return Verdict(dropped=bool(reads), own=bool(own))


async def read_back(
    response: Any,
    prompt: Messages,
    turn: Turn,
    rounds: Rounds,
    *,
    message_of: Callable[[Any], Message] = response_message,
    strip: Callable[[Any], Any] | None = None,
) -> Any:
    """The reply the caller gets for ``response``: read-backs answered, the model called again
    while a reply only reads back (see the module docstring).

    ``message_of`` reads a reply's assistant message in chat form and ``strip`` removes its
    read-backs (default: :func:`without_readbacks`): the proxy's routes answer in other shapes.
    """
    round_ = Round(prompt, turn, rounds)
    while (verdict := await round_.after(message_of(response))).again is not None:
        response = await rounds.again(verdict.again)
    return (strip or without_readbacks)(response) if verdict.dropped else response


def without_readbacks(response: Any) -> Any:
    """A copy of ``response`` whose first choice keeps only the caller's own tool calls
    (``finish_reason`` ``"stop"`` when none is left); the original is not changed."""
    response = copy.deepcopy(response)
    choice = response.choices[0]
    message = choice.message
    calls = message.get("tool_calls") if isinstance(message, dict) else message.tool_calls
    own = [c for c in calls or () if not _reads(c)]
    if isinstance(message, dict):
        message["tool_calls"] = own or None
    else:
        message.tool_calls = own or None
    if not own:
        set_field(choice, "finish_reason", "stop")
    return response


def _reads(call: Any) -> bool:
    return is_readback(message_dict(call))


def set_field(obj: Any, name: str, value: Any) -> None:
    """Set ``name`` on a litellm object, or a key of a dict (a duck-typed response's)."""
    if isinstance(obj, dict):
        obj[name] = value
    else:
        setattr(obj, name, value)


def refusal(call: Mapping[str, Any]) -> Message:
    """The answer of a read-back over the limit: a stable text, never the lines."""
    text = (
        f"[{READBACK_TOOL_NAME}: not answered: {READBACK_ROUNDS} read-backs in a row is the "
        "limit. Go on with what you have read, or run the tool again.]"
    )
    return {"role": "tool", "tool_call_id": str(call.get("id", "")), "content": text}


def warn_once() -> None:
    """One WARNING per process: a reply lost its read-backs over the limit."""
    message = (
        f"ctxmw: the model kept calling {READBACK_TOOL_NAME} after {READBACK_ROUNDS} answered "
        "read-backs and one refused: its last reply is returned without them (this warning "
        "is shown once)."
    )
    if message not in _warned:
        _warned.add(message)
        logger.warning(message)
