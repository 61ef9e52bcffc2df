"""``Session(offload=...)``: the ``offload`` strategy, its store, and ``ctxmw_expand`` in the loop.

With offload on, the session runs one :class:`~ctxmw.strategies.offload.Offload` bound to its
store (first in the chain, unless the list already names ``offload``, which it then replaces),
and adds :data:`~ctxmw.context.offload.EXPAND_TOOL` to its tools from the first call on, with a
Python implementation: the tool loop answers the model's ``ctxmw_expand`` calls itself. A list
naming ``offload`` turns it on too.

Without a save_file the originals live in the session's memo: a stateless conversation's calls
(``ctxmw.acompletion`` with a session id) share them, and its bounded registry counts them. A
stateless call with neither a save_file nor a session id has no memo a later call could reach:
offload is off there (:func:`unwire_memory_offload`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxmw.context.offload import (
    EXPAND_TOOL,
    EXPAND_TOOL_NAME,
    FileResultStore,
    OffloadedResult,
    ResultStore,
    expand,
    store_dir,
)
from ctxmw.errors import UsageError
from ctxmw.runtime.tool_schema import Tool, ToolSet, tool_from_callable
from ctxmw.settings import Settings
from ctxmw.strategies._chain import NamedStrategy
from ctxmw.strategies.offload import Offload, memo_store, warn_once

__all__ = ["OffloadOption", "unwire_memory_offload", "wire_offload"]

logger = logging.getLogger("ctxmw")

OffloadOption = bool | ResultStore | None
"""``Session(offload=)``: True (a store beside the save_file, else in memory), a store, or off."""


def wire_offload(
    option: OffloadOption,
    strategies: list[NamedStrategy],
    tools: ToolSet,
    save_file: str | os.PathLike[str] | None,
    settings: Settings,
    memo: Callable[[], dict[str, Any]],
) -> tuple[list[NamedStrategy], ResultStore | None]:
    """The session's strategies and store with offload on (``tools`` gains ``ctxmw_expand``).

    Args:
        memo: the session's current memo: without a save_file the originals live there, so
            the calls of a stateless conversation share them and its registry counts them.

    Raises:
        UsageError: ``option`` is neither a bool nor a store, or a tool is already named
            ``ctxmw_expand``.
    """
    named = any(name == "offload" for name, _ in strategies)
    if option is None or option is False:
        if not named:
            return strategies, None
        option = True
    store = _store(option, save_file, memo)
    bound: NamedStrategy = ("offload", Offload(store=store))
    if named:
        strategies = [bound if name == "offload" else (name, s) for name, s in strategies]
    else:
        strategies = [bound, *strategies]
    _add_tool(tools, expand_tool(store, settings.readback_max_chars))
    return strategies, store


def unwire_memory_offload(
    strategies: list[NamedStrategy], tools: ToolSet, store: ResultStore | None
) -> tuple[list[NamedStrategy], ResultStore | None]:
    """Offload off when its originals would live in a memo no later call can reach.

    A stateless call with neither a save_file nor a conversation id: a handle shown to the model
    could only be read back inside this call. Results are then sent unchanged and
    ``ctxmw_expand`` is not declared; a WARNING says so once per process.
    """
    if not isinstance(store, _MemoStore):
        return strategies, store
    warn_once(
        logger,
        "ctxmw: offload is off for stateless calls with neither a save_file nor a session id: "
        "no later call could read an original back. Pass save_file= (or session=) to offload "
        "(this warning is shown once).",
    )
    tools.executable.pop(EXPAND_TOOL_NAME, None)
    tools.schemas[:] = [t for t in tools.schemas if t is not EXPAND_TOOL]
    return [(name, s) for name, s in strategies if name != "offload"], None


class _MemoStore:
    """The memory store in the session's current memo (a stateless call resumes its
    conversation's memo after the session is built: the store is looked up on each use)."""

    def __init__(self, memo: Callable[[], dict[str, Any]]) -> None:
        self._memo = memo

    async def put(self, record: OffloadedResult) -> None:
        """Store ``record`` in the conversation's memory store."""
        await memo_store(self._memo()).put(record)

    async def get(self, handle: str) -> OffloadedResult | None:
        """The record of ``handle`` in the conversation's memory store, or None."""
        return await memo_store(self._memo()).get(handle)


def _store(
    option: bool | ResultStore,
    save_file: str | os.PathLike[str] | None,
    memo: Callable[[], dict[str, Any]],
) -> ResultStore:
    if option is True:
        return FileResultStore(store_dir(Path(save_file))) if save_file else _MemoStore(memo)
    if isinstance(option, ResultStore) and not isinstance(option, bool):
        return option
    raise UsageError(
        f"offload={option!r} is not accepted: pass True, False, or a store with async put() and "
        "get() (see ctxmw.context.offload.ResultStore)."
    )


def expand_tool(store: ResultStore, max_chars: int) -> Tool:
    """``ctxmw_expand`` as a Python tool over ``store``, with the constant schema."""

    async def ctxmw_expand(handle: str, offset: int = 0, limit: int | None = None) -> str:
        return await expand(store, handle, offset, limit, max_chars=max_chars)

    return dataclasses.replace(tool_from_callable(ctxmw_expand), schema=EXPAND_TOOL)


def _add_tool(tools: ToolSet, tool: Tool) -> None:
    if EXPAND_TOOL_NAME in tools.executable or EXPAND_TOOL_NAME in tools.declared:
        raise UsageError(
            f"A tool is already named {EXPAND_TOOL_NAME!r}; with offload on, ctxmw provides "
            "it. Rename yours."
        )
    tools.executable[tool.name] = tool
    tools.schemas.append(tool.schema)
