"""The built-in prompt strategies, one module each; importing this package registers them.

``ctxmw.strategies.compact`` is the module; the strategy object is
``ctxmw.strategies.compact.compact`` (or, by name, from the registry).
"""

from __future__ import annotations

from ctxmw.strategies import (
    cache_breakpoints,
    clear_tool_results,
    compact,
    inbox,
    offload,
    repair_tool_pairs,
    shorten_tools,
    shorten_tools_economic,
    shorten_tools_epoch,
    shorten_tools_epoch_increment,
    summarize,
)

__all__ = [
    "cache_breakpoints",
    "clear_tool_results",
    "compact",
    "inbox",
    "offload",
    "repair_tool_pairs",
    "shorten_tools",
    "shorten_tools_economic",
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment",
    "summarize",
]
