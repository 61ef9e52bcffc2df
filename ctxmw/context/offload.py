"""Offloaded tool results: where the originals are kept, and the one tool that reads them back.

The ``offload`` strategy replaces a large tool result, the first time it is sent, by a fixed
preview that names a *handle*; the original goes to a :class:`ResultStore` first, so a handle
the model sees can always be read back. The model reads it with one tool, :data:`EXPAND_TOOL`
(``ctxmw_expand(handle, offset, limit)``), whose schema is a constant: no handle list in it, so
the tools block (the first bytes of every cached prompt) never changes.

Stores:

* :class:`FileResultStore`: one JSON file per handle in a folder beside the save_file
  (``dir/agent.jsonl`` -> ``dir/agent.offload/``, see :func:`store_dir`), owner-only (folder
  ``0o700``, files ``0o600``, under any umask), written to a temporary file, fsynced and renamed
  into place, so a crash leaves either the whole record or none.
* :class:`MemoryResultStore`: a dict, for sessions without a save_file (and for replay).

Any object with the two async methods of :class:`ResultStore` works (a shared store for a fleet
of agents, e.g. Redis: ``put`` is ``SET handle record NX``, ``get`` is ``GET``).

Stateless callers answer the model's ``ctxmw_expand`` calls with :func:`answer_expand`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio.to_thread

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

_HANDLE = re.compile(r"[0-9a-f]{16}")


@dataclass(frozen=True, slots=True)
class OffloadedResult:
    """One offloaded tool result.

    Attributes:
        handle: 16 hex digits, derived from the call id and the content.
        tool_call_id: the id of the call the result answers.
        tool_name: the tool's name.
        content: the original result text.
        preview: what the model is shown instead (frozen: the same on every call).
    """

    handle: str
    tool_call_id: str
    tool_name: str
    content: str
    preview: str

    def to_json(self) -> bytes:
        """The stored form."""
        return json.dumps(asdict(self), ensure_ascii=False).encode("utf-8", "surrogatepass")

    @classmethod
    def from_json(cls, data: bytes) -> OffloadedResult:
        """Read the stored form back."""
        return cls(**json.loads(data.decode("utf-8", "surrogatepass")))


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


class FileResultStore:
    """One owner-only JSON file per handle in ``directory`` (created on the first put).

    Args:
        directory: the folder; :func:`store_dir` gives the one beside a save_file.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    async def put(self, record: OffloadedResult) -> None:
        """Write ``record`` crash-safely, unless its handle is already stored."""
        await anyio.to_thread.run_sync(self._put, record)

    async def get(self, handle: str) -> OffloadedResult | None:
        """The record of ``handle``, or None (also for a string that is not a handle)."""
        if not _HANDLE.fullmatch(handle):
            return None
        return await anyio.to_thread.run_sync(self._get, handle)

    def _put(self, record: OffloadedResult) -> None:
        path = self._path(record.handle)
        if path.exists():
            return
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)  # mkdir's mode is filtered by the umask
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".tmp")  # 0o600
        try:
            os.write(fd, record.to_json())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _fsync_dir(self.directory)

    def _get(self, handle: str) -> OffloadedResult | None:
        try:
            return OffloadedResult.from_json(self._path(handle).read_bytes())
        except FileNotFoundError:
            return None

    def _path(self, handle: str) -> Path:
        if not _HANDLE.fullmatch(handle):
            raise UsageError(f"{handle!r} is not an offload handle (16 hex digits).")
        return self.directory / f"{handle}.json"


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def store_dir(save_file: str | os.PathLike[str]) -> Path:
    """The folder beside a save_file: ``dir/agent.jsonl`` -> ``dir/agent.offload/``.

    Only the last extension is replaced, as for the inbox and the ledger.
    """
    path = Path(save_file)
    return path.with_name(f"{path.stem if path.suffix else path.name}.offload")


def handle_for(tool_call_id: str, content: str) -> str:
    """The handle of one result: the same call id and content always give the same handle."""
    h = hashlib.sha256(tool_call_id.encode("utf-8", "surrogatepass") + b"\0")
    h.update(content.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:16]


async def expand(
    store: ResultStore, handle: Any, offset: Any = 0, limit: Any = None, *, max_chars: int = 8000
) -> str:
    """The text answering ``ctxmw_expand(handle, offset, limit)``; problems become error text.

    Args:
        store: where the originals are.
        handle: the handle the preview names.
        offset: the first character to return.
        limit: how many characters (default and at most ``max_chars``).
        max_chars: the largest slice one call returns (the ``offload_expand_max_chars`` setting).
    """
    if not isinstance(handle, str) or not _HANDLE.fullmatch(handle):
        return f"Error: {handle!r} is not a handle; copy the 16 hex digits the preview names."
    record = await store.get(handle)
    if record is None:
        return f"Error: no offloaded result has the handle {handle!r}."
    total = len(record.content)
    if not _int(offset) or not 0 <= offset <= total:
        return f"Error: offset={offset!r} must be an integer from 0 to {total} (the length)."
    if limit is not None and (not _int(limit) or limit < 1):
        return f"Error: limit={limit!r} must be an integer >= 1 (at most {max_chars})."
    end = min(offset + min(limit or max_chars, max_chars), total)
    rest = "the end" if end == total else f"next offset {end}"
    return f"[{handle}: characters {offset}-{end} of {total}; {rest}]\n{record.content[offset:end]}"


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
            f"answer_expand got a call of {name!r}; it answers {EXPAND_TOOL_NAME!r} calls only."
        )
    raw = function.get("arguments") if isinstance(function, Mapping) else None
    try:
        args = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except ValueError:
        args = None
    if not isinstance(args, dict):
        text = f"Error: the arguments {raw!r} are not a JSON object."
    else:
        text = await expand(
            store, args.get("handle"), args.get("offset", 0), args.get("limit"), max_chars=max_chars
        )
    return {"role": "tool", "tool_call_id": str(call.get("id", "")), "content": text}
