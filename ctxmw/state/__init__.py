"""Shared state: what must outlive one request, for every process that serves a conversation.

One small interface, :class:`State`, with two backends: :class:`MemoryState` (the default: one
process) and :class:`RedisState` (a fleet: every replica connects to the same Redis). Anything
that must survive between two requests of a conversation, whichever process serves them, goes
through it: the telemetry's previous prompt, strategies' schedule state, the inbox.

The contract, which every backend keeps and ``tests/test_state.py`` checks for both:

- **Values** (:meth:`State.get`, :meth:`State.set`, :meth:`State.delete`): plain ``str``
  values under ``str`` keys, each with a time to live. Last writer wins; a reader sees a whole
  value or none.
- **Notes** (:meth:`State.push_note`, :meth:`State.claim_notes`, :meth:`State.settle`): the
  inbox of a conversation. ``push_note`` returns once the note is stored (that is the
  acknowledgement). ``claim_notes(conversation, claim)`` atomically takes every pending note,
  together with the notes of every unsettled earlier claim of that conversation, and holds them
  under ``claim``: two concurrent callers never both receive one note. ``settle(conversation,
  claim, requeue)`` ends a claim: its notes are gone (delivered) except those in ``requeue``,
  which go back to the pending notes. A claim that is never settled (its process died) is taken
  over by the conversation's next ``claim_notes``: nothing acknowledged is lost. Notes come back
  in the order they were pushed.

A conversation is sequential (an agent sends its next request after the previous answer), which
is what makes "take over unsettled claims" safe: a new request of the conversation means the
earlier one is over for its client.

Adopting it: take a ``State`` argument (default :class:`MemoryState`), build keys with
:func:`key`, keep values small and JSON, and give each a time to live.
"""

from __future__ import annotations

from ctxmw.errors import NotesFull
from ctxmw.state._base import DEFAULT_TTL_S, Note, NoteBounds, State, key
from ctxmw.state.memory import MemoryState
from ctxmw.state.redis import RedisState, open_state

__all__ = [
    "DEFAULT_TTL_S",
    "MemoryState",
    "Note",
    "NoteBounds",
    "NotesFull",
    "RedisState",
    "State",
    "key",
    "open_state",
]
