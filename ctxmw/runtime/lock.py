"""The lock file that keeps two writers off one save_file: ``agent.jsonl.lock``.

The lock is the kernel's ``flock`` on that file, held through an open descriptor for one turn
(``Session.ask``/``run``, one ``acompletion`` call), never between turns; while held, the file
also names its holder (pid and host name) for the error message and for humans. The file stays
beside the save_file between turns, empty: creating and removing it every turn cost two
directory updates (measured ~0.45 ms a turn against ~0.03 ms for truncating it).

Stale locks: a writer that was killed (SIGKILL, power loss) leaves the file behind, but the
kernel drops its ``flock`` with the process. A file whose ``flock`` is free is therefore stale
and is taken over (with a log line), whatever pid it names: a restarted agent that got the dead
one's pid (the norm in containers) takes its own stale lock back. Taking it is atomic: of any
number of processes that find one stale lock at the same instant, exactly one gets the
``flock``; the others are refused. The holder empties the file while it still holds the lock,
so a file that names a process and whose ``flock`` is free is one a killed writer left; a process
that locked a file which was removed meanwhile (a human, an older ctxmw) starts over.

A lock that names another host is never taken (its holder's liveness cannot be known here):
:class:`~ctxmw.errors.SaveFileBusy` names the lock file so a human can remove it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
from pathlib import Path

import anyio
import anyio.to_thread

from ctxmw._files import Beside, private_dirs
from ctxmw.errors import SaveFileBusy
from ctxmw.runtime._paths import folder_error

__all__ = ["SaveFileLock", "lock_path"]

logger = logging.getLogger("ctxmw")

_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)


def lock_path(save_file: Path) -> Path:
    """The lock file of ``save_file``: the same name with ``.lock`` appended."""
    return Beside.of(save_file).lock


class SaveFileLock:
    """An exclusive, cross-process lock on one save_file.

    Args:
        save_file: the transcript to protect.
    """

    def __init__(self, save_file: Path) -> None:
        self.save_file = save_file
        self._path = str(lock_path(save_file))
        self.held = False
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        """The lock file."""
        return Path(self._path)

    async def acquire(self) -> None:
        """Take the lock.

        Raises:
            SaveFileBusy: another live writer holds it.
        """
        await anyio.to_thread.run_sync(self.acquire_now)

    def acquire_now(self) -> None:
        """Worker thread: :meth:`acquire`, for a caller folding it into a trip of its own."""
        self._fd = self._acquire()
        self.held = True

    async def release(self) -> None:
        """Give the lock back; a no-op when it is not held. Runs even when cancelled."""
        if not self.held:
            return
        self.held = False
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._release)

    def release_now(self) -> None:
        """Worker thread: :meth:`release`, for a caller folding it into a trip of its own."""
        if self.held:
            self.held = False
            self._release()

    def _acquire(self) -> int:
        try:
            private_dirs(self.path.parent)
        except OSError as exc:
            raise folder_error(self.save_file, self.path.parent, exc) from exc
        while True:
            fd = os.open(self._path, _FLAGS, 0o600)
            try:
                if self._locked(fd):
                    self._claim(fd)
                    return fd
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # the file was removed after we opened it: open the current one

    def _locked(self, fd: int) -> bool:
        """Lock ``fd``; False if it is no longer the file at ``self.path``."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            pid = holder[0] if holder is not None else None
            raise SaveFileBusy(str(self.save_file), self._path, pid) from None
        try:
            return os.stat(self._path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False

    def _claim(self, fd: int) -> None:
        """Write our name into a lock file we hold, after checking what it said before."""
        before = _holder(fd)
        if before is not None and before[1] != socket.gethostname():
            raise SaveFileBusy(str(self.save_file), self._path, before[0])
        if before is not None:
            logger.warning(
                "Taking over the stale lock %s of process %d, which is no longer running.",
                self.path,
                before[0],
            )
        os.fchmod(fd, 0o600)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{socket.gethostname()}\n".encode(), 0)

    def _release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)  # still under our flock: the file names nobody once free
        finally:
            os.close(fd)


def _holder(fd: int) -> tuple[int, str] | None:
    try:
        pid_text, host = os.pread(fd, 4096, 0).decode("utf-8").split("\n")[:2]
        return int(pid_text), host
    except (OSError, ValueError):
        return None
