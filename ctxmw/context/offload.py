"""Offloaded tool results: where the originals are kept, and the one tool that reads them back.

The ``offload`` strategy replaces a large tool result, the first time it is sent, by a fixed
preview that names a *handle*; the original goes to a :class:`ResultStore` first, so a handle
the model sees can always be read back. The model reads it with one tool, :data:`EXPAND_TOOL`
(``ctxmw_expand(handle, offset, limit)``), whose schema is a constant: no handle list in it, so
the tools block (the first bytes of every cached prompt) never changes.

Stores:

* :class:`FileResultStore`: one JSON file per handle in a folder beside the save_file
  (``dir/agent.jsonl`` -> ``dir/agent.offload/``, see :func:`store_dir`), owner-only (folder
  ``0o700``, files ``0o600``, under any umask), written whole to a temporary file, fsynced and
  renamed into place, so a crash leaves either the whole record or none; a write that fails (a
  full disk) raises :class:`~ctxmw.errors.SaveFileWriteError` and leaves nothing. A damaged
  record is reported once and read as missing; symbolic links are never followed.
* :class:`MemoryResultStore`: a dict, for sessions without a save_file (and for replay).

Any object with the two async methods of :class:`ResultStore` works (a shared store for a fleet
of agents, e.g. Redis: ``put`` is ``SET handle record NX``, ``get`` is ``GET``).

Stateless callers answer the model's ``ctxmw_expand`` calls with :func:`answer_expand`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ctxmw._files import Beside
from ctxmw.context._file_store import FileResultStore
from ctxmw.context._record import HANDLE, OffloadedResult, handle_for
from ctxmw.errors import UsageError

__all__ = [
    "EXPAND_TOOL",
    "EXPAND_TOOL_NAME",
    "FileResultStore",
    "MemoryResultStore",
    "OffloadedResult",
    "ResultStore",
    "answer_expand",
    "expand",
    "handle_for",
    "store_dir",
]

EXPAND_TOOL_NAME = "ctxmw_expand"
EXPAND_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": EXPAND_TOOL_NAME,
        "description": "Read part of a tool result that ctxmw shortened to a preview. The "
        "preview names its handle and the original's length in characters.",
        "parameters": {
            "type": "object",
            "properties": {
                "handle": {"type": "string", "description": "The handle the preview names."},
                "offset": {
                    "type": "integer",
                    "description": "First character to return (0: the start).",
                },
                "limit": {"type": "integer", "description": "How many characters to return."},
            },
            "required": ["handle"],
        },
    },
}
"""The retrieval tool's schema: the same dict in every prompt of every session."""

ECHO_CHARS = 100
"""The most of a bad argument an error text repeats (see :func:`echo`)."""


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
    """The folder beside a save_file: ``dir/agent.jsonl`` -> ``dir/agent.offload/``.

    Only the last extension is replaced, as for the inbox and the ledger.
    """
    return Beside.of(save_file).offload


async def expand(
    store: ResultStore, handle: Any, offset: Any = 0, limit: Any = None, *, max_chars: int = 8000
) -> str:
    """The text answering ``ctxmw_expand(handle, offset, limit)``; problems become error text.

    Args:
        store: where the originals are.
        handle: the handle the preview names.
        offset: the first character to return.
        limit: how many characters (default and at most ``max_chars``).
        max_chars: the largest slice one call returns (the ``readback_max_chars`` setting).
    """
    if not isinstance(handle, str) or not HANDLE.fullmatch(handle):
        return f"Error: {echo(handle)} is not a handle; copy the 16 hex digits the preview names."
    record = await store.get(handle)
    if record is None:
        return (
            f"Error: the original of {handle!r} is gone (never stored here, or its record was "
            "lost or damaged): it cannot be read back. Work from the preview, or run the tool "
            "again if you need its output."
        )
    total = len(record.content)
    if not _int(offset) or not 0 <= offset <= total:
        return f"Error: offset={echo(offset)} must be an integer from 0 to {total} (the length)."
    if limit is not None and (not _int(limit) or limit < 1):
        return f"Error: limit={echo(limit)} must be an integer >= 1 (at most {max_chars})."
    end = min(offset + min(limit or max_chars, max_chars), total)
    rest = "the end" if end == total else f"next offset {end}"
    return f"[{handle}: characters {offset}-{end} of {total}; {rest}]\n{record.content[offset:end]}"


def echo(value: Any, limit: int = ECHO_CHARS) -> str:
    """``repr(value)``, cut to about ``limit`` characters: an error text never repeats a huge
    argument back to the model (it would cost as much as the original it stands for)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 20]}... ({len(text)} characters in all)"


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


async def answer_expand(
    call: Mapping[str, Any], store: ResultStore, *, max_chars: int = 8000
) -> dict[str, Any]:
    """The ``tool`` message answering one ``ctxmw_expand`` tool call (for stateless callers).

    Args:
        call: the tool call, as in the assistant message's ``tool_calls``.
        store: the store the ``offload`` strategy wrote to: ``FileResultStore(store_dir(
            save_file))`` when it ran with a save_file.
        max_chars: the largest slice returned.

    Raises:
        UsageError: ``call`` is not a ``ctxmw_expand`` call.
    """
    function = call.get("function")
    name = function.get("name") if isinstance(function, Mapping) else None
    if name != EXPAND_TOOL_NAME:
        raise UsageError(
            f"answer_expand got a call of {echo(name)}; it answers {EXPAND_TOOL_NAME!r} calls only."
        )
    raw = function.get("arguments") if isinstance(function, Mapping) else None
    try:
        args = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except (ValueError, RecursionError):  # RecursionError: thousands of nested brackets
        args = None
    if not isinstance(args, dict):
        text = f"Error: the arguments {echo(raw)} are not a JSON object."
    else:
        text = await expand(
            store, args.get("handle"), args.get("offset", 0), args.get("limit"), max_chars=max_chars
        )
    return {"role": "tool", "tool_call_id": str(call.get("id", "")), "content": text}
