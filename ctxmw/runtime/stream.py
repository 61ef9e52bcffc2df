"""A streamed reply that is saved once it has been read to the end.

``acompletion(stream=True, save_file=...)`` returns this wrapper around litellm's stream: chunks
pass through unchanged (other attributes are forwarded to the inner stream), and when the stream
is exhausted the chunks are reassembled with ``litellm.stream_chunk_builder`` and the turn is
written. A stream that fails or is closed early saves nothing. The save_file stays locked until
the stream ends: read it to the end or ``await stream.aclose()``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

__all__ = ["PersistingStream"]


class PersistingStream:
    """Pass chunks through; on exhaustion call ``on_complete(chunks)``; always ``on_close()``.

    Args:
        inner: the completion function's async stream.
        on_complete: saves the reassembled reply; gets every chunk, in order.
        on_close: releases what the call held; runs exactly once.
    """

    def __init__(
        self,
        inner: Any,
        on_complete: Callable[[list[Any]], Awaitable[None]],
        on_close: Callable[[], Awaitable[None]],
    ) -> None:
        self._inner = inner
        self._iter: AsyncIterator[Any] = inner.__aiter__()
        self._on_complete = on_complete
        self._on_close = on_close
        self._chunks: list[Any] = []
        self._done = False

    def __aiter__(self) -> PersistingStream:
        return self

    async def __anext__(self) -> Any:
        if self._done:
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
        if self._done:
            return
        self._done = True
        try:
            if complete:
                await self._on_complete(self._chunks)
        finally:
            await self._on_close()
