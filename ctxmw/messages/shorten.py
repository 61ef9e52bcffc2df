"""The compacted form of strings, tool-call arguments and tool results.

All functions are pure and deterministic. Inside a session's strategy chain, results for
strings are memoised in the session's memo (see :mod:`ctxmw.messages._memo`): re-compacting an
old result costs a dict lookup instead of an md5 over its whole text, and the cache goes with the
session.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ctxmw.messages._memo import memoised

__all__ = ["MARKER_MAX", "compact_arguments", "compact_content", "shorten"]

MARKER_MAX = 48
"""Upper bound on what :func:`shorten` adds beyond ``limit``: the header and the cut mark."""

_CUT = "…"


def shorten(s: str, limit: int) -> str:
    """The compacted form of ``s``: at most ``limit`` characters of it plus a small marker.

    Unchanged when ``len(s) <= limit``. Otherwise ``[compacted: <len> chars, md5 <5 hex>] ``
    followed by a head and a tail of ``s`` joined by ``…``. Never longer than ``s`` (if the
    marker would make it so, ``s`` is returned) and never longer than ``limit + MARKER_MAX``.

    Args:
        s: the text to shorten.
        limit: how many characters of ``s`` to keep, head and tail together (>= 0).
    """
    if len(s) <= limit:
        return s
    short = _shorten_long(s, max(limit, 0))
    return s if short is None else short


# The memoised helpers return None for "unchanged": a cache hit hands back the object cached
# for an *equal* key, and callers rely on identity to reuse unchanged messages.
@memoised()
def _shorten_long(s: str, limit: int) -> str | None:
    digest = hashlib.md5(s.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()
    keep = max(limit - len(_CUT), 0)
    head = (keep + 1) // 2
    tail = keep - head
    body = s[:head] + _CUT + (s[len(s) - tail :] if tail else "")
    out = f"[compacted: {len(s)} chars, md5 {digest[:5]}] {body}"
    return out if len(out) < len(s) else None


def compact_arguments(arguments: str, limit: int) -> str:
    """Compact the top-level string values of a call's JSON ``arguments``.

    Nested values and non-strings are untouched. Arguments that are not a JSON object are
    returned verbatim (malformed material is never "fixed"). The JSON is re-serialised, keys in
    their original order, only if a value changed; otherwise ``arguments`` itself is returned.
    """
    short = _compact_arguments(arguments, limit)
    return arguments if short is None else short


@memoised()
def _compact_arguments(arguments: str, limit: int) -> str | None:
    try:
        parsed = json.loads(arguments)
    except (ValueError, TypeError):
        return None
    if not isinstance(parsed, dict):
        return None
    changed = False
    for key, value in parsed.items():
        if isinstance(value, str) and len(value) > limit:
            short = shorten(value, limit)
            if short is not value:
                parsed[key] = short
                changed = True
    return json.dumps(parsed, ensure_ascii=False) if changed else None


def compact_content(content: Any, limit: int) -> Any:
    """Compact a tool result's content: a string, or a list of content parts.

    In a list, each text part's text is shortened and every non-text part becomes a short text
    placeholder. Anything else is returned unchanged (the same object).
    """
    if isinstance(content, str):
        return shorten(content, limit)
    if not isinstance(content, list):
        return content
    parts = [_compact_part(part, limit) for part in content]
    if all(new is old for new, old in zip(parts, content, strict=True)):
        return content
    return parts


def _compact_part(part: Any, limit: int) -> Any:
    if not isinstance(part, dict):
        return part
    if part.get("type") == "text" and isinstance(part.get("text"), str):
        text = shorten(part["text"], limit)
        return part if text is part["text"] else {**part, "text": text}
    kind = part.get("type", "unknown")
    return {"type": "text", "text": f"[compacted: {kind} part omitted]"}
