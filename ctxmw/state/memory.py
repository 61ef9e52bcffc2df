"""``MemoryState``: the one-process backend (the default).

Every operation runs without awaiting in between, so on one event loop each is atomic; the
interface's promises hold for all the tasks of one process. Values are bounded: past
``max_values``, or past ``max_bytes`` of keys and values, the least recently written is
forgotten, like an expired one.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from ctxmw.errors import NotesFull
from ctxmw.state._base import DEFAULT_TTL_S, Note, NoteBounds, text_bytes

__all__ = ["MemoryState"]


class MemoryState:
    """State kept in this process (see :mod:`ctxmw.state` for the contract).

    Args:
        max_values: values kept at most; the least recently written go first.
        clock: seconds, monotonic; injectable for tests of expiry.
        max_bytes: bytes of keys and values kept at most, the least recently written going
            first; and of the texts of notes waiting, past which a push raises ``NotesFull``.
    """

    def __init__(
        self,
        max_values: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
        *,
        max_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self._values: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._bytes = 0
        self._max_bytes = max_bytes
        self._pending: dict[str, list[Note]] = {}
        self._claims: dict[str, dict[str, list[Note]]] = {}
        self._note_bytes = 0  # of the notes waiting, in every conversation
        self._scope_of: dict[str, str] = {}
        self._scope_bytes: dict[str, int] = {}
        self._seq = itertools.count(1)
        self._max = max_values
        self._clock = clock

    async def get(self, key: str) -> str | None:
        """The value under ``key``, or None."""
        item = self._values.get(key)
        if item is None:
            return None
        deadline, value = item
        if self._clock() >= deadline:
            self._forget(key)
            return None
        return value

    async def set(self, key: str, value: str, ttl_s: int = DEFAULT_TTL_S) -> None:
        """Store ``value`` for ``ttl_s`` seconds."""
        self._forget(key)
        self._values[key] = (self._clock() + ttl_s, value)
        self._bytes += _size(key, value)
        while self._values and (len(self._values) > self._max or self._bytes > self._max_bytes):
            self._forget(next(iter(self._values)))

    async def delete(self, key: str) -> None:
        """Forget ``key``."""
        self._forget(key)

    @property
    def held_bytes(self) -> int:
        """About the bytes of the values kept."""
        return self._bytes

    def _forget(self, key: str) -> None:
        item = self._values.pop(key, None)
        if item is not None:
            self._bytes -= _size(key, item[1])

    async def push_note(
        self, conversation: str, kind: str, text: str, bounds: NoteBounds | None = None
    ) -> Note:
        """Queue a note, within ``bounds`` and this state's ``max_bytes`` of waiting notes."""
        note = Note(next(self._seq), kind, text)
        size = text_bytes(note)
        self._check(conversation, size, bounds)
        self._pending.setdefault(conversation, []).append(note)
        self._note_bytes += size
        if bounds is not None and bounds.scope is not None:
            self._scope_of[conversation] = bounds.scope
            self._scope_bytes[bounds.scope] = self._scope_bytes.get(bounds.scope, 0) + size
        return note

    def _check(self, conversation: str, size: int, bounds: NoteBounds | None) -> None:
        held = self._note_bytes
        if held + size > self._max_bytes:
            raise NotesFull(conversation, "memory_state_bytes", self._max_bytes, held)
        if bounds is None:
            return
        waiting = self._waiting(conversation)
        if len(waiting) + 1 > bounds.conversation_notes:
            raise NotesFull(
                conversation, "conversation_notes", bounds.conversation_notes, len(waiting)
            )
        held = sum(map(text_bytes, waiting))
        if held + size > bounds.conversation_note_bytes:
            limit = bounds.conversation_note_bytes
            raise NotesFull(conversation, "conversation_note_bytes", limit, held)
        held = self._scope_bytes.get(bounds.scope, 0) if bounds.scope is not None else 0
        if bounds.scope is not None and held + size > bounds.scope_note_bytes:
            raise NotesFull(conversation, "scope_note_bytes", bounds.scope_note_bytes, held)

    async def claim_notes(
        self, conversation: str, claim: str, limit: int | None = None
    ) -> list[Note]:
        """Take the pending notes and every unsettled claim's notes under ``claim``: the
        ``limit`` oldest and every abort; the rest stay pending."""
        waiting = self._waiting(conversation)
        self._pending.pop(conversation, None)
        self._claims.pop(conversation, None)
        taken, left = _split(waiting, limit)
        if left:
            self._pending[conversation] = left
        if taken:
            self._claims[conversation] = {claim: list(taken)}
        return taken

    async def settle(self, conversation: str, claim: str, requeue: Sequence[Note] = ()) -> None:
        """End ``claim``; ``requeue`` goes back to the pending notes."""
        claims = self._claims.get(conversation, {})
        done = claims.pop(claim, [])
        if not claims:
            self._claims.pop(conversation, None)
        if requeue:
            pending = self._pending.setdefault(conversation, [])
            pending.extend(requeue)
            pending.sort(key=lambda note: note.seq)
        self._release(conversation, sum(map(text_bytes, done)) - sum(map(text_bytes, requeue)))

    def _release(self, conversation: str, size: int) -> None:
        size = max(size, 0)
        self._note_bytes = max(self._note_bytes - size, 0)
        scope = self._scope_of.get(conversation)
        if scope is not None:
            self._scope_bytes[scope] = max(self._scope_bytes.get(scope, 0) - size, 0)
        if not self._waiting(conversation):
            self._scope_of.pop(conversation, None)

    def _waiting(self, conversation: str) -> list[Note]:
        notes = list(self._pending.get(conversation, []))
        for claimed in self._claims.get(conversation, {}).values():
            notes.extend(claimed)
        return _sorted(notes)

    async def pending_notes(self, conversation: str) -> list[Note]:
        """Notes not yet delivered, in push order."""
        return self._waiting(conversation)

    async def aclose(self) -> None:
        """Nothing to release."""


def _size(key: str, value: str) -> int:
    # Both strings (about 50 bytes each plus their text) and the entry around them.
    return len(key) + len(value) + 200


def _sorted(notes: Sequence[Note]) -> list[Note]:
    return sorted(notes, key=lambda note: note.seq)


def _split(notes: list[Note], limit: int | None) -> tuple[list[Note], list[Note]]:
    """The notes a claim takes (the ``limit`` oldest and every abort) and those it leaves."""
    if limit is None or len(notes) <= limit:
        return notes, []
    taken = [n for i, n in enumerate(notes) if i < limit or n.kind == "abort"]
    left = [n for i, n in enumerate(notes) if i >= limit and n.kind != "abort"]
    return taken, left
