"""Distinctive strings: the identifiers, paths and numbers an agent copies from what it read.

One definition, shared by the loss measure (:mod:`ctxmw.replay.loss`, which counts the ones the
next action took from a tool result that the prompt no longer shows) and the default strategy
(which keeps full the results the agent has already taken such strings from):

- **A token** is a maximal run of the characters ``A-Z a-z 0-9 _ . / : -`` with leading and
  trailing ``. / : -`` trimmed. So ``src/ctxmw/replay.py:142``, ``Spotter.Repo``,
  ``max_tool_chars`` and ``2024-06-01`` are tokens; quotes, brackets, commas, spaces and
  backslashes end them.
- **A distinctive string** is a token of at least :data:`MIN_LENGTH` (8) characters holding a
  mark that plain words lack: a digit, ``_``, ``/``, ``.``, ``:``, a ``-`` between two letters
  or digits, or an inner capital (``LiveView``, ``HTTPServer``). A lone word, however long, is
  never distinctive.
- **What an assistant message says** (:func:`action_text`): its text and the string values of
  its tool-call arguments, decoded from JSON (so keys such as ``file_path`` are not read).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from ctxmw.context.survival import content_text
from ctxmw.messages.form import call_arguments, tool_calls_of

__all__ = ["MIN_LENGTH", "action_text", "distinctive"]

MIN_LENGTH = 8
"""The shortest distinctive string, in characters."""

_RUN = re.compile(r"[A-Za-z0-9_./:\-]+")
_TRIM = "./:-"
_MARK = re.compile(r"[0-9_./:]|[A-Za-z0-9]-[A-Za-z0-9]|[a-z][A-Z]|[A-Z][A-Z][a-z]")


def distinctive(text: str) -> list[str]:
    """The distinctive strings of ``text``, each once, in order of first appearance."""
    found: dict[str, None] = {}
    for run in _RUN.findall(text):
        token = run.strip(_TRIM)
        if len(token) >= MIN_LENGTH and _MARK.search(token):
            found[token] = None
    return list(found)


def action_text(message: Any) -> str:
    """What an assistant message says: its text and the string values of its tool arguments."""
    parts = [content_text(message.get("content")) if isinstance(message, Mapping) else ""]
    for tc in tool_calls_of(message):
        parts.extend(_strings(_decoded(call_arguments(tc))))
    return "\n".join(part for part in parts if part)


def _decoded(arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments  # a model's malformed arguments are still what it wrote


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
