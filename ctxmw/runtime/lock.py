"""The lock file that keeps two writers off one save_file: ``agent.jsonl.lock``.

The lock is a file created atomically (written under a temporary name, then hard-linked to the
lock name, which fails if it exists), so it always holds its owner's pid and host name. It is held
for one turn (``Session.ask``/``run``, one ``acompletion`` call), never between turns.

Stale locks: a writer that was killed (SIGKILL, power loss) leaves its lock behind. A lock whose
pid is no longer running on this host is removed and taken over, with a log line. A lock from
another host, or from a live process, is never touched: :class:`~ctxmw.errors.SaveFileBusy` names
the lock file so a human can remove it. Recovery assumes two processes do not reclaim the same
stale lock at the same instant.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

import anyio
import anyio.to_thread

from ctxmw.errors import SaveFileBusy

__all__ = ["SaveFileLock", "lock_path"]

logger = logging.getLogger("ctxmw")


def lock_path(save_file: Path) -> Path:
    """The lock file of ``save_file``: the same name with ``.lock`` appended."""
    return save_file.with_name(save_file.name + ".lock")


class SaveFileLock:
    """An exclusive, cross-process lock on one save_file.

    Args:
        save_file: the transcript to protect.
    """

    def __init__(self, save_file: Path) -> None:
        self.save_file = save_file
        self.path = lock_path(save_file)
        self.held = False

    async def acquire(self) -> None:
        """Take the lock.

        Raises:
            SaveFileBusy: another live writer holds it.
        """
        await anyio.to_thread.run_sync(self._acquire)
        self.held = True

    async def release(self) -> None:
        """Give the lock back; a no-op when it is not held. Runs even when cancelled."""
        if not self.held:
            return
        self.held = False
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._release)

    def _acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self._try_create():
            return
        holder = _holder(self.path)
        if holder is not None and _is_stale(holder):
            logger.warning(
                "Removing stale lock %s of process %d, which is no longer running.",
                self.path,
                holder[0],
            )
            self.path.unlink(missing_ok=True)
            if self._try_create():
                return
            holder = _holder(self.path)
        raise SaveFileBusy(str(self.save_file), str(self.path), holder[0] if holder else None)

    def _try_create(self) -> bool:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.{id(self)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, f"{os.getpid()}\n{socket.gethostname()}\n".encode())
        finally:
            os.close(fd)
        try:
            os.link(tmp, self.path)
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)
        return True

    def _release(self) -> None:
        self.path.unlink(missing_ok=True)


def _holder(path: Path) -> tuple[int, str] | None:
    try:
        pid_text, host = path.read_text(encoding="utf-8").split("\n")[:2]
        return int(pid_text), host
    except (OSError, ValueError):
        return None


def _is_stale(holder: tuple[int, str]) -> bool:
    pid, host = holder
    if host != socket.gethostname() or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, owned by someone else
        return False
    return False
