"""The state interface and the note record (see :mod:`ctxmw.state`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["DEFAULT_TTL_S", "Note", "State", "key"]

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

    async def push_note(self, conversation: str, kind: str, text: str) -> Note:
        """Queue a note for the conversation's next request; returned once stored."""
        ...

    async def claim_notes(self, conversation: str, claim: str) -> list[Note]:
        """Atomically take the pending notes (and unsettled earlier claims) under ``claim``."""
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
