"""The filesystem habits every file ctxmw writes shares: owner-only, whole writes, no symlinks.

* :func:`private_dirs`: the folders ctxmw creates are ``0o700`` whatever the umask (an existing
  folder is never changed: it is the user's).
* :func:`write_all`: a ``write`` may write less than asked (a full disk, a file size limit);
  the rest is written, or an :class:`OSError` says why not. Nothing short passes for whole.
* :func:`fsync_dir`: a created or renamed name survives a power loss.
* :class:`Beside`: the names of the files and folders ctxmw keeps beside a save_file.
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass
from pathlib import Path

from ctxmw.errors import UsageError

__all__ = [
    "DIR_MODE",
    "LEDGER_SUFFIX",
    "LEGACY",
    "Beside",
    "fsync_dir",
    "private_dirs",
    "write_all",
]

DIR_MODE = 0o700
LEDGER_SUFFIX = ".ledger.jsonl"


def private_dirs(folder: Path) -> None:
    """Create ``folder`` and its missing parents, each owner-only; existing ones are left as is.

    Raises:
        OSError: a folder could not be made; the ones this call made are removed again.
    """
    missing: list[Path] = []
    while not folder.exists():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    made: list[Path] = []
    try:
        for path in reversed(missing):
            try:
                os.mkdir(path, DIR_MODE)
            except FileExistsError:  # made by another process meanwhile: theirs, as they made it
                continue
            made.append(path)
            os.chmod(path, DIR_MODE)  # the umask may have taken owner bits away; never adds any
    except OSError:
        for path in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(path)
        raise


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


_NAMES = {
    "ledger": LEDGER_SUFFIX[1:],
    "inbox": "inbox",
    "inbox_removed": "inbox_removed",
    "offload": "offload",
}
"""Every name ctxmw keeps beside a save_file (the lock aside): what follows the save_file's whole
name and a dot. One more name is one more entry here and a property on :class:`Beside`."""

LEGACY = ("ledger", "inbox", "inbox_removed", "offload")
"""The names earlier versions derived from the save_file's stem (``agent.inbox`` for both
``agent.jsonl`` and ``agent.json``): found there once and moved (:mod:`ctxmw.runtime._migrate`)."""


@dataclass(frozen=True, slots=True)
class Beside:
    """The files and folders ctxmw keeps beside a save_file, all named here.

    Every name is the save_file's whole name followed by a suffix, so two save_files never share
    one (``agent.jsonl`` and ``agent.json`` included). For ``dir/agent.jsonl``:
    ``agent.jsonl.lock``, ``agent.jsonl.ledger.jsonl``, ``agent.jsonl.inbox/``,
    ``agent.jsonl.inbox_removed/`` and ``agent.jsonl.offload/``.
    """

    save_file: Path

    @classmethod
    def of(cls, save_file: str | os.PathLike[str]) -> Beside:
        """The names beside ``save_file``.

        Raises:
            UsageError: ``save_file`` names no file (``""``, ``"/"``).
        """
        path = Path(save_file)
        if not path.name:
            raise UsageError(
                f"save_file {os.fspath(save_file)!r} names no file; pass the transcript's path, "
                "such as 'runs/agent.jsonl'."
            )
        return cls(path)

    @property
    def lock(self) -> Path:
        """The lock file: the save_file's name with ``.lock`` appended."""
        return self.save_file.with_name(self.save_file.name + ".lock")

    @property
    def ledger(self) -> Path:
        """The telemetry ledger."""
        return self.named("ledger")

    @property
    def inbox(self) -> Path:
        """The inbox folder."""
        return self.named("inbox")

    @property
    def inbox_removed(self) -> Path:
        """Where delivered inbox files go."""
        return self.named("inbox_removed")

    @property
    def offload(self) -> Path:
        """The offloaded tool results' folder."""
        return self.named("offload")

    def named(self, kind: str) -> Path:
        """The path of ``kind`` (a key of the names table) beside the save_file."""
        return self.save_file.with_name(f"{self.save_file.name}.{_NAMES[kind]}")

    def legacy(self, kind: str) -> Path:
        """Where earlier versions kept ``kind`` (one of :data:`LEGACY`): the stem's name."""
        return self.save_file.with_name(f"{self.save_file.stem}.{_NAMES[kind]}")
