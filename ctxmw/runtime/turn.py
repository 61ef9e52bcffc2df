"""One turn of a conversation in memory: what the strategies see, what is still to be written.

A turn starts from the committed transcript and runs rounds until the model answers. Three lists
keep its books:

* ``working``: what the strategies receive every round: the committed transcript, then this
  turn's messages in order (user input, inbox notes, assistant messages, tool results). Inbox
  notes that are not persisted stay here, at the position where they were delivered, for the rest
  of the turn: the strategies treat them like any user message, so later rounds still see them
  and the prompt prefix stays byte-stable.
* ``unwritten``: the messages the next commit appends to the save_file (one write per round).
* ``unconfirmed``: inbox notes that no successful model call has carried yet. If a call fails,
  they go back to the session, which delivers them again on its next attempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ctxmw.inbox._files import FileEntry
from ctxmw.messages.normal import same_message
from ctxmw.runtime._splices import Readbacks
from ctxmw.runtime.lock import SaveFileLock
from ctxmw.runtime.revisions import Edit
from ctxmw.types import Message, Messages, StrategyContext

__all__ = ["Turn", "delivered_notes", "retries_interrupted_turn", "run_input"]


@dataclass(slots=True)
class Turn:
    """The in-memory state of one turn.

    Attributes:
        working: the full-fidelity transcript the strategies receive.
        unwritten: messages not yet appended to the save_file.
        unconfirmed: inbox notes not yet carried by a successful call.
        persist_notes: whether inbox notes are written to the transcript (``inbox_persist``).
        blocks: read-back lines to write, each before the message of ``unwritten`` at its
            position (see :mod:`ctxmw.runtime._splices`).
        edit: a change of the save_file's revision (a stateless caller edited its history),
            written with the turn's first commit.
        stateless: the turn answers a stateless caller's whole history; only then are the
            loop's rounds marked as ctxmw's in the save_file (a stateful session's file stays
            plain messages).
        ours: ids of the messages this turn's loop produced for Python callables.
        hint: a stateless caller's conversation (its own message objects), the same messages
            as the record's at the same positions once the turn's first round is committed.
        listing: the inbox folder and its listing, made in the trip that took the lock, for
            the ``inbox`` strategy of the turn's first round (later rounds list it again).
        lock: the save_file's lock, held for the turn; the turn's last commit gives it back in
            the same worker-thread trip as its write.
    """

    working: Messages
    persist_notes: bool = False
    unwritten: Messages = field(default_factory=list)
    # Empty (most turns): the empty tuple; replaced, never appended to, when notes arrive.
    unconfirmed: Sequence[Message] = ()
    blocks: list[tuple[int, Readbacks]] = field(default_factory=list)
    edit: Edit | None = None
    stateless: bool = False
    ours: frozenset[int] | tuple[()] = ()
    hint: Messages | None = None
    listing: tuple[Path, list[FileEntry]] | None = None
    lock: SaveFileLock | None = None

    def stage(self, messages: Sequence[Message]) -> None:
        """Add messages of the caller (user input, tool results it computed) to the turn."""
        self.working.extend(messages)
        self.unwritten.extend(messages)

    def add_notes(self, notes: Sequence[Message]) -> None:
        """Add inbox notes: part of the turn; written only when ``persist_notes``."""
        self.working.extend(notes)
        if self.persist_notes:
            self.unwritten.extend(notes)
        if notes:
            self.unconfirmed = [*self.unconfirmed, *notes]

    def carried(self) -> None:
        """A model call succeeded: every note it carried was seen by the model."""
        self.unconfirmed = ()

    def add_round(self, messages: Sequence[Message]) -> None:
        """Add what a round produced (the assistant message, tool results)."""
        self.working.extend(messages)
        self.unwritten.extend(messages)

    def add_readbacks(self, block: Readbacks) -> None:
        """Read-backs of the reply the turn adds next: written before it, never in ``working``."""
        self.blocks.append((len(self.unwritten), block))

    def take_blocks(self) -> list[tuple[int, Readbacks]]:
        """The read-back lines to write with :meth:`take_unwritten`'s messages; forgotten."""
        out, self.blocks = self.blocks, []
        return out

    def unseen(self, notes: Sequence[Message]) -> Messages:
        """Those of ``notes`` the turn does not already hold as unconfirmed."""
        return [n for n in notes if not any(n is u for u in self.unconfirmed)]

    def mark_ours(self, *messages: Message) -> None:
        """Mark messages as a tool round ctxmw's loop ran (the caller never sees them)."""
        if self.stateless:
            self.ours = frozenset((*self.ours, *map(id, messages)))

    def ours_flags(self, messages: Sequence[Message]) -> list[bool]:
        """For each message, whether :meth:`mark_ours` marked it."""
        return [id(m) in self.ours for m in messages]

    def take_edit(self) -> Edit | None:
        """The pending change of revision, if any; the turn forgets it."""
        out, self.edit = self.edit, None
        return out

    def take_unwritten(self) -> Messages:
        """The messages to append now; the turn forgets them."""
        out, self.unwritten = self.unwritten, []
        return out


def delivered_notes(ctx: StrategyContext) -> Messages:
    """The messages the ``inbox`` strategy appended during one call (its ``ctx.stats``)."""
    delivered = ctx.stats.get("inbox", {}).get("delivered", [])
    return [m for m in delivered if isinstance(m, dict)] if isinstance(delivered, list) else []


def run_input(unsent: Sequence[Message], given: Messages) -> Messages:
    """The input of a run: the unsent input of a failed turn, then ``given`` unless a retry."""
    retry = len(given) == len(unsent) and all(map(same_message, unsent, given))
    return given if retry or not unsent else [*unsent, *given]


def retries_interrupted_turn(committed: Messages, given: Messages) -> bool:
    """Whether ``given`` is the user message of the turn the transcript ends with, unfinished.

    A turn that failed after committing a tool round leaves its user message followed by tool
    rounds and no answer; asking the same again is a retry of that turn, not a new question.
    """
    if len(given) != 1 or given[0].get("role") != "user" or not committed:
        return False
    if committed[-1].get("role") != "tool":
        return False
    for message in reversed(committed):
        role = message.get("role")
        if role == "user":
            return same_message(message, given[0])
        if role != "tool" and not (role == "assistant" and message.get("tool_calls")):
            return False  # an answer or a system message: the turn had finished
    return False
