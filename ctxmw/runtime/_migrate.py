"""Beside-files under the names of earlier versions, moved to today's on a save_file's first turn.

Earlier versions named the files beside ``agent.jsonl`` from its stem (``agent.ledger.jsonl``,
``agent.inbox/``, ``agent.inbox_removed/``, ``agent.offload/``), which ``agent.json`` shared.
Today every name follows the whole file name (:class:`~ctxmw._files.Beside`). The first turn of
a process on a save_file, under its lock and in the worker thread of the trip before the turn,
moves what it finds under an old name:

* to the new name, when nothing is there yet (one ``rename``);
* into the new folder, entry by entry, when both folders exist (a note delivered to the new
  inbox before the agent's first turn): an entry whose name is taken stays where it was;
* nowhere, with one WARNING, when the old name may be another save_file's: a file beside it has
  the same stem (``agent.json`` beside ``agent.jsonl``), or the new ledger exists too. Move those
  by hand (``mv agent.inbox agent.jsonl.inbox``) once you know whose they are.

A save_file without old names costs four ``lstat`` calls, once per process.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path

from ctxmw._files import LEGACY, Beside
from ctxmw.inbox._files import link_no_clobber

__all__ = ["migrate_beside"]

logger = logging.getLogger("ctxmw")


def migrate_beside(save_file: Path) -> None:
    """Worker thread, under the save_file's lock: move old-named beside-files (module docstring).

    A move that fails is logged and the turn goes on with the new names.
    """
    try:
        _migrate(Beside.of(save_file))
    except OSError as exc:
        _once(f"ctxmw could not move the files beside {save_file} to their new names: {exc}.")


def _migrate(beside: Beside) -> None:
    save_file = beside.save_file
    found = [
        kind
        for kind in LEGACY
        if beside.legacy(kind) != beside.named(kind) and os.path.lexists(beside.legacy(kind))
    ]  # a save_file without an extension kept its names
    if not found:
        return
    others = _same_stem(save_file, beside)
    if others:
        _leave(beside, found, f"{', '.join(others)} may own them too")
        return
    for kind in found:
        old, new = beside.legacy(kind), beside.named(kind)
        if not os.path.lexists(new):
            os.rename(old, new)
        elif old.is_dir() and not old.is_symlink() and new.is_dir():
            _merge(old, new)
        else:
            _leave(beside, [kind], f"{new.name} exists too")


def _same_stem(save_file: Path, beside: Beside) -> list[str]:
    """Files beside ``save_file`` whose old names would be the same: another save_file's."""
    ours = {save_file.name, *(beside.legacy(kind).name for kind in LEGACY)}
    with os.scandir(save_file.parent) as entries:
        return sorted(
            e.name
            for e in entries
            if e.name not in ours and Path(e.name).stem == save_file.stem and e.is_file()
        )


def _merge(old: Path, new: Path) -> None:
    """Move each entry of ``old`` into ``new`` unless its name is taken; ``old`` goes if empty."""
    kept = [e.name for e in os.scandir(old) if not link_no_clobber(Path(e.path), new / e.name)]
    if kept:
        _once(
            f"ctxmw left {len(kept)} entries in {old}: {new} already holds entries of the same "
            f"names ({', '.join(sorted(kept)[:5])}). Compare them and move what is still wanted "
            "by hand."
        )
        return
    os.rmdir(old)


def _leave(beside: Beside, kinds: list[str], why: str) -> None:
    _once(
        f"ctxmw left {', '.join(str(beside.legacy(kind)) for kind in kinds)} under the names of "
        f"an earlier version ({why}): the save_file {beside.save_file} now uses "
        f"{', '.join(beside.named(kind).name for kind in kinds)}. Move them by hand once you "
        "know whose they are."
    )


@functools.cache
def _once(message: str) -> None:
    """One WARNING per message and process: a conversation's every retry would repeat it."""
    logger.warning("%s", message)
