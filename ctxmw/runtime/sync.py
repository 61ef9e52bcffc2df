"""``ctxmw.completion``: the synchronous twin of :func:`ctxmw.acompletion`.

Synchronous agents (mini-swe-agent, smolagents, agno's ``Agent.run``) call
``litellm.completion``. This function takes the same arguments and gives the same promises as
``ctxmw.acompletion`` (strategies, transcript, ledger, inbox): it runs that async path on
ctxmw's own event loop thread (:mod:`ctxmw.runtime._loop`) and waits for it, so it works the
same with or without an event loop running in the calling thread, and never nests one.

The provider is reached through litellm's *synchronous* ``completion`` (or the ``completion=``
function given, sync or async), in a thread of its own: what litellm does for sync callers
(its sync HTTP client, its sync callbacks) stays as it was. With ``stream=True`` the result is
a :class:`SyncStream`: iterate it like litellm's ``CustomStreamWrapper``; the reply is saved
when it has been read to the end (or ``close()`` it to give the save_file back early).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

from ctxmw._litellm import real_completion
from ctxmw.runtime._loop import in_daemon_thread, run_blocking
from ctxmw.runtime.wrapper import acompletion

__all__ = ["SyncStream", "completion"]

_END = object()


def completion(
    model: str,
    messages: Any = None,
    *,
    completion: Callable[..., Any] | None = None,
    **kwargs: Any,
) -> Any:
    """Call the model like ``litellm.completion``, with the prompt strategies applied.

    Takes every argument of :func:`ctxmw.acompletion` (``prompt_strategies``, ``save_file``,
    ``tools`` with Python callables, ``metadata={"ctxmw": {...}}``...) and returns what
    ``litellm.completion`` returns: a ``ModelResponse``, or with ``stream=True`` a
    :class:`SyncStream` of its chunks. Safe to call from a thread that runs an event loop (a
    sync tool of an async agent): the call runs on ctxmw's own loop thread meanwhile.

    Args:
        model: the litellm model name.
        messages: the whole conversation so far.
        completion: the provider call, shaped like ``litellm.completion`` (an async function
            shaped like ``litellm.acompletion`` works too); default litellm's own ``completion``.
        **kwargs: the options of :func:`ctxmw.acompletion` and litellm's own arguments.

    Raises:
        UsageError: invalid arguments, or a call made on ctxmw's own loop thread (from an async
            tool or hook of a synchronous call: await ``ctxmw.acompletion`` there instead).
    """
    provider = _in_thread(completion if completion is not None else real_completion())
    result = run_blocking(acompletion, model, messages, completion=provider, **kwargs)
    return SyncStream(result) if kwargs.get("stream") else result


def _in_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as the async completion function the session awaits: called in a daemon thread;
    a coroutine it returns is awaited on the loop, a sync stream read a chunk at a time."""

    async def call(**kwargs: Any) -> Any:
        result = await in_daemon_thread(functools.partial(fn, **kwargs))
        if inspect.isawaitable(result):
            return await result
        if kwargs.get("stream") and hasattr(result, "__next__"):
            return ThreadedStream(result)
        return result

    return call


class ThreadedStream:
    """A synchronous stream read as an async one: each ``next()`` runs in a daemon thread.

    Other attributes are the inner stream's (``CustomStreamWrapper``'s ``model``, ...).
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __aiter__(self) -> ThreadedStream:
        return self

    async def __anext__(self) -> Any:
        chunk = await in_daemon_thread(functools.partial(next, self._inner, _END))
        if chunk is _END:
            raise StopAsyncIteration
        return chunk

    async def aclose(self) -> None:
        """Close the inner stream (its HTTP response), if it can be closed."""
        close = getattr(self._inner, "close", None)
        if callable(close):
            await in_daemon_thread(close)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class SyncStream:
    """A streamed reply of :func:`completion`: iterate it for the chunks.

    The reply is saved once the stream has been read to its end; the save_file stays locked
    until then, so read it to the end or ``close()`` it (a ``with`` block does). Other
    attributes are those of litellm's stream.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        try:
            return run_blocking(self._stream.__anext__)
        except StopAsyncIteration:
            raise StopIteration from None

    def close(self) -> None:
        """Stop reading: nothing is saved, the save_file is given back."""
        run_blocking(self._stream.aclose)

    def __enter__(self) -> SyncStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
