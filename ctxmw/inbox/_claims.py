"""Claims: an inbox file taken for a model call, moved away only once the call's round commits.

Blocking, like :mod:`ctxmw.inbox._files`: callers run every function here in a worker thread.

A reader (:func:`take`) opens the file (never following a symlink), takes its ``flock`` and
renames it to a dotfile in the inbox, ``.claim-<id>-<name>``; the open descriptor keeps the
lock. Then:

* :func:`settle`: the round that carried it committed; it moves to the removed folder.
* :func:`release`: the call failed or was cancelled; it goes back under its own name, so it is
  delivered again, in its place among the other files.
* the process died (SIGKILL, power loss): the kernel dropped the lock with the process, and the
  next reader's :func:`recover` puts the file back. No pid is involved, so a restarted agent
  that got the dead one's pid (the norm in containers) recovers its own claims.
"""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path

from ctxmw.inbox._files import (
    ABORT,
    FILE_MODE,
    READ_FLAGS,
    FileEntry,
    Skipped,
    candidates,
    link_no_clobber,
    make_dir,
    try_lock,
)

__all__ = ["Claim", "move_abort", "prune", "recover", "release", "settle", "take"]

_PREFIX = ".claim-"
_ID_LENGTH = 32


@dataclass(slots=True)
class Claim:
    """An inbox file held for one delivery: its open, locked descriptor and where it sits.

    Attributes:
        fd: the open descriptor; its ``flock`` marks the claim as alive.
        folder: the inbox.
        removed: where it goes once delivered.
        name: its name in the inbox.
        path: where it is now (a dotfile in the inbox).
    """

    fd: int
    folder: Path
    removed: Path
    name: str
    path: Path


def take(folder: Path, removed: Path, name: str, max_bytes: int) -> Claim | None:
    """Claim ``folder/name`` (read it from ``Claim.fd``); None if a writer or reader has it.

    Raises:
        Skipped: it is not a regular file, has other hard links, or is over ``max_bytes``.
        OSError: it could not be opened or renamed (``FileNotFoundError``: already taken).
    """
    path = folder / name
    fd = os.open(path, READ_FLAGS)
    try:
        if not try_lock(fd):
            os.close(fd)
            return None
        _check(path, os.fstat(fd), max_bytes)
        if os.lstat(path).st_ino != os.fstat(fd).st_ino:  # replaced since we opened it
            raise FileNotFoundError(path)
        target = folder / f"{_PREFIX}{uuid.uuid4().hex}-{name}"
        os.rename(path, target)
    except BaseException:
        os.close(fd)
        raise
    return Claim(fd, folder, removed, name, target)


def _check(path: Path, st: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise Skipped(f"Skipped inbox entry {str(path)!r}: it is not a regular file.")
    if st.st_nlink > 1:
        raise Skipped(
            f"Skipped inbox file {str(path)!r}: it has {st.st_nlink} hard links, so it may be a "
            "file from outside the inbox; it is never delivered. Write notes with "
            "ctxmw.inbox.deliver (or copy the file in) instead."
        )
    if st.st_size > max_bytes:
        raise Skipped(
            f"Skipped inbox file {str(path)!r}: {st.st_size} bytes is over inbox_max_bytes="
            f"{max_bytes}; it stays in the inbox. Shorten it or raise the setting."
        )


def settle(held: Claim, keep: int) -> None:
    """Move a delivered file to the removed folder (owner-only), then drop its lock."""
    try:
        os.fchmod(held.fd, FILE_MODE)
        make_dir(held.removed)
        _move(held.path, held.removed, held.name)
    finally:
        os.close(held.fd)
    prune(held.removed, keep)


def release(held: Claim) -> None:
    """Put a file whose delivery did not commit back into the inbox, under its own name."""
    try:
        _move(held.path, held.folder, held.name)
    finally:
        os.close(held.fd)


def recover(folder: Path) -> None:
    """Put back every claim whose holder is gone (its lock is free): it died mid-delivery."""
    try:
        names = [n for n in os.listdir(folder) if n.startswith(_PREFIX)]
    except (FileNotFoundError, NotADirectoryError):
        return
    for claimed in names:
        with contextlib.suppress(FileNotFoundError):
            _recover_one(folder, claimed)


def _recover_one(folder: Path, claimed: str) -> None:
    path = folder / claimed
    fd = os.open(path, READ_FLAGS)
    try:
        if try_lock(fd) and os.lstat(path).st_ino == os.fstat(fd).st_ino:
            _move(path, folder, claimed[len(_PREFIX) + _ID_LENGTH + 1 :] or "note")
    finally:
        os.close(fd)


def move_abort(folder: Path, removed: Path) -> None:
    """Move the ``abort`` entry, whatever its kind, to the removed folder (never followed)."""
    make_dir(removed)
    _move(folder / ABORT, removed, ABORT)


def _move(source: Path, target_folder: Path, name: str) -> None:
    """Give ``source`` the first unused name of ``name``, ``name.1``, ... in ``target_folder``."""
    for candidate in candidates(name):
        if link_no_clobber(source, target_folder / candidate):
            return


def prune(removed: Path, keep: int) -> None:
    """Delete the oldest delivered files beyond the newest ``keep`` (``inbox_keep_delivered``)."""
    try:
        with os.scandir(removed) as it:
            files = [_aged(e) for e in it if _deliverable(e)]
    except FileNotFoundError:
        return
    files.sort(key=lambda e: (e.mtime, os.fsencode(e.name)))
    for entry in files[: max(len(files) - keep, 0)]:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(removed / entry.name)


def _deliverable(entry: os.DirEntry[str]) -> bool:
    return not entry.name.startswith(".") and entry.is_file(follow_symlinks=False)


def _aged(entry: os.DirEntry[str]) -> FileEntry:
    st = entry.stat(follow_symlinks=False)
    return FileEntry(entry.name, st.st_size, st.st_mtime)
