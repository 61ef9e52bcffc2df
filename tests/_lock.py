"""Whether a save_file's lock is free, as another process would find it."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ctxmw.runtime.lock import lock_path


def lock_is_free(save_file: Path) -> bool:
    """True when no writer holds ``save_file``'s lock and its file names nobody (or is gone).

    The ``flock`` is tried through a descriptor of our own: a lock held by this very process
    through another descriptor (a session's turn) still conflicts with it.
    """
    try:
        fd = os.open(lock_path(save_file), os.O_RDWR)
    except FileNotFoundError:
        return True
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fd, fcntl.LOCK_UN)
        return os.fstat(fd).st_size == 0
    finally:
        os.close(fd)
