"""``Session(offload=...)``: the ``offload`` strategy and its store.

With offload on, the session runs one :class:`~ctxmw.strategies.offload.Offload` bound to its
store (first in the chain, unless the list already names ``offload``, which it then replaces).
A list naming ``offload`` turns it on too. Its previews name handles, so every call declares
``ctxmw_expand`` and ctxmw answers it in the read-back round (:mod:`ctxmw.runtime._readback`),
from the conversation itself, else from the store.

Without a save_file the originals live in the session's memo: a stateless conversation's calls
(``ctxmw.acompletion`` with a session id) share them, and its bounded registry counts them. A
stateless call with neither a save_file nor a session id has no memo a later call could reach:
offload is off there (:func:`unwire_memory_offload`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxmw.context.offload import FileResultStore, OffloadedResult, ResultStore, store_dir
from ctxmw.errors import UsageError
from ctxmw.strategies._chain import NamedStrategy
from ctxmw.strategies.offload import Offload, memo_store, warn_once

__all__ = ["OffloadOption", "unwire_memory_offload", "wire_offload"]

logger = logging.getLogger("ctxmw")

OffloadOption = bool | ResultStore | None
"""``Session(offload=)``: True (a store beside the save_file, else in memory), a store, or off."""


def wire_offload(
    option: OffloadOption,
    strategies: list[NamedStrategy],
    save_file: str | os.PathLike[str] | None,
    memo: Callable[[], dict[str, Any]],
) -> tuple[list[NamedStrategy], ResultStore | None]:
    """The session's strategies and store with offload on.

    Args:
        memo: the session's current memo: without a save_file the originals live there, so
            the calls of a stateless conversation share them and its registry counts them.

    Raises:
        UsageError: ``option`` is neither a bool nor a store.
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
    return strategies, store


def unwire_memory_offload(
    strategies: list[NamedStrategy], store: ResultStore | None
) -> tuple[list[NamedStrategy], ResultStore | None]:
    """Offload off when its originals would live in a memo no later call can reach.

    A stateless call with neither a save_file nor a conversation id: a handle shown to the model
    could only be read back inside this call. Results are then sent unchanged (``ctxmw_expand``
    stays declared only if another strategy shows handles); a WARNING says so once per process.
    """
    if not isinstance(store, _MemoStore):
        return strategies, store
    warn_once(
        logger,
        "ctxmw: offload is off for stateless calls with neither a save_file nor a session id: "
        "no later call could read an original back. Pass save_file= (or session=) to offload "
        "(this warning is shown once).",
    )
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
