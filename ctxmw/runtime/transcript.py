"""The save_file: a JSON Lines transcript, one wire-format message per line, full fidelity.

Crash safety rests on three habits. A round's messages are written with one ``write`` of the
joined lines followed by ``fsync``, so a killed process leaves whole rounds; a write that fails
halfway is cut back to where it began, and the error names the file
(:class:`~ctxmw.errors.SaveFileWriteError`). Loading ignores a torn last line (logged, never
fatal, the bytes are cut before the next append) and a trailing tool group that only some of its
results answer, or none of them when the last line was torn (only a torn write makes one): a
loaded transcript never ends with a call that a torn round left unanswered. Any other unreadable
line is an error that names it: earlier lines are never silently dropped. Every string is
written, a lone surrogate (a non-UTF-8 file name in a tool result) included: such a line is
written with JSON escapes, which load back to the same string.

Files are created ``0o600`` whatever the umask: tool outputs often hold secrets. A write costs
what the new messages cost; the file is never rewritten. When a stateless caller's history
diverges from the file, the old file is kept as a numbered generation beside it
(``agent.1.jsonl``, ...).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import aiofiles
import anyio
import anyio.to_thread

from ctxmw.errors import InvalidTranscriptError, SaveFileWriteError
from ctxmw.messages.form import without_none
from ctxmw.types import Message, Messages

__all__ = ["TranscriptFile", "dump_line", "match_history", "same_message"]

logger = logging.getLogger("ctxmw")


def dump_line(message: Message) -> bytes:
    """One message as one JSONL line (UTF-8, compact, newline-terminated)."""
    line = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
    try:
        return line.encode()
    except UnicodeEncodeError:  # a lone surrogate has no UTF-8 form: escape it, losslessly
        return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def same_message(stored: Message, given: Message) -> bool:
    """Whether two messages say the same thing on the wire (key order and ``None`` ignored)."""
    return bool(without_none(stored) == without_none(json.loads(json.dumps(given))))


def match_history(stored: Sequence[Message], given: Sequence[Message]) -> int | None:
    """How many of ``given`` the transcript ``stored`` already holds, or None if they diverged.

    ``stored`` matches when it is ``given``'s beginning, except for tool rounds (assistant
    messages with tool calls and their results) that the tool loop ran for a stateless caller,
    who only ever received the answer that followed them: such a run is skipped when the caller
    has that answer next, or when it ends the transcript (the loop stopped early).
    """
    i = j = 0
    while i < len(stored):
        if j < len(given) and same_message(stored[i], given[j]):
            i, j = i + 1, j + 1
            continue
        k = _after_tool_rounds(stored, i)
        if k == i or not (
            k == len(stored) or (j < len(given) and same_message(stored[k], given[j]))
        ):
            return None
        i = k
    return j


def _after_tool_rounds(messages: Sequence[Message], i: int) -> int:
    while i < len(messages) and (
        messages[i].get("role") == "tool"
        or (messages[i].get("role") == "assistant" and messages[i].get("tool_calls"))
    ):
        i += 1
    return i


class TranscriptFile:
    """One save_file on disk, as loaded and appended by its single writer.

    Args:
        path: the JSONL file; created on the first append.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._good = 0  # bytes of whole, valid lines
        self._seen: tuple[int, int] | None = None  # (inode, size) after our last load or write

    async def load(self) -> Messages:
        """Read every completed round; an absent file is an empty transcript.

        Raises:
            InvalidTranscriptError: a line other than the last is not a JSON object.
        """
        return await anyio.to_thread.run_sync(self._load)

    async def changed(self) -> bool:
        """Whether the file differs from what this object last loaded or wrote."""
        return await anyio.to_thread.run_sync(lambda: _identity(self.path) != self._seen)

    async def append(self, messages: Sequence[Message]) -> None:
        """Append ``messages`` with one write and an fsync; nothing happens for an empty list.

        Raises:
            SaveFileWriteError: the write failed (disk full, permissions); nothing was written.
        """
        if messages:
            data = b"".join(dump_line(m) for m in messages)
            try:
                await self._append(data)
            except OSError as exc:
                raise SaveFileWriteError(str(self.path), exc) from exc

    async def archive(self) -> Path:
        """Move the file aside as the next free generation and start empty; returns its path."""
        target = await anyio.to_thread.run_sync(self._archive)
        logger.warning(
            "The history passed for %s diverged from the file; the old transcript is kept as %s.",
            self.path,
            target,
        )
        return target

    def _load(self) -> Messages:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self._good, self._seen = 0, None
            return []
        messages, ends, torn = _parse(data, self.path)
        keep = _complete_prefix(messages, torn)
        if keep < len(messages):
            logger.warning(
                "%s ends with a tool round that was cut short (a torn write); "
                "ignoring its last %d message(s).",
                self.path,
                len(messages) - keep,
            )
        self._good = ends[keep - 1] if keep else 0
        self._seen = _identity(self.path)
        return messages[:keep]

    async def _append(self, data: bytes) -> None:
        created = not await anyio.Path(self.path).exists()
        await anyio.Path(self.path.parent).mkdir(parents=True, exist_ok=True)
        async with aiofiles.open(self.path, "ab", buffering=0, opener=_owner_only) as handle:
            await handle.truncate(self._good)  # drops a torn tail; a no-op otherwise
            try:
                view = memoryview(data)
                while view:
                    view = view[await handle.write(view) or 0 :]
                await anyio.to_thread.run_sync(os.fsync, handle.fileno())
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await handle.truncate(self._good)  # never leave half a round behind
                    self._seen = await anyio.to_thread.run_sync(_identity, self.path)
                raise
        if created:
            await anyio.to_thread.run_sync(_fsync_dir, self.path.parent)
        self._good += len(data)
        self._seen = await anyio.to_thread.run_sync(_identity, self.path)

    def _archive(self) -> Path:
        n = 1
        while (target := _generation(self.path, n)).exists():
            n += 1
        self.path.rename(target)
        self._good, self._seen = 0, None
        return target


def _parse(data: bytes, path: Path) -> tuple[Messages, list[int], bool]:
    """The messages, the byte offset where each one's line ends, and whether the tail was torn."""
    *lines, tail = data.split(b"\n")
    messages: Messages = []
    ends: list[int] = []
    offset = 0
    for number, raw in enumerate(lines, start=1):
        offset += len(raw) + 1
        if not raw.strip():
            continue
        message = _decode(raw)
        if message is None:
            if number == len(lines) and not tail:
                _warn_torn(path, number)
                return messages, ends, True
            raise InvalidTranscriptError(
                f"line {number} of {str(path)!r} is not a JSON object; the file is damaged. "
                "Repair or move that line; ctxmw never drops earlier lines silently.",
                len(messages),
            )
        messages.append(message)
        ends.append(offset)
    if tail.strip():
        _warn_torn(path, len(lines) + 1)
    return messages, ends, bool(tail.strip())


def _decode(raw: bytes) -> Message | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _warn_torn(path: Path, number: int) -> None:
    logger.warning("Ignoring the torn last line %d of %s (an interrupted write).", number, path)


def _complete_prefix(messages: Messages, torn: bool) -> int:
    """Length without a trailing tool group that only some (or, if ``torn``, no) results answer.

    A write torn inside a round's first tool result leaves the assistant line whole and no
    result: sent again, that unanswered call would be rejected by the provider.
    """
    for i in range(len(messages) - 1, -1, -1):
        calls = messages[i].get("tool_calls")
        if messages[i].get("role") != "assistant" or not isinstance(calls, list) or not calls:
            continue
        wanted = {c.get("id") for c in calls if isinstance(c, dict)}
        answered = {m.get("tool_call_id") for m in messages[i + 1 :] if m.get("role") == "tool"}
        partial = (bool(answered) or torn) and not wanted <= answered
        return i if partial else len(messages)
    return len(messages)


def _owner_only(path: str, flags: int) -> int:
    """``open``'s opener: a new file is ``0o600`` whatever the umask."""
    fd = os.open(path, flags, 0o600)
    if os.fstat(fd).st_size == 0:
        os.fchmod(fd, 0o600)
    return fd


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size


def _generation(path: Path, n: int) -> Path:
    stem, dot, ext = path.name.rpartition(".")
    name = f"{stem}.{n}.{ext}" if dot and stem else f"{path.name}.{n}"
    return path.with_name(name)
