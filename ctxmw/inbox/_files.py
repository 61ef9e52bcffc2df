"""Blocking file operations of the inbox. Callers run every function here in a worker thread.

Kept apart from the async API so the rule is visible: nothing in this module may be called on
the event loop. The reader's side (``take``) and the writers' side (``place``) share one
primitive, :func:`link_no_clobber`: a hard link fails when the target exists, so a file is
never overwritten.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ABORT",
    "FileEntry",
    "Skipped",
    "link_no_clobber",
    "make_dir",
    "place",
    "scan",
    "take",
]

ABORT = "abort"
"""The exact name of the file that stops the agent (decided on the name in the inbox)."""

# O_NOFOLLOW: a symlink swapped in after the scan is refused, never followed.
# O_NONBLOCK: a FIFO swapped in after the scan cannot hang the worker thread on open.
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


class Skipped(Exception):
    """A file the reader leaves alone; the message says which file and why."""


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One regular file of an inbox folder, as the scan saw it."""

    name: str
    size: int
    mtime: float


def scan(folder: Path) -> list[FileEntry]:
    """The regular, non-dot files of ``folder`` in byte order of their names; [] if it is absent.

    Directories, dotfiles (writers' temporary files, claims) and symlinks are left out.
    """
    try:
        with os.scandir(folder) as it:
            entries = [_entry(e) for e in it if _wanted(e)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted((e for e in entries if e is not None), key=lambda e: os.fsencode(e.name))


def _wanted(entry: os.DirEntry[str]) -> bool:
    return not entry.name.startswith(".") and entry.is_file(follow_symlinks=False)


def _entry(entry: os.DirEntry[str]) -> FileEntry | None:
    try:
        st = entry.stat(follow_symlinks=False)
    except FileNotFoundError:  # taken by another reader since the listing
        return None
    return FileEntry(entry.name, st.st_size, st.st_mtime)


def take(folder: Path, removed: Path, name: str, max_bytes: int) -> bytes:
    """Move ``folder/name`` into ``removed`` and return its bytes.

    The file is opened first, so an unreadable file stays where it is; then it is claimed with
    one atomic rename (two readers can never both take it), then linked under its final name
    in ``removed`` (``.1``, ``.2``, ... before the extension on a collision, never overwriting).
    Renames and links keep the inode, so the mtime is preserved.

    Raises:
        Skipped: the file is too large or not a regular file; it is left in place.
        OSError: it could not be opened, moved or read (``FileNotFoundError``: another reader
            took it first).
    """
    path = folder / name
    fd = os.open(path, _READ_FLAGS)
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Skipped(f"Skipped inbox entry {str(path)!r}: it is not a regular file.")
        if st.st_size > max_bytes:
            raise Skipped(
                f"Skipped inbox file {str(path)!r}: {st.st_size} bytes is over inbox_max_bytes="
                f"{max_bytes}; it stays in the inbox. Shorten it or raise the setting."
            )
        make_dir(removed)
        claim = removed / f".claim-{uuid.uuid4().hex}"
        os.rename(path, claim)
        _settle(claim, removed, name)
        return handle.read(max_bytes)


def _settle(claim: Path, removed: Path, name: str) -> None:
    """Give a claimed file its final, unused name in ``removed``."""
    for candidate in _candidates(name):
        if link_no_clobber(claim, removed / candidate):
            return


def _candidates(name: str) -> Iterator[str]:
    """``note.txt``, ``note.1.txt``, ``note.2.txt``, ...: the number goes before the extension."""
    stem, dot, ext = name.rpartition(".")
    if not stem:
        stem, dot, ext = name, "", ""
    yield name
    for n in itertools.count(1):
        yield f"{stem}.{n}{dot}{ext}"


def link_no_clobber(source: Path, target: Path) -> bool:
    """Move ``source`` to ``target`` unless ``target`` exists; True if it moved.

    A hard link is atomic and refuses an existing target. Where hard links are unsupported, an
    existence check followed by a rename is the fallback (a race there could replace a file a
    concurrent mover placed in the same instant; that is the best the filesystem allows).
    """
    try:
        os.link(source, target)
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
    """Create ``folder`` (not its parents) unless it exists."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder)


def place(folder: Path, name: str, data: bytes) -> bool:
    """Write ``data`` to ``folder/name`` through a dotfile and a link; False if ``name`` exists.

    Readers skip dotfiles, so they never see the file half-written; an existing file is kept.
    """
    make_dir(folder)
    temp = folder / f".{name}.{uuid.uuid4().hex}.tmp"
    try:
        with open(temp, "xb") as handle:
            handle.write(data)
        placed = link_no_clobber(temp, folder / name)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    if not placed:
        os.unlink(temp)
    return placed
