"""Where the proxy's ledger records go: a JSONL file per replica, or a Redis list.

A proxy record is the library's ledger object (:class:`~ctxmw.telemetry.record.CallRecord`,
``session`` = the conversation) plus ``identity`` (how the conversation was recognised, see
:mod:`ctxmw.runtime.identity`) and ``replica``. The same object goes into the request's
spend-log metadata (``metadata.spend_logs_metadata.ctxmw``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol

import anyio

from ctxmw.state import DEFAULT_TTL_S

__all__ = ["REDIS_LEDGER_KEY", "FileLedger", "LedgerSink", "RedisLedger"]

REDIS_LEDGER_KEY = "ctxmw:ledger"
"""The Redis list the ``redis`` ledger appends to (newest last, capped)."""


class LedgerSink(Protocol):
    """Takes one proxy record (a JSON-ready dict)."""

    async def write(self, record: dict[str, Any]) -> None:
        """Store one record."""
        ...


class FileLedger:
    """Appends records to one file, one JSON line each, owner-only."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = anyio.Lock()

    async def write(self, record: dict[str, Any]) -> None:
        """Append one line (one worker-thread hop)."""
        data = (json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        async with self._lock:
            await anyio.to_thread.run_sync(self._append, data)

    def _append(self, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


class RedisLedger:
    """Appends records to the Redis list :data:`REDIS_LEDGER_KEY`, keeping the newest ``cap``.

    Args:
        client: a ``redis.asyncio.Redis``.
        cap: records kept.
    """

    def __init__(self, client: Any, cap: int = 1_000_000) -> None:
        self._redis = client
        self._cap = cap

    async def write(self, record: dict[str, Any]) -> None:
        """Append one record (one pipeline: push, trim, expire)."""
        line = json.dumps(record, separators=(",", ":"), ensure_ascii=False)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.rpush(REDIS_LEDGER_KEY, line)
            pipe.ltrim(REDIS_LEDGER_KEY, -self._cap, -1)
            pipe.expire(REDIS_LEDGER_KEY, DEFAULT_TTL_S)
            await pipe.execute()
