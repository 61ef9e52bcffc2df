"""What a setting's value may be: the checks behind ``Settings``'s validators, and the message
a refused value gets (the key, its ``CTXMW_`` variable, the value, what is allowed)."""

from __future__ import annotations

import json
import math
import re
import string
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

__all__ = [
    "CACHE_RULES",
    "ENV_PREFIX",
    "cache_rule",
    "clamp_ratio",
    "describe",
    "empty_is_unset",
    "json_list",
    "notice",
    "patterns",
]

ENV_PREFIX = "CTXMW_"
CACHE_RULES = ("auto", "openai", "breakpoints", "gemini", "exact", "none")
"""Names ``cache_rule`` accepts; ``ctxmw.telemetry.rules`` documents each."""
_NOTICE_FIELDS = {"compacted", "dropped", "reason", "recover"}


def empty_is_unset(value: str | None) -> str | None:
    """An empty strategy list is unset: it must not silently disable every strategy (the
    abort switch included)."""
    return value if value is None or value.strip(" ,") else None


def json_list(value: Any) -> Any:
    """A list given as a JSON string (an environment variable) is parsed."""
    if not isinstance(value, str):
        return value
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, list):
        raise ValueError('expected a JSON list of strings, such as \'["read_file", "grep"]\'')
    return parsed


def clamp_ratio(value: float) -> float:
    """A negative or non-finite growth ratio means "no growth" (the seed's contract)."""
    return value if math.isfinite(value) and value > 0 else 0.0


def notice(value: str) -> str:
    """A compaction notice names only the placeholders it is formatted with."""
    fields = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
    unknown = fields - _NOTICE_FIELDS
    if unknown:
        raise ValueError(
            f"unknown placeholder(s) {sorted(unknown)}; allowed: {{compacted}}, {{dropped}}, "
            "{reason}, {recover}"
        )
    return value


def cache_rule(value: str) -> str:
    """One of :data:`CACHE_RULES`."""
    if value not in CACHE_RULES:
        raise ValueError(f"unknown cache rule; allowed: {', '.join(CACHE_RULES)}")
    return value


def patterns(value: list[str] | None) -> list[str] | None:
    """Every pattern compiles as a regular expression."""
    for pattern in value or ():
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{pattern!r} is not a regular expression ({exc})") from None
    return value


def describe(exc: ValidationError, values: Mapping[str, Any], fields: Mapping[str, Any]) -> str:
    """The message of a refused value: one sentence per error."""
    known = ", ".join(sorted(fields))
    lines = []
    for err in exc.errors():
        key = str(err["loc"][0]) if err["loc"] else "?"
        env = f"{ENV_PREFIX}{key.upper()}"
        if err["type"] == "extra_forbidden":
            lines.append(f"Unknown setting {key!r}. Known settings: {known}.")
            continue
        source = "argument" if key in values else f"environment variable {env}"
        lines.append(
            f"Invalid value {err.get('input')!r} for setting {key!r} (from {source}; "
            f"env name {env}): {err['msg']}. Fix or unset it."
        )
    return " ".join(lines)
