"""``FileResultStore``: offloaded originals as owner-only files, safe under faults.

Each record is ``<handle>.json`` in the store's folder, written to a temporary dotfile, checked
whole (a short write on a full disk raises, it never passes for a record), fsynced and renamed
into place: a crash leaves the whole record or none. A write that fails raises
:class:`~ctxmw.errors.SaveFileWriteError` naming the record and leaves nothing behind.

Reading trusts nothing in the folder. A record that is not a regular file of its own (a
symbolic link, a FIFO, a hard link to another file), that does not parse, or whose content does
not hash to its handle is *damaged*: it is reported once (a WARNING naming the file, never its
content), moved aside to ``.<handle>.json.damaged``, and read as missing, so the model is told
the original is gone and the ``offload`` strategy writes it again from the transcript when it
has it. Temporary files that a killed writer left are removed when a store first writes, once
they are an hour old (a live writer's are seconds old).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import tempfile
import time
from pathlib import Path

import anyio.to_thread

from ctxmw._files import fsync_dir, private_dirs, write_all
from ctxmw.context._record import HANDLE, OffloadedResult, check_handle, parse_record
from ctxmw.errors import SaveFileWriteError

__all__ = ["STALE_TEMP_SECONDS", "FileResultStore"]

logger = logging.getLogger("ctxmw")

STALE_TEMP_SECONDS = 3600
"""Age after which a temporary file in the store is a dead writer's (removed on first write)."""

_READ_FLAGS = (
    os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)


class FileResultStore:
    """One owner-only JSON file per handle in ``directory`` (created on the first put).

    Args:
        directory: the folder; :func:`~ctxmw.context.offload.store_dir` gives the one beside a
            save_file.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._swept = False
        self._reported: set[str] = set()

    async def put(self, record: OffloadedResult) -> None:
        """Write ``record`` crash-safely, unless its handle is already stored.

        Raises:
            SaveFileWriteError: the record could not be written whole (disk full, a file size
                limit, permissions); no record and no temporary file is left.
        """
        await anyio.to_thread.run_sync(self._put, record)

    async def get(self, handle: str) -> OffloadedResult | None:
        """The record of ``handle``, or None (also for a string that is not a handle, and for a
        damaged record, which is reported once and moved aside)."""
        if not HANDLE.fullmatch(handle):
            return None
        return await anyio.to_thread.run_sync(self._get, handle)

    def _put(self, record: OffloadedResult) -> None:
        path = self._path(record.handle)
        if _stored(path):
            return
        try:
            private_dirs(self.directory)
            self._sweep()
            _write_record(self.directory, path, record.to_json())
        except OSError as exc:
            raise SaveFileWriteError(str(path), exc, what="offload record") from exc

    def _get(self, handle: str) -> OffloadedResult | None:
        path = self._path(handle)
        try:
            data = _read_own_file(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._set_aside(path, _why(exc))
            return None
        record = parse_record(data, handle)
        if record is None:
            self._set_aside(path, "it is not a whole record of this handle")
        return record

    def _path(self, handle: str) -> Path:
        return self.directory / f"{check_handle(handle)}.json"

    def _set_aside(self, path: Path, why: str) -> None:
        """Report a damaged record once and move it out of the way (kept for inspection)."""
        aside = path.with_name(f".{path.name}.damaged")
        try:
            os.replace(path, aside)
        except OSError:
            aside = path
        if str(path) in self._reported:
            return
        self._reported.add(str(path))
        logger.warning(
            "ctxmw: the offload record %s is damaged (%s); it is treated as missing (the model "
            "is told its original is gone) and was left at %s.",
            path,
            why,
            aside,
        )

    def _sweep(self) -> None:
        """Remove the temporary files of writers killed long ago (once per store object)."""
        if self._swept:
            return
        self._swept = True
        cutoff = time.time() - STALE_TEMP_SECONDS
        with contextlib.suppress(OSError), os.scandir(self.directory) as entries:
            for entry in entries:
                if _stale_temp(entry, cutoff):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)


def _stored(path: Path) -> bool:
    """Whether a record file is in place (a symlink or an empty file is not one)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size > 0


def _write_record(directory: Path, path: Path, data: bytes) -> None:
    """Temporary file, whole write, fsync, rename, directory fsync; on failure no file is left."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".", suffix=".tmp")  # 0o600, O_EXCL
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)  # replaces a symlink itself, never what it points to
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(directory)


def _read_own_file(path: Path) -> bytes:
    """The bytes of ``path`` if it is a regular file with one link, never through a symlink."""
    fd = os.open(path, _READ_FLAGS)
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise OSError(errno.EINVAL, "not a regular file of its own")
        return handle.read()


def _why(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "it is a symbolic link, which is never followed"
    return f"it cannot be read: {exc.strerror or type(exc).__name__}"


def _stale_temp(entry: os.DirEntry[str], cutoff: float) -> bool:
    if not (entry.name.startswith(".") and entry.name.endswith(".tmp")):
        return False
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_mtime < cutoff
