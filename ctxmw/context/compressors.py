"""Per-tool result compressors: the few fields the model needs, instead of generic truncation.

Register one with ``@ctxmw.compressor("tool_name")``. The shortening strategies call it for a
result of that tool in their *compacted* tier only (full results are never touched). It gets the
result text and the call's parsed arguments and returns a shorter text. Ids and status codes are
never compressed away: the output is checked against the original (every ``id``/``*_id``/
``status``/``code`` value and every durable item must still appear literally); if one vanished,
or the output is not shorter, the generic compacted form is used instead and a warning says why.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias, TypeVar

from ctxmw.context.survival import missing_items, protected_tokens
from ctxmw.errors import UsageError
from ctxmw.messages._memo import memoised
from ctxmw.messages.shorten import compact_content

__all__ = [
    "Compressor",
    "apply_compressor",
    "compressor",
    "compressor_registry",
    "get_compressor",
    "unregister",
]

Compressor: TypeAlias = Callable[[str, dict[str, Any]], str]
"""``(result_text, call_arguments) -> shorter_text``; arguments are ``{}`` when not JSON."""

C = TypeVar("C", bound=Compressor)

_compressors: dict[str, Compressor] = {}
_log = logging.getLogger("ctxmw")


def compressor(tool_name: str, *, replace: bool = False) -> Callable[[C], C]:
    """Register a result compressor for ``tool_name`` (a decorator).

    Args:
        tool_name: the function name of the tool whose results it compresses.
        replace: allow replacing a compressor already registered for this tool.

    Raises:
        UsageError: the name is empty or already has a compressor (and ``replace`` is false).
    """
    if not isinstance(tool_name, str) or not tool_name.strip():
        raise UsageError(f"Compressor tool name {tool_name!r} must be a non-empty string.")

    def decorator(fn: C) -> C:
        old = _compressors.get(tool_name)
        if old is not None and old is not fn and not replace:
            raise UsageError(
                f"Tool {tool_name!r} already has a compressor ({old!r}); pass replace=True "
                "to replace it or ctxmw.context.compressors.unregister(name) first."
            )
        _compressors[tool_name] = fn
        return fn

    return decorator


def get_compressor(tool_name: str) -> Compressor | None:
    """The compressor registered for ``tool_name``, if any."""
    return _compressors.get(tool_name)


def compressor_registry() -> tuple[tuple[str, Compressor], ...]:
    """The registered compressors as one value: a memoised compacted result depends on it."""
    return tuple(_compressors.items())


def unregister(tool_name: str) -> None:
    """Forget the compressor of ``tool_name`` (no error if there is none)."""
    _compressors.pop(tool_name, None)


def apply_compressor(
    content: Any, tool_name: str, arguments: Any, limit: int, patterns: Sequence[str]
) -> Any:
    """The compacted form of one tool result: its tool's compressor, else generic shortening.

    Args:
        content: the result content.
        tool_name: the name of the call it answers.
        arguments: the call's raw arguments (JSON text).
        limit: ``short_output_length``, for the generic form.
        patterns: the durable patterns that must survive compression.
    """
    fn = _compressors.get(tool_name)
    if fn is None or not isinstance(content, str) or len(content) <= limit:
        return compact_content(content, limit)
    args = arguments if isinstance(arguments, str) else ""
    short = _compress(fn, tool_name, content, args, tuple(patterns))
    return compact_content(content, limit) if short is None else short


@memoised()
def _compress(
    fn: Compressor, tool_name: str, content: str, arguments: str, patterns: tuple[str, ...]
) -> str | None:
    out = fn(content, _parse(arguments))
    if not isinstance(out, str):
        raise UsageError(
            f"The compressor for tool {tool_name!r} returned {type(out).__name__}, "
            "expected str; return the shortened result text."
        )
    if len(out) >= len(content):
        return None  # nothing gained: the generic form is at least as short
    lost = missing_items(protected_tokens(content, patterns), out)
    if lost:
        _log.warning(  # the tokens are message content: counted, never logged
            "ctxmw: the compressor for tool %r dropped %d protected token(s); "
            "using generic shortening for this result instead.",
            tool_name,
            len(lost),
        )
        return None
    return out


def _parse(arguments: str) -> dict[str, Any]:
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
