"""ctxmw's own arguments of one call, wherever the caller put them.

Code that calls ``litellm.acompletion`` itself (an agent framework) can only pass what the
framework passes through: extra keyword arguments, and ``metadata``. So ctxmw's options are read
from both: keyword arguments first, then ``metadata={"ctxmw": {...}}``. Both are removed from what
goes to the provider: a local path or a strategy list has no business in a request body. Which
conversation a call belongs to is :mod:`ctxmw.runtime.identity`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxmw.errors import UsageError

__all__ = ["OPTION_NAMES", "split_options"]

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


def split_options(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split one call's keyword arguments into (ctxmw's options, what litellm gets).

    ``metadata["ctxmw"]`` supplies options not given as keyword arguments; the rest of
    ``metadata`` is passed on (a ``metadata`` left empty is dropped).

    Raises:
        UsageError: ``metadata["ctxmw"]`` is not a mapping or names an unknown option.
    """
    rest = dict(kwargs)
    options = {name: rest.pop(name) for name in OPTION_NAMES if name in rest}
    metadata = rest.get("metadata")
    if isinstance(metadata, Mapping) and "ctxmw" in metadata:
        given = metadata["ctxmw"]
        for name, value in _checked(given).items():
            options.setdefault(name, value)
        kept = {k: v for k, v in metadata.items() if k != "ctxmw"}
        if kept:
            rest["metadata"] = kept
        else:
            del rest["metadata"]
    return options, rest


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
