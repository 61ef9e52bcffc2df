"""The inbox beside a save_file: its folders, the writers, and a listing.

Operators and other processes talk to a running agent by dropping files in its inbox; before the
next model call the ``inbox`` strategy delivers each file once, as a user message, and moves it
to the removed folder. A file named exactly ``abort`` stops the agent instead (``Aborted``).

Paths: the inbox of ``dir/agent.jsonl`` is ``dir/agent.jsonl.inbox/`` and delivered files move
to ``dir/agent.jsonl.inbox_removed/``: the whole file name, then the suffix.

File names written by :func:`deliver`: ``<ns>_<pid>_<seq>[_<name>]``, where ``ns`` is the time
in nanoseconds, zero-padded to 20 digits and strictly increasing within a process (a clock step
backwards cannot reorder), ``pid`` the writer's process id and ``seq`` a per-process counter
(6 digits). Byte order of the names is therefore the order of the ``deliver`` calls of one
writer. Writers write a dotfile (readers skip dotfiles) and link it in: readers never see a
half-written file and a writer never overwrites one. Folders are created ``0o700`` and files
``0o600`` whatever the umask: a note is a prompt, and whoever can write one steers the agent.

Every function here does its file I/O in a worker thread: none blocks the event loop.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from anyio import to_thread

from ctxmw._files import Beside
from ctxmw.errors import UsageError
from ctxmw.inbox._files import ABORT, FileEntry, place, scan

__all__ = ["InboxEntry", "abort", "deliver", "inbox_dir", "inbox_removed_dir", "list_inbox"]

_logger = logging.getLogger("ctxmw")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_stamp_lock = threading.Lock()
_last_ns = 0
_seq = itertools.count(1)


def inbox_dir(save_file: str | os.PathLike[str]) -> Path:
    """The inbox folder of ``save_file``: ``dir/agent.jsonl`` -> ``dir/agent.jsonl.inbox``."""
    return Beside.of(save_file).inbox


def inbox_removed_dir(save_file: str | os.PathLike[str]) -> Path:
    """Where delivered files go: ``dir/agent.jsonl`` -> ``dir/agent.jsonl.inbox_removed``."""
    return Beside.of(save_file).inbox_removed


async def deliver(save_file: str | os.PathLike[str], text: str, *, name: str | None = None) -> Path:
    """Drop ``text`` in the inbox of ``save_file``; the agent sees it before its next model call.

    Creates the inbox folder if missing (not the save_file's own folder).

    Args:
        save_file: the running agent's transcript path.
        text: the message, shown to the model as a user message.
        name: an optional label appended to the file name (letters, digits, ``._-``).

    Returns:
        The path of the file now waiting in the inbox.

    Raises:
        UsageError: ``text`` is blank, ``name`` is malformed, or the save_file's folder is missing.
    """
    if not isinstance(text, str) or not text.strip():
        raise UsageError(f"Inbox message text={text!r} is blank or not a string; nothing to send.")
    suffix = f"_{_check_name(name)}" if name is not None else ""
    data = text.encode("utf-8")
    folder = inbox_dir(save_file)
    while True:  # a name taken by another process sharing our pid (containers): take a fresh one
        file_name = _stamp() + suffix
        if await _write(folder, file_name, data):
            return folder / file_name


async def abort(save_file: str | os.PathLike[str], reason: str = "") -> Path:
    """Ask the agent of ``save_file`` to stop: its next model call raises ``ctxmw.Aborted``.

    Writes a file named exactly ``abort``. If one is already pending, it is kept with its own
    reason (the first request to stop wins; nothing is overwritten) and a warning is logged.

    Returns:
        The path of the pending ``abort`` file.

    Raises:
        UsageError: the save_file's folder is missing.
    """
    folder = inbox_dir(save_file)
    if not await _write(folder, ABORT, reason.encode("utf-8")):
        _logger.warning(  # the reason is message content: never logged
            "An abort is already pending in %r; it keeps its own reason and this one was not "
            "written.",
            str(folder),
        )
    return folder / ABORT


@dataclass(frozen=True, slots=True)
class InboxEntry:
    """One message file of an inbox, pending or delivered.

    Attributes:
        name: the file name (a delivered file may carry a ``.1``, ``.2``, ... collision suffix).
        path: where the file is now.
        delivered: False while it waits in the inbox, True once moved to the removed folder.
        size: its size in bytes.
        written: when it was written (its mtime, which delivery preserves), timezone-aware UTC.
    """

    name: str
    path: Path
    delivered: bool
    size: int
    written: datetime


async def list_inbox(save_file: str | os.PathLike[str]) -> list[InboxEntry]:
    """The pending files of the inbox in delivery order, then the delivered ones by name.

    Only what the reader would consider is listed: regular files whose names do not start with a
    dot. Missing folders list as empty; nothing is created.
    """
    pending, removed = inbox_dir(save_file), inbox_removed_dir(save_file)
    waiting = await to_thread.run_sync(scan, pending)
    done = await to_thread.run_sync(scan, removed)
    return [_listed(pending, e, False) for e in waiting] + [_listed(removed, e, True) for e in done]


def _listed(folder: Path, entry: FileEntry, delivered: bool) -> InboxEntry:
    written = datetime.fromtimestamp(entry.mtime, tz=UTC)
    return InboxEntry(entry.name, folder / entry.name, delivered, entry.size, written)


async def _write(folder: Path, name: str, data: bytes) -> bool:
    return await to_thread.run_sync(_place_beside_save_file, folder, name, data)


def _place_beside_save_file(folder: Path, name: str, data: bytes) -> bool:
    """Worker thread: :func:`place`, refusing to create the save_file's own folder."""
    try:
        return place(folder, name, data)
    except FileNotFoundError as exc:
        if folder.parent.is_dir():
            raise
        raise UsageError(
            f"Cannot write to the inbox {str(folder)!r}: its folder {str(folder.parent)!r} does "
            "not exist. Check the save_file path."
        ) from exc


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise UsageError(
            f"Inbox message name={name!r} is not allowed; use 1-100 letters, digits, '.', '_' "
            "or '-', starting with a letter or digit."
        )
    return name


def _stamp() -> str:
    global _last_ns
    with _stamp_lock:  # held for nanoseconds: it only orders the names of concurrent writers
        _last_ns = max(time.time_ns(), _last_ns + 1)
        return f"{_last_ns:020d}_{os.getpid()}_{next(_seq):06d}"
