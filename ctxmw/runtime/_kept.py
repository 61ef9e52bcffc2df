"""A stateless call's paid answer whose write failed: kept, returned again, never asked twice.

``ctxmw.acompletion`` raises :class:`~ctxmw.errors.SaveFileWriteError` when the round it made
cannot be written (a full disk). The caller has no session to retry on, and asking again would
pay for the answer twice. So the answer stays in the conversation's record in memory (the rounds
whose write failed: :attr:`~ctxmw.runtime._record.Record.unsaved`) and on the error
(``.response``), and the next call with the same save_file, in this process:

* that continues the conversation with the answer writes it before its own round;
* that repeats the call (the caller's history is the record without the answer) returns the
  same response without calling the model, and writes it.

The record is held in the bounded registry of conversations: if it is forgotten before the
next call (1,024 conversations later), the answer survives only on the error.
"""

from __future__ import annotations

from typing import Any

from ctxmw.errors import SaveFileWriteError
from ctxmw.runtime.conversations import Conversation
from ctxmw.runtime.turn import Turn

__all__ = ["keep", "repeated"]


def repeated(conversation: Conversation, turn: Turn) -> Any | None:
    """The kept response when ``turn`` repeats the call that paid for it, else None.

    A repeat is planned as an edit dropping exactly the kept answer; that edit is cancelled,
    so the turn writes the answer with nothing after it.
    """
    kept, conversation.kept = conversation.kept, None
    messages = conversation.record.messages
    if kept is None or not conversation.record.unsaved or not messages:
        return None
    answer, response = kept
    edit, size = turn.edit, len(messages)
    if messages[-1] is not answer or edit is None or turn.unwritten:
        return None
    if edit.ops != ((size - 1, 1, 0),) or edit.inserted:
        return None
    turn.edit = None
    return response


def keep(conversation: Conversation, error: SaveFileWriteError, reply: Any) -> SaveFileWriteError:
    """The error to raise for a stateless call whose write failed; its answer kept for the next.

    ``reply`` is the response a repeated call was returning (the error does not carry it yet).
    """
    if error.response is None and reply is not None:
        error = error.for_caller(reply)
    messages = conversation.record.messages
    if error.response is not None and conversation.record.unsaved and messages:
        conversation.kept = (messages[-1], error.response)
    return error
