"""Per-message digests of one session's calls, computed only for the messages that are new.

A call is made of a few lists: the caller's transcript, each strategy's output, the payload
sent. Each has a *slot* holding what the previous call's list of that name was: the list itself
(references: its messages are mostly the transcript's own dicts, alive anyway) and, per position,
the digest, whether the message is a system message and whether it carries a ``cache_control``
mark. A new list is compared with its slot by identity, position by position, in C
(``map(operator.is_)``); only the positions whose object changed are looked at in Python: a
message already digested in this call (the same dict in the transcript, a strategy's output and
the payload) is reused, and only never-seen objects are serialised. When a list moved (a message
removed or inserted before others) the slot is searched by object identity once, from its first
changed position on.

Nothing outlives the next call of the same slot: memory stays one call's lists per slot, not a
cache of every message object ever seen (the old identity cache kept up to twice the live ones
plus a thousand). Equality alone never reuses a digest: two equal dicts may differ in key order,
which the provider sees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, islice
from operator import is_, is_not, not_
from typing import Any

import anyio.lowlevel

from ctxmw.history._compare import identical_prefix
from ctxmw.messages.canonical import has_cache_mark, message_digest

__all__ = ["DigestSlots", "Extension", "SlotView"]

# Past this many changed positions, one identity index of the previous list is cheaper than
# digesting the moved messages again.
_REINDEX = 32


@dataclass(frozen=True, slots=True)
class SlotView:
    """One list's per-message facts, as :meth:`DigestSlots.digests` computed them.

    Attributes:
        items: the list (held until the slot's next call).
        digests: per-message digests (shared: do not modify).
        system: per message, 1 for a system message.
        marked: per message, 1 when it carries a ``cache_control`` mark.
    """

    items: list[Any]
    digests: list[bytes]
    system: bytearray
    marked: bytearray

    @property
    def has_system(self) -> bool:
        """Whether any message of the list is a system message."""
        return 1 in self.system

    def marked_positions(self) -> set[int]:
        """Indices of the messages that carry a ``cache_control`` mark."""
        found: set[int] = set()
        at = self.marked.find(1)
        while at >= 0:
            found.add(at)
            at = self.marked.find(1, at + 1)
        return found


class DigestSlots:
    """The slots of one session (see the module docstring). Call :meth:`end_call` once a call."""

    def __init__(self) -> None:
        self._slots: dict[str, SlotView] = {}
        self._fresh: dict[int, tuple[bytes, int, int]] = {}
        self._lists: dict[int, tuple[object, SlotView]] = {}
        self._used: set[str] = set()

    def digests(self, slot: str, messages: Sequence[Mapping[str, Any]]) -> SlotView:
        """The facts of ``messages``, remembered as ``slot``'s list for the next call."""
        known = self._known(slot, messages)
        if known is not None:
            return known
        view, changed, moved = self._start(slot, messages)
        self._fill(view, changed, moved)
        return view

    async def digests_chunked(
        self, slot: str, messages: Sequence[Mapping[str, Any]], chunk: int
    ) -> SlotView:
        """:meth:`digests`, giving the loop back after every ``chunk`` positions looked at.

        For a list with many never-seen messages (a first call on a long transcript): a later
        :meth:`digests` of the same list in the same call finds the view ready.
        """
        known = self._known(slot, messages)
        if known is not None:
            return known
        view, changed, moved = self._start(slot, messages)
        for start in range(0, len(changed), chunk):
            self._fill(view, changed[start : start + chunk], moved)
            if len(changed) > chunk:  # a warm call's few new messages never wait
                await anyio.lowlevel.checkpoint()
        return view

    def keep(self, slot: str) -> None:
        """Count ``slot`` as used by this call (see :meth:`end_call`) without digesting it:
        a list that will be digested later, if ever, is compared with the slot's view then."""
        self._used.add(slot)

    def end_lookups(self) -> None:
        """Forget the lookups made since the last call ended, dropping no slot: after lists
        were digested between calls (an export)."""
        self._fresh.clear()
        self._lists.clear()
        self._used.clear()

    def end_call(self, prefix: str = "") -> None:
        """End a call: forget the call's own lookups, and the slots named ``prefix...`` that
        this call did not use (a strategy no longer in the chain)."""
        for name in [n for n in self._slots if n.startswith(prefix) and n not in self._used]:
            del self._slots[name]
        self.end_lookups()

    def _known(self, slot: str, messages: Sequence[Mapping[str, Any]]) -> SlotView | None:
        self._used.add(slot)
        known = self._lists.get(id(messages))
        if known is not None and known[0] is messages and len(known[1].items) == len(messages):
            self._slots[slot] = known[1]  # the same list twice in one call (a strategy passed)
            return known[1]
        return None

    def _start(
        self, slot: str, messages: Sequence[Mapping[str, Any]]
    ) -> tuple[SlotView, Sequence[int], _Moved]:
        """The slot's new view with the unchanged positions filled in, the positions still to
        fill, and where a moved message sat in the previous list."""
        # A copy: the caller may extend its own list in place before the next call.
        view, changed, old = self._build(self._slots.get(slot), list(messages))
        self._slots[slot] = view
        self._lists[id(messages)] = (messages, view)
        if old is None or len(changed) <= _REINDEX:
            return view, changed, None
        # Only the previous list from the first changed position on: a message that moved
        # (a removal or an insertion before it) sat there, and the unchanged head stays unread.
        first = changed[0]
        at = dict(zip(map(id, old.items[first:]), range(first, len(old.items)), strict=True))
        return view, changed, (old, at)

    def _build(
        self, old: SlotView | None, items: list[Any]
    ) -> tuple[SlotView, Sequence[int], SlotView | None]:
        n = len(items)
        if old is None:
            return SlotView(items, [b""] * n, bytearray(n), bytearray(n)), range(n), None
        kept = min(len(old.items), n)
        if all(map(is_, old.items, items)):  # the usual call: the same list, maybe extended
            changed: Sequence[int] = range(kept, n)
        else:
            same = map(is_, old.items, items)
            changed = [*compress(range(kept), map(not_, same)), *range(kept, n)]
        digests = old.digests[:n]
        digests.extend([b""] * (n - len(digests)))
        system, marked = old.system[:n], old.marked[:n]
        system.extend(bytes(n - len(system)))
        marked.extend(bytes(n - len(marked)))
        return SlotView(items, digests, system, marked), changed, old

    def _fill(self, view: SlotView, positions: Sequence[int], moved: _Moved) -> None:
        for i in positions:
            message = view.items[i]
            key = id(message)
            facts = self._fresh.get(key)
            if facts is None:
                j = moved[1].get(key) if moved is not None else None
                if j is not None and moved is not None:
                    old = moved[0]
                    facts = old.digests[j], old.system[j], old.marked[j]
                else:
                    facts = _facts(message)
                self._fresh[key] = facts
            view.digests[i], view.system[i], view.marked[i] = facts


_Moved = tuple[SlotView, dict[int, int]] | None
"""The previous list and, per message object id, its position there (None: not indexed)."""


def _facts(message: Mapping[str, Any]) -> tuple[bytes, int, int]:
    role = int(message.get("role") == "system")
    return message_digest(message), role, int(has_cache_mark(message))


class Extension:
    """Whether a call's list extends the previous call's list of the same place, found without
    digesting either: the same objects position by position (one pass in C), and only where an
    object differs, the digests of the two (each object digested once per :class:`Extension`,
    the loop given back after every ``chunk`` digests). Stops at the first position that differs.

    Use one per comparison of two calls: it remembers digests by object id, valid only while
    the lists it was handed live.
    """

    def __init__(self, chunk: int) -> None:
        self._chunk = chunk
        self._digests: dict[int, bytes] = {}
        # The first digest gives the loop back too: digests made before it in the same step
        # (the payload's) do not add to the first chunk.
        self._since_checkpoint = chunk

    async def holds(
        self, old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]
    ) -> bool:
        """Whether ``new`` starts with ``old``'s messages (as the provider sees them)."""
        n = len(old)
        if len(new) < n:
            return False
        start = identical_prefix(old, new, n)
        if start == n:
            return True
        moved = bytes(map(is_not, islice(old, start, n), islice(new, start, n)))
        at = moved.find(1)
        while at >= 0:
            i = start + at
            if await self._digest(old[i]) != await self._digest(new[i]):
                return False
            at = moved.find(1, at + 1)
        return True

    async def _digest(self, message: Mapping[str, Any]) -> bytes:
        key = id(message)
        found = self._digests.get(key)
        if found is None:
            if self._since_checkpoint >= self._chunk:
                self._since_checkpoint = 0
                await anyio.lowlevel.checkpoint()
            self._since_checkpoint += 1
            found = self._digests[key] = message_digest(message)
        return found
