"""Blocking file operations of the inbox. Callers run every function here in a worker thread.

Kept apart from the async API so the rule is visible: nothing in this module may be called on
the event loop. The reader's side (``claim``, in :mod:`ctxmw.inbox._claims`) and the writers'
side (``place``) share two primitives: :func:`link_no_clobber` (a hard link fails when the target
exists, so a file is never overwritten) and an ``flock`` held on a file while it is being placed
or delivered (a reader skips a locked file: someone is still working on it).

Everything created here is owner-only whatever the umask: folders ``0o700``, files ``0o600``.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ABORT",
    "DIR_MODE",
    "FILE_MODE",
    "READ_FLAGS",
    "FileEntry",
    "Skipped",
    "candidates",
    "link_no_clobber",
    "make_dir",
    "place",
    "scan",
    "scan_settled",
    "try_lock",
]

ABORT = "abort"
"""The exact name of the entry that stops the agent (decided on the name in the inbox)."""

DIR_MODE = 0o700
FILE_MODE = 0o600

# O_NOFOLLOW: a symlink swapped in after the scan is refused, never followed.
# O_NONBLOCK: a FIFO swapped in after the scan cannot hang the worker thread on open.
READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


class Skipped(Exception):
    """A file the reader leaves alone; the message says which file and why (never its text)."""


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One entry of an inbox folder, as the scan saw it.

    ``regular`` is False only for an ``abort`` entry that is not a regular file (a folder, FIFO,
    symlink ...): every other non-regular entry is left out of the scan.
    """

    name: str
    size: int
    mtime: float
    regular: bool = True


def scan(folder: Path) -> list[FileEntry]:
    """The regular, non-dot files of ``folder`` in byte order of their names; [] if it is absent.

    Directories, dotfiles (writers' temporary files, claims) and symlinks are left out, except
    an entry named ``abort``: whatever its kind, it is listed (it stops the agent).
    """
    try:
        with os.scandir(folder) as it:
            entries = [_entry(e) for e in it if _wanted(e)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted((e for e in entries if e is not None), key=lambda e: os.fsencode(e.name))


def scan_settled(folder: Path) -> list[FileEntry]:
    """:func:`scan`, cut so that no writer's later file comes without its earlier ones.

    A directory listing taken while files are added is not a snapshot: a file linked during the
    listing may be missed while a later one is returned. So the folder is listed twice and the
    second listing is kept up to (not including) its first entry the first one did not show.
    Every file a writer placed before one that the first listing showed existed before the
    second listing began, so it is in the second one, before the cut.
    """
    first = {e.name for e in scan(folder)}
    second = scan(folder)
    for i, entry in enumerate(second):
        if entry.name not in first:
            return second[:i]
    return second


def _wanted(entry: os.DirEntry[str]) -> bool:
    if entry.name == ABORT:
        return True
    return not entry.name.startswith(".") and entry.is_file(follow_symlinks=False)


def _entry(entry: os.DirEntry[str]) -> FileEntry | None:
    try:
        st = entry.stat(follow_symlinks=False)
    except FileNotFoundError:  # taken by another reader since the listing
        return None
    return FileEntry(entry.name, st.st_size, st.st_mtime, stat.S_ISREG(st.st_mode))


def try_lock(fd: int) -> bool:
    """Take the exclusive ``flock`` of ``fd`` without waiting; False if someone holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def candidates(name: str) -> Iterator[str]:
    """``note.txt``, ``note.1.txt``, ``note.2.txt``, ...: the number goes before the extension."""
    stem, dot, ext = name.rpartition(".")
    if not stem:
        stem, dot, ext = name, "", ""
    yield name
    for n in itertools.count(1):
        yield f"{stem}.{n}{dot}{ext}"


def link_no_clobber(source: Path, target: Path) -> bool:
    """Move ``source`` to ``target`` unless ``target`` exists; True if it moved.

    A hard link is atomic and refuses an existing target. Where hard links are unsupported (and
    for folders), an existence check followed by a rename is the fallback (a race there could
    replace a file a concurrent mover placed in the same instant; the best the filesystem allows).
    """
    try:
        os.link(source, target, follow_symlinks=False)
    except FileExistsError:
        return False
    except OSError:
        if os.path.lexists(target):
            return False
        os.rename(source, target)
        return True
    os.unlink(source)
    return True


def make_dir(folder: Path) -> None:
    """Create ``folder`` (not its parents) owner-only unless it exists."""
    try:
        os.mkdir(folder, DIR_MODE)
    except FileExistsError:
        return
    os.chmod(folder, DIR_MODE)  # the umask may have taken bits away; never adds any


def place(folder: Path, name: str, data: bytes) -> bool:
    """Write ``data`` to ``folder/name`` through a dotfile and a link; False if ``name`` exists.

    Readers skip dotfiles, so they never see the file half-written; an existing file is kept.
    The file is ``flock``-ed until its temporary name is gone, so no reader ever sees it with
    two links (the mark of a hard link smuggled in from outside, which readers refuse).
    """
    make_dir(folder)
    temp = folder / f".{name}.{uuid.uuid4().hex}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(temp, flags, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        fcntl.flock(fd, fcntl.LOCK_EX)
        _write_all(fd, data)
        placed = link_no_clobber(temp, folder / name)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    finally:
        os.close(fd)
    if not placed:
        os.unlink(temp)
    return placed


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
