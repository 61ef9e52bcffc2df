"""The filesystem habits every file ctxmw writes shares: owner-only, whole writes, no symlinks.

* :func:`private_dirs`: the folders ctxmw creates are ``0o700`` whatever the umask (an existing
  folder is never changed: it is the user's).
* :func:`write_all`: a ``write`` may write less than asked (a full disk, a file size limit);
  the rest is written, or an :class:`OSError` says why not. Nothing short passes for whole.
* :func:`fsync_dir`: a created or renamed name survives a power loss.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["DIR_MODE", "fsync_dir", "private_dirs", "write_all"]

DIR_MODE = 0o700


def private_dirs(folder: Path) -> None:
    """Create ``folder`` and its missing parents, each owner-only; existing ones are left as is."""
    missing: list[Path] = []
    while not folder.exists():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for path in reversed(missing):
        try:
            os.mkdir(path, DIR_MODE)
        except FileExistsError:  # made by another process meanwhile: theirs, as they made it
            continue
        os.chmod(path, DIR_MODE)  # the umask may have taken owner bits away; never adds others'


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, however many ``write`` calls it takes.

    Raises:
        OSError: a write failed, or wrote nothing (``ENOSPC``): the caller undoes what was written.
    """
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


def fsync_dir(directory: Path) -> None:
    """Make the names in ``directory`` (a file created or renamed there) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
