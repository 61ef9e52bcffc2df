"""The built-in prompt strategies, one module each; importing this package registers them."""

from __future__ import annotations

from ctxmw.strategies.cache_breakpoints import cache_breakpoints
from ctxmw.strategies.clear_tool_results import clear_tool_results
from ctxmw.strategies.compact import compact
from ctxmw.strategies.inbox import inbox
from ctxmw.strategies.repair_tool_pairs import repair_tool_pairs
from ctxmw.strategies.shorten_tools import shorten_tools
from ctxmw.strategies.shorten_tools_epoch import shorten_tools_epoch
from ctxmw.strategies.shorten_tools_epoch_increment import shorten_tools_epoch_increment
from ctxmw.strategies.summarize import summarize

__all__ = [
    "cache_breakpoints",
    "clear_tool_results",
    "compact",
    "inbox",
    "repair_tool_pairs",
    "shorten_tools",
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment",
    "summarize",
]
