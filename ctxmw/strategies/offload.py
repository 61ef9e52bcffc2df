"""``offload``: a large tool result is shrunk once, when it is first sent, and can be read back.

A tool result over ``offload_threshold`` tokens is replaced by a fixed preview: a header naming
a handle and the original's length, then its first (``offload_preview="head"``) or last
(``"tail"``) ``offload_preview_chars`` characters, or, for a tool with a registered compressor
(:func:`ctxmw.compressor`), the compressor's checked view. The original goes to a
:class:`~ctxmw.context.offload.ResultStore` *before* the prompt is returned, so every handle the
model sees can be read back with ``ctxmw_expand`` (:data:`~ctxmw.context.readback.READBACK_TOOL`,
by ``offset`` and ``limit``), which ctxmw answers itself on every path.

The preview is stored with the original and reused on every later call, so a result's sent bytes
never change once offloaded, even if the settings or the compressors change: the prompt only
grows at its end, as with no strategy at all. The transcript keeps the full result; the message
keeps its ``tool_call_id`` and every other key; results of ``ctxmw_expand`` itself and non-text
contents are never offloaded.

Run it first in the chain (``"offload,shorten_tools_epoch_increment,inbox"``): the header comes
first in the preview, so the epoch strategies' compacted tier, which keeps a result's head, keeps
the handle too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ctxmw.context.compressors import apply_compressor, get_compressor
from ctxmw.context.offload import (
    FileResultStore,
    MemoryResultStore,
    OffloadedResult,
    ResultStore,
    handle_for,
    store_dir,
)
from ctxmw.context.readback import READBACK_TOOL_NAME
from ctxmw.context.tokens import TokenCounter, as_counter, count_messages
from ctxmw.messages._memo import BoundedCache
from ctxmw.settings import Settings
from ctxmw.strategies._registry import register_strategy
from ctxmw.types import Message, Messages, StrategyContext

__all__ = ["HEADER", "MARK", "STORE_SLOT", "Offload", "memo_store", "offload", "preview"]

STORE_SLOT = "offload_store"
"""The memo slot of a conversation's memory store (no save_file)."""
SEEN_SLOT = "offload"
SEEN_MAX_BYTES = 64 * 1024 * 1024  # a conversation holding more has the registry to itself

MARK = "[ctxmw offload "
"""How every preview begins (then the handle)."""

HEADER = (
    MARK + "{handle}: this tool result has {chars} characters; shown: {shown}. To read more, "
    'call ctxmw_expand with {{"handle": "{handle}", "offset": {offset}, "limit": {limit}}}.]'
)
"""The first line of every preview: the handle comes first, so a compacted preview keeps it."""


class Offload:
    """Replace large tool results by a frozen preview and a handle; keep the originals.

    Args:
        store: where originals go. Default: a folder beside the call's save_file
            (:func:`~ctxmw.context.offload.store_dir`), else a memory store in the session's
            memo; with neither, results are sent unchanged (a warning says so).
        counter: a :class:`~ctxmw.context.tokens.TokenCounter`; default litellm's for the call's
            model.
    """

    def __init__(
        self, *, store: ResultStore | None = None, counter: TokenCounter | None = None
    ) -> None:
        self.store = store
        self.counter = as_counter(counter)

    async def __call__(self, messages: Messages, ctx: StrategyContext) -> Messages:
        """Return ``messages`` with every large tool result shown as its preview."""
        store = self.store or _default_store(ctx)
        stats = ctx.stats.setdefault("offload", {"offloaded": 0})
        seen = _seen(ctx)
        calls: dict[str, tuple[str, Any]] | None = None
        out: Messages | None = None
        for i, msg in enumerate(messages):
            if msg.get("role") != "tool" or not isinstance(msg.get("content"), str):
                continue
            known = seen.get(str(msg.get("tool_call_id")))
            if known is not None and known[0] is msg["content"]:
                shown = known[1]
            else:
                calls = calls if calls is not None else _calls(messages)
                shown = await self._shown(msg, calls, store, ctx)
                seen.put(str(msg.get("tool_call_id")), (msg["content"], shown))
            if shown is not None:
                out = out if out is not None else list(messages)
                out[i] = shown
                stats["offloaded"] += 1
        return out if out is not None else messages

    async def _shown(
        self,
        msg: Message,
        calls: Mapping[str, tuple[str, Any]],
        store: ResultStore | None,
        ctx: StrategyContext,
    ) -> Message | None:
        """The message to send instead of ``msg``, or None to send ``msg`` itself."""
        content: str = msg["content"]
        call_id = str(msg.get("tool_call_id"))
        name, arguments = calls.get(call_id, ("", None))
        threshold = ctx.settings.offload_threshold
        if name == READBACK_TOOL_NAME or len(content) <= threshold:
            return None  # a token is at least one character: short texts need no count
        if count_messages(self.counter, ctx.model, [msg])[0] <= threshold:
            return None
        if store is None:
            warn_once(
                ctx.logger,
                "ctxmw: offload has nowhere to keep the originals of large tool results (no "
                "save_file, no session): they are sent unchanged. Pass a save_file to offload "
                "(this warning is shown once).",
            )
            return None
        handle = handle_for(call_id, content)
        record = await store.get(handle)
        if record is None:
            text = preview(content, handle, name, arguments, ctx.settings)
            record = OffloadedResult(handle, call_id, name, content, text)
            await store.put(record)
        return {**msg, "content": record.preview}


def preview(content: str, handle: str, tool_name: str, arguments: Any, settings: Settings) -> str:
    """The preview of one result: the header, then the head, the tail or the compressed view."""
    size = settings.offload_preview_chars
    offset = 0
    if get_compressor(tool_name) is not None:
        patterns = settings.resolved_durable_patterns
        body = apply_compressor(content, tool_name, arguments, size, patterns)
        shown = "a compressed view by the tool's compressor"
    elif settings.offload_preview == "tail":
        body = content[len(content) - size :] if size else ""
        shown = f"the last {len(body)} characters (from offset {len(content) - len(body)})"
    else:
        body = content[:size]
        shown = f"the first {len(body)} characters"
        offset = len(body)
    limit = settings.readback_max_chars
    header = HEADER.format(
        chars=len(content), shown=shown, handle=handle, offset=offset, limit=limit
    )
    return f"{header}\n{body}"


def _calls(messages: Messages) -> dict[str, tuple[str, Any]]:
    """Call id -> (tool name, raw arguments), over every assistant message."""
    out: dict[str, tuple[str, Any]] = {}
    for msg in messages:
        for tc in msg.get("tool_calls") or () if msg.get("role") == "assistant" else ():
            fn = tc.get("function") if isinstance(tc, dict) else None
            if isinstance(fn, dict):
                out[str(tc.get("id"))] = (str(fn.get("name", "")), fn.get("arguments"))
    return out


def _default_store(ctx: StrategyContext) -> ResultStore | None:
    if ctx.save_file is not None:
        return FileResultStore(store_dir(ctx.save_file))
    if ctx.memo is not None:
        return memo_store(ctx.memo)
    return None


def memo_store(memo: dict[str, Any]) -> MemoryResultStore:
    """The memory store a conversation keeps in its memo (made on first use)."""
    store = memo.get(STORE_SLOT)
    if not isinstance(store, MemoryResultStore):
        store = memo[STORE_SLOT] = MemoryResultStore()
    return store


def _seen(ctx: StrategyContext) -> BoundedCache:
    """Call id -> (the content last seen, what was sent for it), kept in the memo.

    A bounded cache: a stateless conversation's registry counts the originals it holds.
    """
    if ctx.memo is None:
        return BoundedCache(SEEN_MAX_BYTES)
    seen = ctx.memo.get(SEEN_SLOT)
    if not isinstance(seen, BoundedCache):
        seen = ctx.memo[SEEN_SLOT] = BoundedCache(SEEN_MAX_BYTES)
    return seen


_warned: set[str] = set()


def warn_once(logger: logging.Logger, message: str) -> None:
    """Log ``message`` as a WARNING the first time this process sees it."""
    if message not in _warned:
        _warned.add(message)
        logger.warning(message)


offload = register_strategy("offload")(Offload())
"""The registered instance: ``prompt_strategies="offload,shorten_tools_epoch_increment,inbox"``."""
