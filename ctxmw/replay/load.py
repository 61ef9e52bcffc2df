"""Loading transcripts to replay: save_files, JSON lists of messages, JSONL of conversations.

Accepted files:

- a save_file (JSON Lines, one message per line), read by the save_file's own loader (a torn last
  line is ignored with a warning);
- a JSON file holding a list of messages, or an object with a ``messages`` list (a request body);
- a JSON Lines file with one conversation per line (a list of messages, or an object with a
  ``messages`` list, as in fine-tuning data sets): each line is a transcript named ``path:line``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from ctxmw.errors import InvalidTranscriptError, UsageError
from ctxmw.runtime.transcript import TranscriptFile
from ctxmw.telemetry.files import file_kind, skip_note
from ctxmw.types import Messages

__all__ = ["load_transcript", "synthetic_name"]

logger = logging.getLogger("ctxmw")
_HEAD = 1 << 16  # bytes enough to hold a ledger's first record


def synthetic_name(n_calls: int, seed: int) -> str:
    """How a synthetic transcript is named in replay results."""
    return f"synthetic:{n_calls}:seed={seed}"


async def load_transcript(
    path: str | os.PathLike[str], *, on_skip: Callable[[str], None] | None = None
) -> dict[str, Messages]:
    """The transcript(s) of one file, by name (the path, or ``path:line`` for JSONL datasets).

    A ledger (``*.ledger.jsonl``, which ``runs/*.jsonl`` also matches) is not an error: it is
    skipped, with a one-line note passed to ``on_skip`` (default: a warning on the ``ctxmw``
    logger), and nothing is returned for it.

    Raises:
        UsageError: the file cannot be read.
        InvalidTranscriptError: it holds something other than messages.
    """
    name = str(path)
    try:
        data = await anyio.Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"Cannot read transcript {name!r}: {exc.strerror}.") from exc
    note = skip_note(name, file_kind(name, data[:_HEAD]), "messages")
    if note is not None:
        (on_skip or logger.warning)(note)
        return {}
    whole = _parse(data)
    if whole is not None and not (isinstance(whole, dict) and "role" in whole):
        return {name: _messages(whole, name)}
    lines = [(n, line) for n, line in enumerate(data.splitlines(), start=1) if line.strip()]
    first = _parse(lines[0][1]) if lines else None
    if not lines or (isinstance(first, dict) and "role" in first):
        return {name: await TranscriptFile(Path(path)).load()}
    found: dict[str, Messages] = {}
    for n, line in lines:
        found[f"{name}:{n}"] = _messages(_parse(line), f"{name}:{n}")
    return found


def _parse(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def _messages(value: Any, name: str) -> Messages:
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if not isinstance(value, list):
        raise InvalidTranscriptError(
            f"{name!r} holds {type(value).__name__}, not a list of messages: expected a save_file "
            "(one message per line), a JSON list of messages, or one conversation per line.",
            0,
        )
    for i, message in enumerate(value):
        if not isinstance(message, dict) or "role" not in message:
            raise InvalidTranscriptError(
                f"{name!r}: item {i} is not a message (a JSON object with a 'role').", i
            )
    return value
