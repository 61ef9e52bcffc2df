"""Durable items and the survival check: what compaction must never lose, and proof it did not.

A *durable pattern* is a regular expression (compiled with ``re.MULTILINE``). Every match in a
text is a *durable item* (the match, stripped); every line holding the start of a match is a
*durable line*. Compaction keeps durable lines verbatim; the survival check then asserts that
every durable item still appears literally in what is sent. A pattern that spans lines cannot be
kept line by line: the check catches that instead of letting the item vanish.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from ctxmw.messages._memo import memoised
from ctxmw.messages.form import call_arguments, tool_calls_of

__all__ = [
    "DEFAULT_DURABLE_PATTERNS",
    "durable_items",
    "durable_lines",
    "message_text",
    "missing_items",
    "protected_tokens",
]

DEFAULT_DURABLE_PATTERNS: tuple[str, ...] = (
    # Lines an agent writes to be remembered.
    r"^[ \t]*(?:DECISION|OPEN|ERROR)\b[^\n]*",
    # Business identifiers: ORD-10442, INV-2024001, #884213.
    r"\b[A-Z]{2,5}-\d{3,}\b",
    r"(?<![\w#])#\d{4,}\b",
    # Amounts: $1,250.00, € 30, 42.50 EUR.
    r"[$€£]\s?\d[\d,]*(?:\.\d+)?",
    r"\b\d[\d,]*(?:\.\d+)?\s?(?:USD|EUR|GBP)\b",
    # Tracking numbers: UPS 1Z..., UPU S10 (RA123456789DE).
    r"\b1Z[0-9A-Z]{16}\b",
    r"\b[A-Z]{2}\d{9}[A-Z]{2}\b",
)
"""Used when the ``durable_patterns`` setting is unset."""

_ID_KEYS = frozenset({"id", "status", "status_code", "statusCode", "code", "http_status", "state"})
_KEY_VALUE = re.compile(
    r"\b(?:[A-Za-z]+_)?(?:id|status|status_code|code)\s*[:=]\s*\"?([A-Za-z0-9][\w.:/-]*)"
)


@lru_cache(maxsize=64)
def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.MULTILINE) for p in patterns)


@memoised()
def durable_items(text: str, patterns: tuple[str, ...]) -> tuple[str, ...]:
    """Every durable item of ``text``, in order of first appearance, without repeats."""
    found: dict[str, None] = {}
    for pattern in _compiled(patterns):
        for match in pattern.finditer(text):
            item = match.group(0).strip()
            if item:
                found.setdefault(item, None)
    return tuple(found)


@memoised()
def durable_lines(text: str, patterns: tuple[str, ...]) -> tuple[str, ...]:
    """Every line of ``text`` where a durable item starts, stripped of its line end."""
    compiled = _compiled(patterns)
    return tuple(
        line.rstrip()
        for line in text.splitlines()
        if line.strip() and any(p.search(line) for p in compiled)
    )


def missing_items(items: Iterable[str], haystack: str) -> list[str]:
    """The items that do not appear literally in ``haystack`` (the survival check)."""
    return [item for item in items if item not in haystack]


def message_text(msg: Any) -> str:
    """The text a model reads in one message: its content and its tool-call arguments."""
    if not isinstance(msg, dict):
        return ""
    parts = [content_text(msg.get("content"))]
    for tc in tool_calls_of(msg):
        arguments = call_arguments(tc)
        if isinstance(arguments, str):
            parts.append(arguments)
    return "\n".join(part for part in parts if part)


def content_text(content: Any) -> str:
    """The text of a message content: a string, or the text parts of a list joined by lines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def protected_tokens(text: str, patterns: Sequence[str]) -> tuple[str, ...]:
    """Ids and status codes a tool-result compressor must keep, plus the durable items.

    From JSON: the scalar value of every key named ``id``, ``*_id``, ``*Id``, ``status``,
    ``status_code``, ``code`` or ``state``, at any depth. From plain text: ``id: X``,
    ``status=X``, ``order_id: X`` and the like.
    """
    found: dict[str, None] = dict.fromkeys(_json_tokens(text))
    found.update(dict.fromkeys(m.group(1) for m in _KEY_VALUE.finditer(text)))
    found.update(dict.fromkeys(durable_items(text, tuple(patterns))))
    return tuple(found)


def _json_tokens(text: str) -> list[str]:
    try:
        data = json.loads(text)
    except ValueError:
        return []
    out: list[str] = []
    _walk(data, out)
    return out


def _walk(data: Any, out: list[str]) -> None:
    if isinstance(data, dict):
        for key, value in data.items():
            scalar = isinstance(value, str | int) and not isinstance(value, bool)
            if scalar and value != "" and _is_protected_key(str(key)):
                out.append(str(value))
            _walk(value, out)
    elif isinstance(data, list):
        for item in data:
            _walk(item, out)


def _is_protected_key(key: str) -> bool:
    return key in _ID_KEYS or key.endswith(("_id", "Id", "ID", "-id"))
