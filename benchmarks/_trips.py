"""Counting worker-thread trips: each one costs the event loop's thread CPU and latency."""

from __future__ import annotations

import asyncio
import asyncio.base_events
from typing import Any

import anyio.to_thread


class Trips:
    """Worker-thread trips, counted: ``anyio.to_thread.run_sync`` and ``run_in_executor`` calls.

    A counting wrapper installed by the benchmark (not product code): every trip costs the loop's
    thread CPU and latency, and hands the interpreter lock to a worker thread and back.
    """

    count = 0
    installed = False

    @classmethod
    def install(cls) -> None:
        if cls.installed:
            return
        cls.installed = True

        run_sync = anyio.to_thread.run_sync
        run_in_executor = asyncio.base_events.BaseEventLoop.run_in_executor

        async def counted(func: Any, *args: Any, **kwargs: Any) -> Any:
            cls.count += 1
            return await run_sync(func, *args, **kwargs)

        def counted_executor(loop: Any, executor: Any, func: Any, *args: Any) -> Any:
            cls.count += 1
            return run_in_executor(loop, executor, func, *args)

        anyio.to_thread.run_sync = counted  # type: ignore[assignment]
        asyncio.base_events.BaseEventLoop.run_in_executor = counted_executor  # type: ignore[method-assign]

    @classmethod
    def take(cls) -> int:
        count, cls.count = cls.count, 0
        return count
