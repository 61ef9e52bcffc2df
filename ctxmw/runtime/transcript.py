"""The save_file: a JSON Lines transcript, full fidelity, with every revision of a conversation.

The line format (stable, documented in ``docs/sessions.md``) is in :mod:`ctxmw.runtime.revisions`:
message lines append to the current revision; ``edit`` records start a new one when a stateless
caller changed its history; ``tool_loop`` records mark the rounds ctxmw's own loop ran. One file
holds a conversation whatever its caller does; earlier revisions stay readable (``ctxmw show
--revisions``).

Crash safety rests on three habits. A round's lines (an edit record, its messages, the round) are
written with one ``write`` followed by ``fsync``, so a killed process leaves whole rounds; a write
that fails halfway is cut back to where it began, and the error names the file
(:class:`~ctxmw.errors.SaveFileWriteError`). Loading ignores a torn last line (logged, never
fatal, the bytes are cut before the next append) and a last record whose message lines a torn
write cut off, told from damage (an error naming its line, nothing cut) by
:mod:`ctxmw.runtime._lines`; it sets aside a trailing tool group that only some of its results
answer, or none of them when the last line was torn (only a torn write makes one): a loaded
transcript never ends with a call that a torn round left unanswered. Earlier lines are never
silently dropped. Every string is written, a lone surrogate (a non-UTF-8 file name in a tool
result) included: such a line is written with JSON escapes, which load back to the same string.
A file that is not a save_file is never written (its first line is checked before the lock file
is made beside it).

Files are created ``0o600`` whatever the umask: tool outputs often hold secrets. A write costs
what the new lines cost; the file is never rewritten.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import anyio
import anyio.to_thread

from ctxmw._files import fsync_dir, private_dirs, write_all
from ctxmw.errors import SaveFileWriteError
from ctxmw.runtime._lines import complete_lines, parse
from ctxmw.runtime._open_round import aside_edit, open_round, report_aside
from ctxmw.runtime._paths import check_save_file
from ctxmw.runtime._splices import Key, Readbacks, Splice
from ctxmw.runtime.revisions import Edit, Revisions, loop_record, readback_record, replay
from ctxmw.types import Message, Messages

__all__ = ["TranscriptFile", "dump_line", "encode_lines"]

logger = logging.getLogger("ctxmw")

_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


def dump_line(message: Message) -> bytes:
    """One message as one JSONL line (UTF-8, compact, newline-terminated)."""
    line = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
    try:
        return line.encode()
    except UnicodeEncodeError:  # a lone surrogate has no UTF-8 form: escape it, losslessly
        return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def encode_lines(
    messages: Sequence[Message],
    *,
    edit: Edit | None = None,
    ours: Sequence[bool] = (),
    blocks: Sequence[tuple[int, Readbacks]] = (),
) -> bytes:
    """The bytes of one write: an edit record and its messages, then ``messages``.

    Consecutive messages flagged in ``ours`` are preceded by a ``tool_loop`` record; each of
    ``blocks`` (a position in ``messages`` and one reply's read-back lines) is written, behind
    its ``readback`` record, before the message at that position.
    """
    lines: list[bytes] = []
    if edit is not None:
        inserted = [dump_line(m) for m in edit.inserted]
        lines.append(dump_line(edit.record(sum(map(len, inserted)))))
        lines.extend(inserted)
    flags = list(ours) + [False] * (len(messages) - len(ours))
    at = sorted({pos for pos, _ in blocks})
    i = 0
    while i <= len(messages):
        for pos, readbacks in blocks:
            if pos == i:
                read = [dump_line(m) for m in readbacks.lines]
                lines.append(dump_line(readback_record(readbacks, sum(map(len, read)))))
                lines.extend(read)
        if i == len(messages):
            break
        j = i + 1
        if flags[i]:
            while j < len(messages) and flags[j] and j not in at:
                j += 1
        block = [dump_line(m) for m in messages[i:j]]
        if flags[i]:
            lines.append(dump_line(loop_record(j - i, sum(map(len, block)))))
        lines.extend(block)
        i = j
    return b"".join(lines)


class TranscriptFile:
    """One save_file on disk, as loaded and appended by its single writer.

    Args:
        path: the JSONL file; created on the first append.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._good = 0  # bytes of whole, valid lines
        # (inode, size, mtime) after our last load or write: another writer changes one of them.
        self._seen: tuple[int, int, int] | None = None
        self._aside: Edit | None = (
            None  # an open round set aside on load, recorded by the next write
        )
        self.ours: list[bool] = []
        """As last loaded: per message of the current revision, whether ctxmw's loop made it."""
        self.splices: dict[Key, Splice] = {}
        """As last loaded: the read-backs kept beside replies of the current revision."""

    @property
    def size(self) -> int:
        """Bytes of whole, valid lines, as last loaded or written."""
        return self._good

    async def load(self) -> Messages:
        """Read every completed round: the current revision; an absent file is empty.

        Raises:
            InvalidTranscriptError: a line other than the last is not a JSON object, or a
                record cannot be applied.
        """
        revisions = await anyio.to_thread.run_sync(self._load, False)
        return revisions.current

    async def revisions(self) -> Revisions:
        """Every revision the file holds: ``earlier`` ones, oldest first, and ``current``."""
        return await anyio.to_thread.run_sync(self._load, True)

    async def changed(self) -> bool:
        """Whether the file differs from what this object last loaded or wrote."""
        return await anyio.to_thread.run_sync(lambda: _identity(self.path) != self._seen)

    async def append(
        self, messages: Sequence[Message], *, edit: Edit | None = None, ours: Sequence[bool] = ()
    ) -> None:
        """Append with one write and an fsync (one worker-thread trip): ``edit`` (if any) first,
        then ``messages``.

        Args:
            messages: appended to the current revision; nothing is written when there are none
                and no edit.
            edit: a change of revision to record before them.
            ours: per message, whether ctxmw's tool loop produced it (marked in the file).

        Raises:
            SaveFileWriteError: the write failed (disk full, permissions); nothing was written.
        """
        if messages or edit is not None:
            await anyio.to_thread.run_sync(
                self.write_now, encode_lines(messages, edit=edit, ours=ours)
            )

    def _load(self, keep_earlier: bool) -> Revisions:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self._good, self._seen, self.ours, self._aside = 0, None, [], None
            self.splices = {}
            return Revisions(keep_earlier)
        except OSError:
            check_save_file(self.path)  # a folder, or a path through a file: said so
            raise
        parsed = parse(data, self.path)
        lines, ends, torn = parsed.lines, parsed.ends, parsed.torn
        keep = complete_lines(parsed, self.path)
        if keep < len(lines):
            logger.warning(
                "%s ends with a write that was cut short (a torn write); "
                "ignoring its last %d line(s).",
                self.path,
                len(lines) - keep,
            )
        revisions = replay(lines[:keep], keep_earlier=keep_earlier)
        self._aside = _set_aside_torn(revisions, torn and keep == len(lines), self.path)
        self._good = ends[keep - 1] if keep else 0
        self._seen = _identity(self.path)
        self.ours = list(revisions.ours)
        self.splices = dict(revisions.splices)
        return revisions

    def changed_now(self) -> bool:
        """Worker thread: :meth:`changed`, for a caller folding it into a trip of its own."""
        return _identity(self.path) != self._seen

    def write_now(self, data: bytes) -> None:
        """Worker thread: append ``data`` (whole lines) with one ``write`` and an ``fsync``.

        Raises:
            SaveFileWriteError: the write failed; the file is cut back to where it began.
        """
        try:
            self._write(data)
        except OSError as exc:
            raise SaveFileWriteError(str(self.path), exc) from exc

    def _write(self, data: bytes) -> None:
        if self._aside is not None:
            data = dump_line(self._aside.record(0)) + data
        created = not self.path.exists()
        private_dirs(self.path.parent)
        fd = _owner_only(str(self.path), _APPEND_FLAGS)
        try:
            os.ftruncate(fd, self._good)  # drops a torn tail; a no-op otherwise
            try:
                write_all(fd, data)
                os.fsync(fd)
            except BaseException:
                os.ftruncate(fd, self._good)  # never leave half a round behind
                self._seen = _identity(self.path)
                raise
        finally:
            os.close(fd)
        if created:
            fsync_dir(self.path.parent)
        self._aside = None
        self._good += len(data)
        self._seen = _identity(self.path)


def _set_aside_torn(revisions: Revisions, torn: bool, path: Path) -> Edit | None:
    """Set aside an open round that only a torn write makes: some results, or none with the
    last line torn (see :mod:`ctxmw.runtime._open_round`). Returns the edit to record."""
    count = open_round(revisions.current)
    if not count:
        return None
    round_ = revisions.current[len(revisions.current) - count :]
    if count == 1 and not torn:
        return None  # no result at all: perhaps the caller's to give (the session decides)
    edit = aside_edit(len(revisions.current), count)
    revisions.edit(edit)
    report_aside(path, round_, "a write cut short lost results for")
    return edit


def _owner_only(path: str, flags: int) -> int:
    """``open``'s opener: a new file is ``0o600`` whatever the umask."""
    fd = os.open(path, flags, 0o600)
    if os.fstat(fd).st_size == 0:
        os.fchmod(fd, 0o600)
    return fd


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns
