"""A streamed reply that is saved once it has been read to the end.

``acompletion(stream=True, save_file=...)`` returns this wrapper around litellm's stream: chunks
pass through unchanged (other attributes are forwarded to the inner stream), and when the stream
is exhausted the chunks are reassembled with ``litellm.stream_chunk_builder`` and the turn is
written. A stream that fails or is closed early saves nothing. The save_file stays locked until
the stream ends: read it to the end or ``await stream.aclose()``.

A stream dropped unfinished (no reference left, the caller stopped reading) is a stream closed
early: nothing of its reply is saved, never a part taken for the whole, and a WARNING says so,
naming the save_file. When it is garbage-collected, the save_file's lock is given back at once,
in the collecting thread (so the next call on the save_file finds it free), and the rest of the
closing (inbox notes back to the inbox, the ledger lines, the inner stream closed) is scheduled
on the event loop that opened it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PersistingStream"]

logger = logging.getLogger("ctxmw")

_closing: set[asyncio.Task[None]] = set()  # the loop keeps only weak references to tasks


@dataclass(slots=True)
class _Ending:
    """What a dropped stream still has to do; shared with its finalizer (never the stream)."""

    on_close: Callable[[], Awaitable[None]]
    release: Callable[[], None] | None
    what: str
    inner: Any
    loop: asyncio.AbstractEventLoop | None
    chunks: int = 0
    done: bool = field(default=False)


class PersistingStream:
    """Pass chunks through; on exhaustion call ``on_complete(chunks)``; always ``on_close()``.

    Args:
        inner: the completion function's async stream.
        on_complete: saves the reassembled reply; gets every chunk, in order.
        on_close: releases what the call held; runs exactly once.
        release: gives the save_file's lock back synchronously (a dropped stream's first step).
        what: names the stream in the warning of a dropped one (its save_file).
    """

    def __init__(
        self,
        inner: Any,
        on_complete: Callable[[list[Any]], Awaitable[None]],
        on_close: Callable[[], Awaitable[None]],
        *,
        release: Callable[[], None] | None = None,
        what: str = "",
    ) -> None:
        self._inner = inner
        self._iter: AsyncIterator[Any] = inner.__aiter__()
        self._on_complete = on_complete
        self._chunks: list[Any] = []
        self._ending = _Ending(on_close, release, what, self._iter, _running_loop())
        weakref.finalize(self, _dropped, self._ending).atexit = False

    def __aiter__(self) -> PersistingStream:
        return self

    async def __anext__(self) -> Any:
        if self._ending.done:
            raise StopAsyncIteration
        try:
            chunk = await self._iter.__anext__()
        except StopAsyncIteration:
            await self._finish(complete=True)
            raise
        except BaseException:
            await self._finish(complete=False)
            raise
        self._chunks.append(chunk)
        self._ending.chunks += 1
        return chunk

    async def aclose(self) -> None:
        """Stop reading: nothing is saved, the save_file is released."""
        await self._finish(complete=False)
        close = getattr(self._iter, "aclose", None)
        if close is not None:
            await close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def _finish(self, *, complete: bool) -> None:
        ending = self._ending
        if ending.done:
            return
        ending.done = True
        try:
            if complete:
                await self._on_complete(self._chunks)
        finally:
            await ending.on_close()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # not on an asyncio loop: a dropped stream only gives its lock back
        return None


def _dropped(ending: _Ending) -> None:
    """The finalizer of a stream collected before it ended (any thread, no await)."""
    if ending.done:
        return
    ending.done = True
    if ending.release is not None:
        # Two system calls on the lock file (truncate, close): the lock must be free before
        # this thread's next call on the save_file, which a scheduled task could not promise.
        ending.release()
    logger.warning(
        "A streamed reply%s was dropped after %d chunk(s), neither read to its end nor "
        "closed: nothing of it was saved. Read a stream to its end, or close it "
        "(await stream.aclose(), or stream.close() for ctxmw.completion).",
        f" for the save_file {ending.what}" if ending.what else "",
        ending.chunks,
    )
    loop = ending.loop
    if loop is not None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing more can run
            loop.call_soon_threadsafe(_schedule, loop, ending)


def _schedule(loop: asyncio.AbstractEventLoop, ending: _Ending) -> None:
    task = loop.create_task(_close(ending))
    _closing.add(task)
    task.add_done_callback(_closing.discard)


async def _close(ending: _Ending) -> None:
    try:
        await ending.on_close()
    except Exception:  # no caller is left to raise to
        logger.warning("Closing a dropped stream (%s) failed.", ending.what, exc_info=True)
    close = getattr(ending.inner, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()
