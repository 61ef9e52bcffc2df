"""The default ledger: where calls without a save_file are recorded, with no configuration.

``ctxmw.acompletion`` called without a ``save_file`` appends its records to
``<state dir>/calls.ledger.jsonl``, and ``ctxmw stats`` with no argument reads them. The state
folder is the ``state_dir`` setting, else ``$XDG_STATE_HOME/ctxmw``, else
``~/.local/state/ctxmw`` (the XDG base-directory convention for state that is not worth
backing up, such as logs). The ``default_ledger`` setting turns it off.

Owner-only whatever the umask: the folder and the parents it lacks are made ``0700``, the file
``0600`` (a ledger holds counts and digests, never content, but session ids and model names are
the owner's business). A folder that is a symbolic link, another user's, or writable by another
user is refused, and a link in it is never followed: the calls go on unrecorded, with one WARNING
per folder and process naming it and the settings that move the ledger or turn it off.
Rotated by size: once the file reaches ``ledger_max_bytes`` the next record first moves it to
``calls.old.ledger.jsonl`` (replacing the one before), so at most about twice that stays on disk.
Several processes may share the file: each append is one ``write`` under an exclusive ``flock``
on the file, and a writer that finds the file it locked already rotated away opens the new one.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import logging
import os
import stat
from pathlib import Path

from ctxmw._files import private_dirs, write_all
from ctxmw.settings import Settings
from ctxmw.telemetry.record import LedgerWriter, ledger_path

__all__ = [
    "DEFAULT_LEDGER_NAME",
    "OLD_LEDGER_NAME",
    "RotatingLedger",
    "announce",
    "default_ledger_path",
    "default_ledgers",
    "ledger_writer",
    "state_dir",
]

DEFAULT_LEDGER_NAME = "calls.ledger.jsonl"
OLD_LEDGER_NAME = "calls.old.ledger.jsonl"


def state_dir(settings: Settings | None = None) -> Path:
    """ctxmw's per-user state folder (see the module docstring); not created here."""
    settings = settings if settings is not None else Settings()
    if settings.state_dir:
        return Path(settings.state_dir).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME", "")
    if os.path.isabs(xdg):  # the XDG spec: a relative value is invalid and ignored
        return Path(xdg) / "ctxmw"
    return Path.home() / ".local" / "state" / "ctxmw"


def default_ledger_path(settings: Settings | None = None) -> Path | None:
    """The default ledger file, or None when the ``default_ledger`` setting turns it off."""
    settings = settings if settings is not None else Settings()
    if not settings.default_ledger or not settings.telemetry:
        return None
    return state_dir(settings) / DEFAULT_LEDGER_NAME


def default_ledgers(settings: Settings | None = None) -> list[Path]:
    """The default ledger's files that exist, oldest first (what ``ctxmw stats`` reads)."""
    folder = state_dir(settings)
    return [p for p in (folder / OLD_LEDGER_NAME, folder / DEFAULT_LEDGER_NAME) if p.is_file()]


def ledger_writer(
    save_file: str | os.PathLike[str] | None,
    ledger: str | os.PathLike[str] | None,
    settings: Settings,
) -> LedgerWriter | None:
    """Where a recorder appends: beside its save_file, else ``ledger`` (rotated), else nowhere."""
    if save_file is not None:
        return LedgerWriter(ledger_path(save_file))
    if ledger is not None:
        return RotatingLedger(ledger, settings.ledger_max_bytes)
    return None


class RotatingLedger(LedgerWriter):
    """A :class:`~ctxmw.telemetry.record.LedgerWriter` for the default ledger: its folder
    owner-only and checked, the file rotated once it reaches ``max_bytes``.

    Args:
        path: the ledger file.
        max_bytes: the size at which the next record starts a new file.
    """

    def __init__(self, path: str | os.PathLike[str], max_bytes: int) -> None:
        super().__init__(path)
        self.max_bytes = max_bytes

    def advice(self) -> str:
        """What moves or stops the default ledger (named in the one warning of a failure)."""
        return (
            "Point the state_dir setting (CTXMW_STATE_DIR) at a folder of yours, or set "
            "CTXMW_DEFAULT_LEDGER=false to turn the default ledger off."
        )

    def _append(self, data: bytes) -> None:
        folder = _state_folder(self.path.parent)
        try:
            self._append_in(folder, data)
        finally:
            os.close(folder)

    def _append_in(self, folder: int, data: bytes) -> None:
        name = self.path.name
        for _ in range(3):  # another process may rotate it between our open and our lock
            fd = os.open(name, _APPEND, 0o600, dir_fd=folder)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if _rotated_away(fd, name, folder):
                    continue
                if os.fstat(fd).st_size >= self.max_bytes:
                    os.replace(name, OLD_LEDGER_NAME, src_dir_fd=folder, dst_dir_fd=folder)
                    continue  # the next turn creates the new file
                write_all(fd, _after_torn_tail(fd, data))
                return
            finally:
                os.close(fd)  # closing releases the lock
        logging.getLogger("ctxmw").warning(
            "ctxmw: the default ledger %s kept moving under this process; one record was not "
            "written.",
            self.path,
        )


# O_NOFOLLOW: a link planted in the folder is refused (ELOOP), never followed.
_APPEND = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _state_folder(folder: Path) -> int:
    """The state folder, opened (a descriptor every name is then resolved against), made
    owner-only with its missing parents if absent.

    Raises:
        OSError: it cannot be made or opened, or it is not safe to write: a symbolic link,
            another user's, or writable by another user (the message says which).
    """
    private_dirs(folder)
    try:
        fd = os.open(folder, _FOLDER)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and folder.is_symlink():
            raise PermissionError(
                f"{folder} is a symbolic link; ctxmw writes only into a real folder"
            ) from None
        raise
    try:
        _check_owner(os.fstat(fd), folder)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_owner(st: os.stat_result, folder: Path) -> None:
    uid = os.getuid()
    if st.st_uid != uid:
        raise PermissionError(f"{folder} belongs to user id {st.st_uid}, not to this user ({uid})")
    others = st.st_mode & 0o002 or (st.st_mode & 0o020 and st.st_gid != os.getgid())
    if others:
        raise PermissionError(
            f"{folder} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}): "
            "anyone who can write it can plant a link there"
        )


def _rotated_away(fd: int, name: str, folder: int) -> bool:
    try:
        current = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return True
    mine = os.fstat(fd)
    if (current.st_dev, current.st_ino) != (mine.st_dev, mine.st_ino):
        return True
    if mine.st_size == 0:
        os.fchmod(fd, 0o600)  # a new file, whatever the umask made of its mode
    return False


def _after_torn_tail(fd: int, data: bytes) -> bytes:
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        return b"\n" + data  # a writer killed mid-line: its line stays one unreadable line
    return data


@functools.cache
def announce(path: Path | None) -> None:
    """The first stateless call of a process says, once, where its calls are recorded."""
    where = (
        f"appended to {path} (read them with: ctxmw stats; CTXMW_DEFAULT_LEDGER=false turns "
        "this off)"
        if path is not None
        else "not written to a ledger (the default_ledger setting is off)"
    )
    logging.getLogger("ctxmw").info(
        "ctxmw telemetry: calls without a save_file are %s. A call that names no conversation "
        "(no session=, save_file or litellm_session_id) is grouped with the calls of this "
        "process it continues, by its opening messages: session 'head-<digest>@<pid>.<tag>'; "
        "one that continues none starts a new session.",
        where,
    )
