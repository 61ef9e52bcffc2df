"""Follow growing ledgers, as ``tail -f`` does, for ``ctxmw stats --follow``.

Synchronous like the rest of the stats side: it serves the command line, never an agent's loop.
Only whole lines are read (a record still being written waits for its newline); a file that
shrank (rotated or rewritten) is read again from its start; a file that does not exist yet is
waited for.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["follow_ledgers"]


def follow_ledgers(
    paths: Sequence[str | os.PathLike[str]],
    *,
    poll_s: float = 1.0,
    idle_s: float | None = None,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[list[dict[str, Any]]]:
    """Yield the records of ``paths`` in batches: first all there is, then each poll's new ones.

    Args:
        paths: ledger files (``*.ledger.jsonl``).
        poll_s: seconds between polls.
        idle_s: stop once this many seconds passed without a new record (None: never).
        sleep: waits between polls (default ``time.sleep``, looked up at each call).
        clock: a monotonic clock (injectable for tests).
    """
    tails = [_Tail(Path(p)) for p in paths]
    wait = sleep if sleep is not None else time.sleep
    last = clock()
    first = True
    while True:
        batch = [record for tail in tails for record in tail.read()]
        if batch or first:
            yield batch
            last = clock()
        first = False
        if idle_s is not None and clock() - last >= idle_s:
            return
        wait(poll_s)


class _Tail:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.rest = b""

    def read(self) -> list[dict[str, Any]]:
        try:
            size = self.path.stat().st_size
            if size < self.offset:  # rotated or rewritten: start again
                self.offset, self.rest = 0, b""
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        *lines, self.rest = (self.rest + data).split(b"\n")
        return [r for r in map(_parse, lines) if r is not None]


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None  # a blank or torn line
    return record if isinstance(record, dict) else None
