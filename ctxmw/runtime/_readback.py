"""The read-back round: ctxmw answers the model's ``ctxmw_expand`` calls itself, on every path.

Every model call of a conversation whose strategies can show read-back handles
(:func:`~ctxmw.strategies._chain.reads_back`) declares
:data:`~ctxmw.context.readback.READBACK_TOOL` after the caller's tools (:func:`tools_to_send`),
and every reply is looked at before the caller gets it (:func:`read_back`; streams:
:class:`~ctxmw.runtime._readback_stream.ReadbackStream`):

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
    "Rounds",
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
    sent, answered = prompt, list[Message]()
    strip = strip or without_readbacks
    for n in range(1, READBACK_ROUNDS + 3):
        message = message_of(response)
        own, reads = split_readbacks(tool_calls_of(message))
        if not reads:
            break
        if own:
            answers = await rounds.answer(reads, refuse=False)
            splice = Readbacks.of(Splice(message, tuple(answers)))
            return _own_only(strip(response), turn, answered, splice)
        if n > READBACK_ROUNDS + 1:
            warn_once()
            return _own_only(strip(response), turn, answered, None)
        answers = await rounds.answer(reads, refuse=n > READBACK_ROUNDS)
        answered += [message, *answers]
        sent = [*sent, message, *answers]
        response = await rounds.again(sent)
    return _own_only(response, turn, answered, None)


def _own_only(response: Any, turn: Turn, answered: Messages, splice: Readbacks | None) -> Any:
    """Record the reply's read-backs in the turn; ``response`` is what the caller gets."""
    if answered:
        turn.add_readbacks(Readbacks(tuple(answered)))
    if splice is not None:
        turn.add_readbacks(splice)
    return response


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
