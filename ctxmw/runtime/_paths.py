"""Whether a save_file path can hold a transcript, checked before anything is made beside it.

A folder, a FIFO or a device given as save_file, or a path through a file (``notes.txt/run.jsonl``),
is refused with :class:`~ctxmw.errors.InvalidSaveFileError` naming the save_file, before the lock
file or any folder is made: nothing is left on disk. A folder the save_file needs that cannot be
made is the same error, with the operating system's reason.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ctxmw.errors import InvalidSaveFileError

__all__ = ["check_save_file", "folder_error"]


def check_save_file(path: Path) -> None:
    """Worker thread: raise when ``path`` exists and is not a regular file, or runs through one.

    Raises:
        InvalidSaveFileError: what is wrong, naming the save_file.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return  # made by the first write; its missing folders by the lock
    except NotADirectoryError:
        raise _through_a_file(path) from None
    if stat.S_ISDIR(mode):
        example = str(path / "agent.jsonl")
        raise InvalidSaveFileError(
            str(path), "it is a folder", f"Pass a file in it instead, such as {example!r}."
        )
    if not stat.S_ISREG(mode):
        raise InvalidSaveFileError(
            str(path), "it is not a regular file", "Pass the path of a transcript file."
        )


def folder_error(save_file: Path, folder: Path, exc: OSError) -> InvalidSaveFileError:
    """The error for a save_file whose ``folder`` could not be made (``exc`` said why)."""
    reason = exc.strerror or str(exc)
    return InvalidSaveFileError(
        str(save_file),
        f"its folder {str(folder)!r} cannot be made ({reason})",
        "Pass a save_file in a folder you can create, or create the folder first.",
    )


def _through_a_file(path: Path) -> InvalidSaveFileError:
    blocker = next((p for p in reversed(path.parents) if p.exists() and not p.is_dir()), None)
    where = f"{str(blocker)!r} is a file" if blocker is not None else "a part of it is a file"
    return InvalidSaveFileError(
        str(path),
        f"its path runs through a file ({where}, not a folder)",
        "Pass a save_file whose folders are folders.",
    )
