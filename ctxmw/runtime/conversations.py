"""The long-lived conversation: what every call of one conversation works on.

A :class:`Conversation` is the state one call leaves for the next: the strategies' memo (and
in it, per strategy chain, the :class:`~ctxmw.history.History` that answers what changed since
the previous call), the telemetry recorder (the previous call's payload, for the prefix it
shares) and the save_file's :class:`~ctxmw.runtime._record.Record` (the loaded transcript, with
what lines the caller's messages up with it).

A :class:`~ctxmw.runtime.session.Session` owns one for its life. ``ctxmw.acompletion`` builds a
``Session`` per call (its arguments are the call's) around the conversation it finds in a
registry, keyed by the conversation's identity (the save_file, else the ``session`` id, else
litellm's ids; :mod:`ctxmw.runtime.identity`): the call works on the registered object itself,
nothing is copied in or out. What a call may not leave behind it drops when it ends
(:meth:`Conversation.end`): a record that is not the file exactly (a failed call) is replaced by
an unread one, so the next call reads the file again; another process may write it in between,
which the trip before each turn notices. A record holding rounds whose write failed stays: they
are what the caller paid for, and the next call writes them (unless another writer changed the
file meanwhile: the file wins).

A call checks its conversation out and back in. A second call of the same conversation while
the first still runs (two tasks, no save_file to refuse one of them) gets a fresh, unregistered
conversation: the two never share a memo or a transcript, the second's memo is not kept. The
recorder is the one exception, shared as before: it only ever holds the latest payload.

The registry is bounded: at most :data:`MAX_CONVERSATIONS` conversations and about
:data:`MAX_HELD_BYTES` held (transcript bytes, the recorder's payload at four bytes a token, the
memo's bounded caches and the inputs its Histories keep); the least recently used go first,
the current one always stays. A
forgotten conversation's next call starts cold (its transcript read again, measured as a first
call): slower, and the same result except where a strategy kept what the messages do not say
(``shorten_tools_economic``'s cold call points: the time between calls). Checking out and in
is thread-safe: synchronous callers in many threads share the registry with async callers on
their own loop.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxmw.context.tokens import CHARS_PER_TOKEN
from ctxmw.history import History
from ctxmw.messages._memo import BoundedCache
from ctxmw.runtime._record import Record
from ctxmw.runtime._splices import live_splices
from ctxmw.telemetry.recorder import CallRecorder
from ctxmw.types import Message

__all__ = ["MAX_CONVERSATIONS", "MAX_HELD_BYTES", "Conversation", "Conversations"]

MAX_CONVERSATIONS = 1024
MAX_HELD_BYTES = 64 * 1024 * 1024


@dataclass(slots=True, eq=False)
class Conversation:
    """One conversation's state, kept from one call to the next.

    Attributes:
        memo: the strategies' memo (``StrategyContext.memo``), with the chain's History.
        recorder: the telemetry recorder, once a call made one.
        record: the save_file's record (an unread one until a call reads the file).
        in_use: a call has it checked out.
        setup: what the memo was made under (the settings and the strategy names); a call
            under another setup starts a new memo, since the strategies' caches assume theirs.
        kept: a stateless call's answer whose write failed, and the response it came in (see
            :mod:`ctxmw.runtime._kept`).
    """

    memo: dict[str, Any] = field(default_factory=dict)
    recorder: CallRecorder | None = None
    record: Record = field(default_factory=lambda: Record(None))
    in_use: bool = False
    setup: Any = None
    kept: tuple[Message, Any] | None = None

    def begin(self, setup: Any, path: Path | None) -> None:
        """A call under ``setup`` on the save_file ``path`` starts: the memo is emptied when
        the setup changed, the record replaced when it is another file's."""
        self.memo_for(setup)
        if self.record.path != path:
            self.record = Record(path)

    def memo_for(self, setup: Any) -> dict[str, Any]:
        """The memo for a call under ``setup`` (emptied when the setup changed)."""
        if self.setup != setup:
            self.memo, self.setup = {}, setup
        return self.memo

    def end(self, *, exact: bool) -> None:
        """A call ended: its record stays when ``exact`` (the call succeeded) and the record is
        the file exactly, or when a write failed (memory holds the rounds the file lacks, and
        the next call writes them); otherwise the next call reads the file again. Without a
        file, the read-backs kept beside the caller's calls stay (they live nowhere else)."""
        if self.record.unsaved:
            return
        if not (exact and self.record.exact):
            record, self.record = self.record, Record(self.record.path)
            if record.file is None:  # no file to read them back from: they stay in memory
                splices = record.splices
                # A call that succeeded committed the caller's whole history: the others are
                # of replies it no longer holds.
                self.record.splices = live_splices(splices, record.messages) if exact else splices

    @property
    def held_bytes(self) -> int:
        """About how many bytes this conversation keeps alive."""
        held = sum(c.bytes for c in self.memo.values() if isinstance(c, BoundedCache))
        held += sum(h.held_bytes for h in self.memo.values() if isinstance(h, History))
        if self.recorder is not None:
            held += self.recorder.held_tokens * CHARS_PER_TOKEN
        if self.record.file is not None:
            held += self.record.file.size
        else:  # in the file when there is one
            held += sum(splice.size for splice in self.record.splices.values())
        return held


class Conversations:
    """The bounded registry (see the module docstring).

    Args:
        max_conversations: conversations kept at most.
        max_bytes: bytes held by all of them at most (the current one always stays).
    """

    def __init__(
        self, max_conversations: int = MAX_CONVERSATIONS, max_bytes: int = MAX_HELD_BYTES
    ) -> None:
        self.max_conversations = max_conversations
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, Conversation] = OrderedDict()
        self._held: dict[Hashable, int] = {}  # each entry's bytes when it was last checked in
        self._total = 0
        self._guard = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    @property
    def held_bytes(self) -> int:
        """About the bytes the kept conversations held when they were last checked in."""
        return self._total

    def in_use(self, key: Hashable) -> bool:
        """Whether a call still running has the conversation checked out."""
        entry = self._entries.get(key)
        return entry is not None and entry.in_use

    def values(self) -> list[Conversation]:
        """The conversations kept, least recently used first."""
        return list(self._entries.values())

    def check_out(self, key: Hashable) -> Conversation:
        """The conversation's state for one call; a fresh one if another call holds it."""
        with self._guard:
            return self._check_out(key)

    def _check_out(self, key: Hashable) -> Conversation:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = Conversation()
        elif entry.in_use:
            # A concurrent call of the same conversation: nothing mutable is shared with it.
            return Conversation(recorder=entry.recorder)
        self._entries.move_to_end(key)
        entry.in_use = True
        return entry

    def check_in(self, key: Hashable, entry: Conversation) -> None:
        """The call is over: keep its state (if still registered) within the bounds."""
        with self._guard:
            self._check_in(key, entry)

    def _check_in(self, key: Hashable, entry: Conversation) -> None:
        entry.in_use = False
        if self._entries.get(key) is not entry:
            return
        self._entries.move_to_end(key)
        held = entry.held_bytes
        self._total += held - self._held.get(key, 0)
        self._held[key] = held
        while len(self._entries) > 1 and (
            len(self._entries) > self.max_conversations or self._total > self.max_bytes
        ):
            oldest, _ = self._entries.popitem(last=False)
            self._total -= self._held.pop(oldest, 0)
