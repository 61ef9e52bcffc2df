"""The one canonical JSON of content: compact, keys sorted (re-exported by
:mod:`ctxmw.messages.canonical`, which documents both canonical forms)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["canonical_json", "json_default"]


def canonical_json(value: Any) -> str:
    """Compact JSON of any JSON-like value, keys sorted: equal content, equal text."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=json_default
    )


def json_default(value: Any) -> Any:
    """What a non-JSON value is written as: a pydantic model's dump, else its repr."""
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else repr(value)
