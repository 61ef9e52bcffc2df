"""A session's record: its save_file, in memory and on disk.

A :class:`Record` holds the committed transcript (full fidelity), which of its messages this
loop made for Python callables, what is not yet on disk, and how a stateless caller's messages
lined up with it at the last commit. A stateless conversation keeps its ``Record`` between
calls (:class:`~ctxmw.runtime.conversations.Conversation`), so the next call's session works on
the same object instead of reading the file again.

The file I/O of a turn, in worker threads:

* the trip before a turn (:meth:`Record.open`): take the save_file's lock, see whether another
  writer changed the file (on a first read, move beside-files from their old names:
  :mod:`ctxmw.runtime._migrate`), list the inbox for the ``inbox`` strategy; a second trip only
  to read a changed file. The lock is free between turns, so this trip cannot be skipped.
* one trip per commit (:meth:`Record.write_out`): every unsaved round in one write and fsync,
  then the telemetry's ledger lines (built on the loop), the delivered inbox files settled, then
  the lock given back by the turn's last commit, or the inbox listed for the next round. The
  round is on disk before the call returns.

A round whose write failed (disk full) stays in memory and in :attr:`Record.unsaved`; the next
successful write saves it, unless another writer changed the file meanwhile (the file wins).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from anyio import to_thread

from ctxmw.history import common_prefix
from ctxmw.inbox import inbox_dir
from ctxmw.inbox._files import FileEntry
from ctxmw.messages.form import message_dicts
from ctxmw.runtime._lines import check_head
from ctxmw.runtime._migrate import migrate_beside
from ctxmw.runtime._notes import HeldNotes
from ctxmw.runtime._paths import check_save_file
from ctxmw.runtime._splices import Key, Readbacks, Splice, live_splices
from ctxmw.runtime.lock import SaveFileLock
from ctxmw.runtime.revisions import Edit, Plan, plan_history
from ctxmw.runtime.transcript import TranscriptFile, encode_lines
from ctxmw.runtime.turn import Turn
from ctxmw.strategies.inbox import list_for_delivery
from ctxmw.telemetry.recorder import CallRecorder
from ctxmw.types import Message, Messages

logger = logging.getLogger("ctxmw")

__all__ = ["Listing", "Record", "flush_ledger"]

Listing = tuple[Path, list[FileEntry]]
"""The inbox folder of a save_file and its entries, for the ``inbox`` strategy."""

_Unsaved = tuple[Messages, Edit | None, list[bool], list[tuple[int, Readbacks]]]
"""One commit's messages, its edit, their tool-loop marks and its read-back blocks."""


class Record:
    """A save_file's transcript as this process holds it.

    Attributes:
        path: the save_file (None: the transcript lives in memory only).
        file: the transcript file, when there is a path.
        messages: the committed transcript, full fidelity.
        ours: per message, whether this loop made it for Python callables.
        hint: a stateless caller's messages matched to ``messages[:len(hint)]`` by the last
            commit (the empty tuple when none): the next call compares only what is new.
        keys: normal keys by message object (see :func:`~ctxmw.runtime.revisions.plan_history`).
        loaded: the file has been read.
        unsaved: rounds kept in memory whose write failed, written by the next commit.
        last: the last stateful turn's working list and the ``messages`` it grew beside.
        splices: the read-backs kept beside the caller's calls of replies in ``messages``, by
            their call ids (see :mod:`ctxmw.runtime._splices`).
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.file = TranscriptFile(path) if path is not None else None
        self.messages: Messages = []
        self.ours: list[bool] = []
        self.hint: Sequence[Message] = ()
        self.keys: dict[int, tuple[Any, str]] = {}
        self.loaded = False
        self.unsaved: Sequence[_Unsaved] = ()
        self.last: tuple[Messages, Messages] | None = None
        self.splices: dict[Key, Splice] = {}

    @property
    def exact(self) -> bool:
        """Whether memory is the file exactly: loaded, with nothing waiting to be written."""
        return self.file is not None and self.loaded and not self.unsaved

    async def open(self, lock: SaveFileLock | None, lists: bool) -> Listing | None:
        """The trip before a turn: take the lock, read the file if it changed, list the inbox
        when ``lists``. Returns the inbox listing, if made."""
        file = self.file
        if file is None:
            self.loaded = True
            return None
        stale, listing = await to_thread.run_sync(_open_now, file, lock, self.loaded, lists)
        if stale:
            await self.reload()
        self.loaded = True
        return listing

    async def sync(self) -> None:
        """Read the file when it was never read or another writer changed it."""
        if self.file is not None and (not self.loaded or await self.file.changed()):
            await self.reload()
        self.loaded = True

    async def reload(self) -> None:
        """Read the file again; rounds that could not be written are dropped for it."""
        if self.file is None:
            return
        self.messages = await self.file.load()
        self.ours = list(self.file.ours)
        self.splices = dict(self.file.splices)
        self.hint, self.keys = (), {}
        if self.unsaved:
            logger.warning(
                "%s was changed by another writer; %d write(s) that could not be made "
                "earlier are dropped in favour of the file.",
                self.path,
                len(self.unsaved),
            )
            self.unsaved = ()

    def apply(self, turn: Turn) -> None:
        """Take what the turn added into memory first (kept if the write then fails)."""
        new, edit, blocks = turn.take_unwritten(), turn.take_edit(), turn.take_blocks()
        ours = turn.ours_flags(new)
        if edit is not None:
            self.messages, self.ours = edit.apply(self.messages, self.ours)
            self.splices = live_splices(self.splices, self.messages)
        self.messages.extend(new)
        self.ours.extend(ours)
        for _, block in blocks:
            if block.splice is not None:
                self.splices[block.splice.key] = block.splice
        if turn.hint is not None:  # the caller's messages now line up with the record's
            self.hint, turn.hint = turn.hint, None
        if self.file is not None and (new or edit is not None or blocks):
            self.unsaved = [*self.unsaved, (new, edit, ours, blocks)]

    async def write_out(
        self,
        turn: Turn,
        notes: HeldNotes,
        ledger: Callable[[], None] | None,
        *,
        last: bool,
        lists: bool,
    ) -> None:
        """The commit's one trip: every unsaved round in one write and fsync, the ledger lines,
        the inbox notes settled, then the lock given back (``last``) or the inbox listed for
        the next round (``lists``). No trip when there is nothing to do."""
        file = self.file
        data = b"".join(encode_lines(m, edit=e, ours=o, blocks=b) for m, e, o, b in self.unsaved)
        lock = turn.lock if last and turn.lock is not None and turn.lock.held else None
        lists = file is not None and lists and not last
        if data or notes.held or lock is not None or lists or ledger is not None:
            turn.listing = await to_thread.run_sync(
                _commit_now, file, data, ledger, notes, lock, lists
            )
        self.unsaved = ()

    def working(self) -> Messages:
        """A stateful turn's working list: the last turn's own list when it still is the
        transcript.

        A turn's list only grows, and its commits append what it added, in order, to the
        transcript: so when the transcript is still the same list object (not reloaded, edited
        or handed over) and as long as the turn's list, ending with the same message, every
        message the turn added was committed and the two hold the same messages. The list then
        goes on growing, and the chain's History knows its head without comparing it
        (:meth:`~ctxmw.history.History.grows`).
        """
        messages, last = self.messages, self.last
        if last is None or last[1] is not messages or len(last[0]) != len(messages):
            return list(messages)
        if messages and last[0][-1] is not messages[-1]:
            return list(messages)
        return last[0]

    def plan(self, history: Sequence[Any]) -> Plan:
        """How a stateless caller's ``history`` lines up with the record: what is unchanged,
        what is new, and the edit when the caller rewrote it (see
        :func:`~ctxmw.runtime.revisions.plan_history`)."""
        self.last = None  # a stateless turn's list holds the caller's objects: never reused
        given, same = self._given(history)
        plan = plan_history(
            self.messages, self.ours, given, hint=self.hint, keys=self.keys, same=same
        )
        if plan.edit is not None:
            self._forget_keys(given)
        return plan

    def _given(self, history: Sequence[Any]) -> tuple[Messages, int]:
        """A stateless caller's messages as dicts, and how many lead with the previous call's.

        One comparison finds the messages the previous call already converted and lined up (the
        same objects, or equal ones: those are then the previous call's dicts); only the rest
        is converted.
        """
        hint = self.hint
        same = common_prefix(hint, history) if hint else 0
        if not same or not isinstance(hint, list):  # no hint: the empty tuple
            return message_dicts(history), 0
        given = hint[:same]
        given += message_dicts(history[same:])
        return given, same

    def _forget_keys(self, given: Messages) -> None:
        """Keep the normal keys of live messages only (the record's and the caller's)."""
        if len(self.keys) > 2 * (len(self.messages) + len(given)):
            live = {id(m) for m in (*self.messages, *given)}
            self.keys = {k: v for k, v in self.keys.items() if k in live}


async def flush_ledger(recorder: CallRecorder | None) -> None:
    """Write the ledger lines no commit took (a turn that failed after a call was recorded)."""
    job = recorder.take_held() if recorder is not None else None
    if job is not None:
        with anyio.CancelScope(shield=True):
            await to_thread.run_sync(_write_ledger, job)


def _write_ledger(job: Callable[[], None]) -> None:
    """Worker thread: the telemetry's ledger lines; a failure never fails the call."""
    try:
        job()
    except Exception:
        logger.warning(
            "ctxmw could not write the telemetry ledger; the call went on.", exc_info=True
        )


def _open_now(
    file: TranscriptFile, lock: SaveFileLock | None, loaded: bool, lists: bool
) -> tuple[bool, Listing | None]:
    """Worker thread, the trip before a turn: take the lock, whether the file must be read,
    and the inbox listing when ``lists``."""
    check_save_file(file.path)  # before the lock file or a folder is made beside it
    if not loaded:
        check_head(file.path)  # a file that is not a save_file: refused untouched
    if lock is not None:
        lock.acquire_now()
        if not loaded:
            migrate_beside(file.path)
    stale = not loaded or file.changed_now()
    return stale, _list_inbox(file.path) if lists else None


def _commit_now(
    file: TranscriptFile | None,
    data: bytes,
    ledger: Callable[[], None] | None,
    notes: HeldNotes,
    lock: SaveFileLock | None,
    lists: bool,
) -> Listing | None:
    """Worker thread, a commit's one trip (see :meth:`Record.write_out`)."""
    try:
        if file is not None and data:
            file.write_now(data)
    finally:  # after the fsync, still under the lock; a failure is only logged
        if ledger is not None:
            _write_ledger(ledger)
    notes.settle_now()
    if lock is not None:
        lock.release_now()
    return _list_inbox(file.path) if lists and file is not None else None


def _list_inbox(save_file: Path) -> Listing:
    """Worker thread: the inbox folder of ``save_file`` and its entries, for the strategy."""
    folder = inbox_dir(save_file)
    return folder, list_for_delivery(folder)
