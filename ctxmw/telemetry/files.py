"""Telling a ledger from a transcript, so each loader can skip the other kind with a note.

ctxmw writes a save_file (``agent.jsonl``) and its ledger (``agent.jsonl.ledger.jsonl``) side by
side, so a glob such as ``runs/*.jsonl`` matches both. The readers (``replay``, ``show``, ``stats``)
classify each file from its name and its first record instead of failing on the wrong kind.
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal

from ctxmw._files import LEDGER_SUFFIX

__all__ = ["LEDGER_SUFFIX", "file_kind", "skip_note"]

_LEDGER_FIELDS = frozenset({"session", "model", "prompt_tokens", "cache_read_tokens"})

Kind = Literal["ledger", "messages", "unknown"]


def file_kind(path: str | os.PathLike[str], head: bytes) -> Kind:
    """What a file holds, judged from its first record (``head``: its first bytes) and name.

    Returns:
        ``"ledger"`` (telemetry records), ``"messages"`` (a transcript or a data set of
        conversations) or ``"unknown"`` (empty, or not JSON: the loader's own errors apply).
    """
    first = _first_record(head)
    if isinstance(first, list) or (isinstance(first, dict) and _holds_messages(first)):
        return "messages"
    if isinstance(first, dict) and first.keys() >= _LEDGER_FIELDS:
        return "ledger"
    return "ledger" if os.fspath(path).endswith(LEDGER_SUFFIX) else "unknown"


def skip_note(path: str | os.PathLike[str], kind: Kind, wanted: Kind) -> str | None:
    """The one-line note for a file of ``kind`` given to a reader of ``wanted``, else None."""
    if kind == wanted or kind == "unknown":
        return None
    name = os.fspath(path)
    if kind == "ledger":
        return f"skipped {name!r}: a telemetry ledger, not a transcript (read it with ctxmw stats)."
    return f"skipped {name!r}: it holds messages (a transcript), not a ledger's call records."


def _holds_messages(record: dict[str, Any]) -> bool:
    return "role" in record or isinstance(record.get("messages"), list)


def _first_record(head: bytes) -> Any:
    for line in head.splitlines():
        if line.strip():
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None
