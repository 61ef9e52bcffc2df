"""Reading a save_file's lines: a torn tail, damage, and a file that is not a save_file at all.

Only the end of a save_file can be torn: the last write, cut short by a crash. Everything else
that is wrong is damage, an :class:`~ctxmw.errors.InvalidTranscriptError` naming the line, and
nothing is ever cut for it. Telling the two apart:

* a last line without its newline, or that is not JSON, is a torn line (ignored, cut before the
  next append);
* a record (``edit``, ``tool_loop``, ``readback``) announces its message lines twice: their
  count (in its ops, or ``count``) and their size in bytes (``bytes``). Its lines are cut off by a
  torn write only when fewer bytes than announced follow it; when as many follow but not the
  lines it counts, one of the two was damaged. A record of an earlier version has no ``bytes``:
  its lines are taken for cut off only when the file's last line is torn too (a crash cut the
  write mid-line);
* a record whose lines cannot be its own (a record among them; for a tool round, anything but
  calls and results) is damage wherever it is.

A file whose first line is not a message or a record (any text, a ledger, a JSON document) is not
a save_file: :class:`~ctxmw.errors.InvalidSaveFileError`, and ctxmw never writes it. A torn first
line counts as one of ctxmw's when it begins as ctxmw's lines do (``{"``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxmw.errors import InvalidSaveFileError, InvalidTranscriptError
from ctxmw.runtime.revisions import BYTES_KEY, is_record, record_span

__all__ = ["Lines", "check_head", "complete_lines", "parse"]

logger = logging.getLogger("ctxmw")


@dataclass(slots=True)
class Lines:
    """A save_file's whole lines, decoded.

    Attributes:
        lines: every whole, non-blank line as a JSON object (messages and records).
        ends: where each of them ends in the file (the byte after its newline).
        numbers: each one's line number in the file, from 1.
        torn: the file ends with a torn line (no newline, or not JSON).
        size: the file's size in bytes.
    """

    lines: list[dict[str, Any]] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)
    torn: bool = False
    size: int = 0


def parse(data: bytes, path: Path) -> Lines:
    """The file's whole lines and whether its tail is torn (logged).

    Raises:
        InvalidSaveFileError: the first line is not one of ctxmw's (the file is not a save_file).
        InvalidTranscriptError: a line before the last is not a JSON object (damage).
    """
    *raws, tail = data.split(b"\n")
    out = Lines(size=len(data))
    offset = 0
    for number, raw in enumerate(raws, start=1):
        offset += len(raw) + 1
        if not raw.strip():
            continue
        line = _decode(raw)
        if not out.lines and not _ours(line, raw):
            raise _not_a_save_file(path)
        if line is None:
            if number == len(raws) and not tail:
                _warn_torn(path, number)
                out.torn = True
                return out
            raise InvalidTranscriptError(
                f"line {number} of {str(path)!r} is not a JSON object; the file is damaged. "
                "Repair or move that line; ctxmw never drops earlier lines silently.",
                len(out.lines),
            )
        out.lines.append(line)
        out.ends.append(offset)
        out.numbers.append(number)
    if tail.strip():
        if not out.lines and not _ours(None, tail):
            raise _not_a_save_file(path)
        _warn_torn(path, len(raws) + 1)
        out.torn = True
    return out


def check_head(path: Path) -> None:
    """Worker thread: the first line of an existing file, checked before anything is written
    beside it (the lock file): a file that is not a save_file is refused untouched.

    Raises:
        InvalidSaveFileError: the file is not a save_file.
    """
    try:
        with open(path, "rb") as handle:
            head = handle.read(_HEAD).lstrip()
    except FileNotFoundError:
        return
    if not head:
        return
    first, newline, _ = head.partition(b"\n")
    if newline and not _ours(_decode(first), first):
        raise _not_a_save_file(path)
    if not newline and not _ours(None, first):
        raise _not_a_save_file(path)


_HEAD = 1 << 20  # a first line longer than this is judged by its beginning


def _ours(line: dict[str, Any] | None, raw: bytes) -> bool:
    """Whether a first line is ctxmw's: a message or a record, or the start of one (torn)."""
    if line is not None:
        return "role" in line or is_record(line)
    text = raw.strip()
    return text.startswith(b'{"') or text == b"{"


def _decode(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _warn_torn(path: Path, number: int) -> None:
    logger.warning("Ignoring the torn last line %d of %s (an interrupted write).", number, path)


def _not_a_save_file(path: Path) -> InvalidSaveFileError:
    return InvalidSaveFileError(
        str(path),
        "it is not a ctxmw transcript (its first line is not a JSON message), and ctxmw never "
        "writes into a file it did not make",
        "Pass another path, or move this file aside.",
    )


def complete_lines(parsed: Lines, path: Path) -> int:
    """How many lines to keep: not a last record whose lines a torn write cut off.

    Raises:
        InvalidTranscriptError: a record announces lines that cannot be its own (damage).
    """
    lines, n = parsed.lines, 0
    while n < len(lines):
        if not is_record(lines[n]):
            n += 1
            continue
        span = record_span(lines[n])
        block = lines[n + 1 : n + 1 + span]
        if not _own_lines(lines[n], block):
            raise _damaged(path, parsed.numbers[n], span, n)
        if len(block) < span:
            if _cut_off(parsed, n):  # the file's last write, cut short: a torn tail
                return n
            raise _damaged(path, parsed.numbers[n], span, n)
        if not _size_fits(parsed, n, span):
            raise _damaged(path, parsed.numbers[n], span, n)
        n += 1 + span
    return len(lines)


def _announced(record: dict[str, Any]) -> int | None:
    size = record.get(BYTES_KEY)
    ok = isinstance(size, int) and not isinstance(size, bool) and size >= 0
    return size if ok else None


def _cut_off(parsed: Lines, n: int) -> bool:
    """Whether the record at ``n``, short of lines, is the file's last write cut short."""
    size = _announced(parsed.lines[n])
    if size is None:  # an earlier version's record: only a crash mid-line makes one short
        return parsed.torn
    return parsed.size - parsed.ends[n] < size


def _size_fits(parsed: Lines, n: int, span: int) -> bool:
    """Whether the record at ``n``'s lines take the bytes it announced (when it did)."""
    size = _announced(parsed.lines[n])
    return size is None or parsed.ends[n + span] - parsed.ends[n] == size


def _own_lines(record: dict[str, Any], block: list[dict[str, Any]]) -> bool:
    """Whether ``block`` can be the lines ``record`` announced: messages, and for a tool round
    or read-backs only calls and results (ctxmw marks nothing else)."""
    if any(is_record(m) for m in block):
        return False
    if record.get("ctxmw") not in ("tool_loop", "readback"):
        return True
    return all(m.get("role") == "tool" or m.get("tool_calls") for m in block)


def _damaged(path: Path, number: int, span: int, index: int) -> InvalidTranscriptError:
    return InvalidTranscriptError(
        f"line {number} of {str(path)!r} is a record announcing {span} message line(s) that "
        "cannot be its own: the file is damaged before its end (only the last write can be cut "
        "short). Nothing was cut. Repair that line (the line format is in docs/sessions.md) or "
        "move the file aside; ctxmw never truncates complete lines.",
        index,
    )
