"""The state interface and the note record (see :mod:`ctxmw.state`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["DEFAULT_TTL_S", "Note", "NoteBounds", "State", "key", "text_bytes"]

DEFAULT_TTL_S = 7 * 24 * 3600
"""How long a conversation's state lives after its last write: a week."""

_PREFIX = "ctxmw"


def key(conversation: str, part: str) -> str:
    """The key of one part of a conversation's state: ``ctxmw:{<conversation>}:<part>``.

    The braces are a Redis Cluster hash tag: every key of one conversation lands on one shard,
    so the scripts that touch several of them stay atomic there too.
    """
    return f"{_PREFIX}:{{{conversation}}}:{part}"


@dataclass(frozen=True, slots=True)
class Note:
    """One inbox note of a conversation.

    Attributes:
        seq: the order of pushes (unique per backend); notes are returned sorted by it.
        kind: ``"note"`` (shown to the model as a user message) or ``"abort"`` (stops the
            conversation's next request with an error).
        text: the note's text, or the abort's reason.
    """

    seq: int
    kind: str
    text: str

    def to_json(self) -> str:
        """The stored form."""
        return json.dumps({"seq": self.seq, "kind": self.kind, "text": self.text})

    @classmethod
    def from_json(cls, raw: str | bytes) -> Note:
        """Read the stored form back."""
        data: dict[str, Any] = json.loads(raw)
        return cls(int(data["seq"]), str(data["kind"]), str(data["text"]))


@dataclass(frozen=True, slots=True)
class NoteBounds:
    """What :meth:`State.push_note` may leave waiting (pushed, not yet delivered); a push that
    would go past a bound raises :class:`~ctxmw.errors.NotesFull` and stores nothing.

    Attributes:
        conversation_notes: notes waiting in the conversation.
        conversation_note_bytes: the UTF-8 bytes of their texts.
        scope: the group of conversations the note counts in (a proxy's team, user or key);
            None: none.
        scope_note_bytes: the UTF-8 bytes of the texts waiting in all of the scope's
            conversations. Counted from the pushes and the deliveries; notes that expire
            undelivered still count until the scope's count expires, a time to live after its
            last push.
    """

    conversation_notes: int
    conversation_note_bytes: int
    scope: str | None = None
    scope_note_bytes: int = 0


def text_bytes(note: Note) -> int:
    """What a note counts in the bounds: its text's UTF-8 bytes."""
    return len(note.text.encode("utf-8", "surrogatepass"))


def sort_notes(raw: Sequence[str | bytes]) -> list[Note]:
    """Stored notes in push order."""
    return sorted((Note.from_json(item) for item in raw), key=lambda note: note.seq)


@runtime_checkable
class State(Protocol):
    """What must outlive a request, shared by every process that serves a conversation."""

    async def get(self, key: str) -> str | None:
        """The value under ``key``, or None when there is none (or it expired)."""
        ...

    async def set(self, key: str, value: str, ttl_s: int = DEFAULT_TTL_S) -> None:
        """Store ``value`` under ``key`` for ``ttl_s`` seconds."""
        ...

    async def delete(self, key: str) -> None:
        """Forget ``key``."""
        ...

    async def push_note(
        self, conversation: str, kind: str, text: str, bounds: NoteBounds | None = None
    ) -> Note:
        """Queue a note for the conversation's next request; returned once stored.

        Raises:
            NotesFull: the note would take what waits past one of ``bounds`` (nothing stored).
        """
        ...

    async def claim_notes(
        self, conversation: str, claim: str, limit: int | None = None
    ) -> list[Note]:
        """Atomically take the pending notes (and unsettled earlier claims) under ``claim``:
        the ``limit`` oldest and every abort, the rest left pending, in order."""
        ...

    async def settle(self, conversation: str, claim: str, requeue: Sequence[Note] = ()) -> None:
        """End ``claim``: its notes are delivered, except ``requeue``, which go back."""
        ...

    async def pending_notes(self, conversation: str) -> list[Note]:
        """The notes waiting (pending or claimed but unsettled), in push order; read-only."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...
