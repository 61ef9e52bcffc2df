"""``MemoryState``: the one-process backend (the default).

Every operation runs without awaiting in between, so on one event loop each is atomic; the
interface's promises hold for all the tasks of one process. Values are bounded: past
``max_values`` the least recently written is forgotten, like an expired one.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from ctxmw.state._base import DEFAULT_TTL_S, Note

__all__ = ["MemoryState"]


class MemoryState:
    """State kept in this process (see :mod:`ctxmw.state` for the contract).

    Args:
        max_values: values kept at most; the least recently written go first.
        clock: seconds, monotonic; injectable for tests of expiry.
    """

    def __init__(
        self, max_values: int = 100_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._values: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._pending: dict[str, list[Note]] = {}
        self._claims: dict[str, dict[str, list[Note]]] = {}
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
            del self._values[key]
            return None
        return value

    async def set(self, key: str, value: str, ttl_s: int = DEFAULT_TTL_S) -> None:
        """Store ``value`` for ``ttl_s`` seconds."""
        self._values.pop(key, None)
        self._values[key] = (self._clock() + ttl_s, value)
        while len(self._values) > self._max:
            self._values.popitem(last=False)

    async def delete(self, key: str) -> None:
        """Forget ``key``."""
        self._values.pop(key, None)

    async def push_note(self, conversation: str, kind: str, text: str) -> Note:
        """Queue a note."""
        note = Note(next(self._seq), kind, text)
        self._pending.setdefault(conversation, []).append(note)
        return note

    async def claim_notes(self, conversation: str, claim: str) -> list[Note]:
        """Take the pending notes and every unsettled claim's notes under ``claim``."""
        taken = self._pending.pop(conversation, [])
        for notes in self._claims.pop(conversation, {}).values():
            taken.extend(notes)
        taken.sort(key=lambda note: note.seq)
        if taken:
            self._claims[conversation] = {claim: list(taken)}
        return taken

    async def settle(self, conversation: str, claim: str, requeue: Sequence[Note] = ()) -> None:
        """End ``claim``; ``requeue`` goes back to the pending notes."""
        claims = self._claims.get(conversation, {})
        claims.pop(claim, None)
        if not claims:
            self._claims.pop(conversation, None)
        if requeue:
            pending = self._pending.setdefault(conversation, [])
            pending.extend(requeue)
            pending.sort(key=lambda note: note.seq)

    async def pending_notes(self, conversation: str) -> list[Note]:
        """Notes not yet delivered, in push order."""
        notes = list(self._pending.get(conversation, []))
        for claimed in self._claims.get(conversation, {}).values():
            notes.extend(claimed)
        return _sorted(notes)

    async def aclose(self) -> None:
        """Nothing to release."""


def _sorted(notes: Sequence[Note]) -> list[Note]:
    return sorted(notes, key=lambda note: note.seq)
