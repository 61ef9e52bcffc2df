"""ctxmw's own event loop thread, where the synchronous API runs its async path.

``ctxmw.completion`` (and ``litellm.completion`` under ``patch_litellm()``) are called by
synchronous agents: with no event loop in the calling thread, or from inside one (a sync tool of
an async agent). Either way the call runs on one long-lived loop in a daemon thread of its own
and the calling thread waits for the result: no loop is ever nested, none is started per call
(what a conversation carries between calls, such as litellm's async clients, stays bound to
one loop), and calls from many threads run concurrently on it.

The call runs in a copy of the calling thread's context (contextvars: tracing spans, litellm's
request context). Interrupting the wait (Ctrl-C) cancels the call and waits for its cleanup
(the save_file lock given back) before re-raising. A fork gets a new loop thread on first use.
The one call that cannot work is a synchronous call made on this loop's own thread (from an
async tool or hook of a synchronous call): it would wait for itself, so it raises
:class:`~ctxmw.errors.UsageError` instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

from ctxmw.errors import UsageError

__all__ = ["in_daemon_thread", "run_blocking"]

T = TypeVar("T")


class _LoopThread:
    """One asyncio loop running forever in a daemon thread (started on first use)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop, started now if there is none in this process yet."""
        with self._guard:
            if self._loop is None or self._pid != os.getpid():
                self._loop, self._thread = _start()
                self._pid = os.getpid()
            return self._loop

    def is_current(self) -> bool:
        """Whether the calling thread is the loop's own thread."""
        thread = self._thread
        return thread is not None and thread is threading.current_thread()


def _start() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    # A daemon: an idle loop must never keep the interpreter from exiting.
    thread = threading.Thread(target=serve, name="ctxmw sync loop", daemon=True)
    thread.start()
    ready.wait()
    return loop, thread


_THREAD = _LoopThread()


def run_blocking(fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
    """Run ``fn(*args, **kwargs)`` on ctxmw's loop thread and wait for its result.

    Raises:
        UsageError: called on the loop thread itself (it would wait for itself forever).
    """
    if _THREAD.is_current():
        raise UsageError(
            f"{getattr(fn, '__qualname__', fn)!r} was called synchronously on ctxmw's own event "
            "loop thread (from an async tool or hook of a synchronous ctxmw call), where it would "
            "wait for itself forever. Await the async API there (await ctxmw.acompletion(...)), "
            "or make the tool a plain def function: ctxmw runs those in a thread of their own."
        )
    loop = _THREAD.loop()
    context = contextvars.copy_context()
    outcome: concurrent.futures.Future[T] = concurrent.futures.Future()
    tasks: list[asyncio.Task[T]] = []

    def start() -> None:
        task = loop.create_task(_awaited(fn, args, kwargs), context=context)
        tasks.append(task)
        task.add_done_callback(lambda done: _settle(outcome, done))

    loop.call_soon_threadsafe(start)
    try:
        return outcome.result()
    except BaseException:
        if not outcome.done():  # interrupted while waiting: cancel, let cleanup run, re-raise
            loop.call_soon_threadsafe(lambda: tasks and tasks[0].cancel())
            concurrent.futures.wait([outcome])
        raise


async def _awaited(fn: Callable[..., Awaitable[T]], args: Any, kwargs: Any) -> T:
    return await fn(*args, **kwargs)


def _settle(outcome: concurrent.futures.Future[T], task: asyncio.Task[T]) -> None:
    if task.cancelled():
        outcome.cancel()
    elif (error := task.exception()) is not None:
        outcome.set_exception(error)
    else:
        outcome.set_result(task.result())


async def in_daemon_thread(call: Callable[[], T]) -> T:
    """Run ``call`` in a new daemon thread; cancelling the wait abandons the thread.

    Not anyio's worker threads: those are not daemons, so one hung call (a tool, a provider
    that never answers) would keep the interpreter from exiting after the event loop ended.
    """
    token, done = anyio.lowlevel.current_token(), anyio.Event()
    outcome: list[tuple[bool, Any]] = []
    context = contextvars.copy_context()

    def work() -> None:
        try:
            outcome.append((True, context.run(call)))
        except BaseException as exc:  # handed to the awaiting task
            outcome.append((False, exc))
        try:
            anyio.from_thread.run_sync(done.set, token=token)
        except Exception:  # the loop is gone: nobody waits for this result any more
            return

    threading.Thread(target=work, name="ctxmw worker", daemon=True).start()
    await done.wait()
    ok, value = outcome[0]
    if not ok:
        raise value
    result: T = value
    return result
