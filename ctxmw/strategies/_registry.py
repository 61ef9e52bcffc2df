"""The strategy registry: names to callables, built-ins plus the ``ctxmw.strategies`` plugins."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TypeVar

from ctxmw.errors import UnknownStrategyError, UsageError
from ctxmw.types import Strategy

__all__ = [
    "ENTRY_POINT_GROUP",
    "StrategyInfo",
    "get_strategy",
    "list_strategies",
    "register_strategy",
]

ENTRY_POINT_GROUP = "ctxmw.strategies"

S = TypeVar("S", bound=Strategy)


@dataclass(frozen=True, slots=True)
class StrategyInfo:
    """A registered strategy: its name, the callable and a one-line description."""

    name: str
    strategy: Strategy
    description: str


_registry: dict[str, StrategyInfo] = {}
_plugins_loaded = False


def register_strategy(
    name: str, *, description: str | None = None, replace: bool = False
) -> Callable[[S], S]:
    """Register a prompt strategy under ``name`` (a decorator).

    Args:
        name: the name users pass in ``prompt_strategies``; no commas or spaces, not ``none``.
        description: one line for ``ctxmw strategies``; defaults to the docstring's first line.
        replace: allow replacing a strategy already registered under this name.

    Raises:
        UsageError: the name is malformed or taken (and ``replace`` is false).
    """
    _check_name(name)

    def decorator(strategy: S) -> S:
        if name in _registry and not replace and _registry[name].strategy is not strategy:
            raise UsageError(
                f"A prompt strategy named {name!r} is already registered "
                f"({_registry[name].strategy!r}); pick another name or pass replace=True."
            )
        text = description if description is not None else _first_line(strategy)
        _registry[name] = StrategyInfo(name, strategy, text)
        return strategy

    return decorator


def get_strategy(name: str) -> Strategy:
    """The strategy registered under ``name``.

    Raises:
        UnknownStrategyError: nothing is registered under that name; lists what is.
    """
    if name not in _registry:
        _load_plugins()
    try:
        return _registry[name].strategy
    except KeyError:
        raise UnknownStrategyError(name, sorted(_registry)) from None


def list_strategies() -> list[StrategyInfo]:
    """Every registered strategy (built-ins and plugins), sorted by name."""
    _load_plugins()
    return [_registry[name] for name in sorted(_registry)]


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _registry:
            continue
        strategy = ep.load()
        if not callable(strategy):
            raise UsageError(
                f"Entry point {ep.name!r} = {ep.value!r} in group {ENTRY_POINT_GROUP!r} is not "
                "callable; it must name a strategy (messages, ctx) -> list."
            )
        _registry[ep.name] = StrategyInfo(ep.name, strategy, _first_line(strategy))


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise UsageError(f"Strategy name {name!r} must be a non-empty string without padding.")
    if "," in name or any(ch.isspace() for ch in name):
        raise UsageError(f"Strategy name {name!r} must not contain commas or whitespace.")
    if name == "none":
        raise UsageError("'none' is reserved: it means 'no strategy'. Pick another name.")


def _first_line(obj: object) -> str:
    """The docstring's first line as plain text: ``name`` literals become 'name'."""
    doc = inspect.getdoc(obj) or ""
    line = doc.strip().splitlines()[0] if doc.strip() else ""
    return re.sub(r"``([^`]+)``", r"'\1'", line)
