"""Offloaded tool results: where the originals are kept.

The ``offload`` strategy replaces a large tool result, the first time it is sent, by a fixed
preview that names a *handle*; the original goes to a :class:`ResultStore` first, so a handle
the model sees can always be read back. The model reads it with the read-back tool
(:data:`~ctxmw.context.readback.READBACK_TOOL`, ``ctxmw_expand`` by ``offset`` and ``limit``),
which ctxmw answers itself: from the conversation, else from the store
(:func:`~ctxmw.context.readback.answer` with ``store=``).

Stores:

* :class:`FileResultStore`: one JSON file per handle in a folder beside the save_file
  (``dir/agent.jsonl`` -> ``dir/agent.jsonl.offload/``, see :func:`store_dir`), owner-only (folder
  ``0o700``, files ``0o600``, under any umask), written whole to a temporary file, fsynced and
  renamed into place, so a crash leaves either the whole record or none; a write that fails (a
  full disk) raises :class:`~ctxmw.errors.SaveFileWriteError` and leaves nothing. A damaged
  record is reported once and read as missing; symbolic links are never followed.
* :class:`MemoryResultStore`: a dict, for sessions without a save_file (and for replay).

Any object with the two async methods of :class:`ResultStore` works (a shared store for a fleet
of agents, e.g. Redis: ``put`` is ``SET handle record NX``, ``get`` is ``GET``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol, runtime_checkable

from ctxmw._files import Beside
from ctxmw.context._file_store import FileResultStore
from ctxmw.context._record import OffloadedResult, handle_for

__all__ = [
    "FileResultStore",
    "MemoryResultStore",
    "OffloadedResult",
    "ResultStore",
    "handle_for",
    "store_dir",
]


@runtime_checkable
class ResultStore(Protocol):
    """Where offloaded originals live. Both methods are async; ``put`` is idempotent."""

    async def put(self, record: OffloadedResult) -> None:
        """Store ``record`` under its handle (a handle already stored keeps its record)."""
        ...

    async def get(self, handle: str) -> OffloadedResult | None:
        """The record stored under ``handle``, or None."""
        ...


class MemoryResultStore:
    """A store in a dict: for sessions without a save_file, and for replay."""

    def __init__(self) -> None:
        self._records: dict[str, OffloadedResult] = {}

    async def put(self, record: OffloadedResult) -> None:
        """Store ``record`` unless its handle is already stored."""
        self._records.setdefault(record.handle, record)

    async def get(self, handle: str) -> OffloadedResult | None:
        """The record of ``handle``, or None."""
        return self._records.get(handle)


def store_dir(save_file: str | os.PathLike[str]) -> Path:
    """The folder beside a save_file: ``dir/agent.jsonl`` -> ``dir/agent.jsonl.offload/``
    (the whole file name, as for the inbox and the ledger)."""
    return Beside.of(save_file).offload
