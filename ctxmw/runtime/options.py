"""ctxmw's own arguments of one call, wherever the caller put them.

Code that calls ``litellm.acompletion`` itself (an agent framework) can only pass what the
framework passes through, so ctxmw's options are read, in this order of precedence, from:

1. keyword arguments (``save_file=...``);
2. ``metadata={"ctxmw": {...}}``;
3. ``litellm_metadata={"ctxmw": {...}}`` (litellm's own metadata argument);
4. ``extra_body={"metadata": {"ctxmw": {...}}}`` (agno sends ``LiteLLM(metadata=...)`` there).

Every ``ctxmw`` entry is removed from what goes to the provider, and a carrier left empty is
dropped: a local path or a strategy list has no business in a request body. Which conversation
a call belongs to is :mod:`ctxmw.runtime.identity`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxmw.errors import UsageError

__all__ = ["OPTION_NAMES", "check_rounds", "pop_ctxmw_entries", "split_options", "without_ctxmw"]

OPTION_NAMES = (
    "max_rounds",
    "on_call",
    "prompt_strategies",
    "save_file",
    "session",
    "settings",
    "strategy_options",
)
"""ctxmw's arguments of ``acompletion`` (besides ``tools`` and ``completion``)."""

_CARRIERS = ("metadata", "litellm_metadata")


def split_options(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split one call's keyword arguments into (ctxmw's options, what litellm gets).

    Raises:
        UsageError: a ``ctxmw`` entry is not a mapping or names an unknown option.
    """
    rest = dict(kwargs)
    options = {name: rest.pop(name) for name in OPTION_NAMES if name in rest}
    for given in pop_ctxmw_entries(rest):
        for name, value in _checked(given).items():
            options.setdefault(name, value)
    return options, rest


def without_ctxmw(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` with every ``ctxmw`` entry of its carriers removed (the entries unchecked)."""
    rest = dict(kwargs)
    pop_ctxmw_entries(rest)
    return rest


def pop_ctxmw_entries(rest: dict[str, Any]) -> list[object]:
    """Remove the ``ctxmw`` entry of every carrier in ``rest`` (in place); the entries, in order
    of precedence."""
    found = [entry for name in _CARRIERS for entry in _pop_entry(rest, name)]
    extra = rest.get("extra_body")
    if isinstance(extra, Mapping):
        body = dict(extra)
        found += _pop_entry(body, "metadata")
        if body != extra:
            _put(rest, "extra_body", body)
    return found


def _pop_entry(holder: dict[str, Any], name: str) -> list[object]:
    metadata = holder.get(name)
    if not isinstance(metadata, Mapping) or "ctxmw" not in metadata:
        return []
    _put(holder, name, {k: v for k, v in metadata.items() if k != "ctxmw"})
    return [metadata["ctxmw"]]


def _put(holder: dict[str, Any], name: str, value: dict[str, Any]) -> None:
    if value:
        holder[name] = value
    else:
        del holder[name]


def _checked(given: Any) -> Mapping[str, Any]:
    if not isinstance(given, Mapping):
        raise UsageError(
            f'metadata["ctxmw"]={given!r} must be a mapping of ctxmw options, e.g. '
            '{"save_file": "agent.jsonl", "prompt_strategies": ["compact"]}.'
        )
    unknown = sorted(str(k) for k in given if k not in OPTION_NAMES)
    if unknown:
        raise UsageError(
            f'metadata["ctxmw"] names unknown option(s) {unknown!r}; the allowed ones are '
            f"{', '.join(OPTION_NAMES)}. Pass litellm's own arguments outside metadata."
        )
    return given


def check_rounds(max_rounds: int | None, default: int) -> int:
    """``max_rounds`` as given (``default`` when None), checked.

    Raises:
        UsageError: it is not an integer >= 1.
    """
    if max_rounds is None:
        return default
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise UsageError(f"max_rounds={max_rounds!r} must be an integer >= 1.")
    return max_rounds
