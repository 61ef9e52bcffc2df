"""What a Session keeps for the garbage collector: after its calls, and while one is in flight.

Every full gc pass walks every live tracked container; with a thousand sessions in one process
each object a session keeps (or a call holds at its awaits) is walked a thousand times per pass.
"""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio import to_thread

import ctxmw
from ctxmw import testing
from tests._tracked import tracked_reachable

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"


class _Instant:
    """A model that answers at once, optionally after waiting for ``gate`` (a call in flight)."""

    def __init__(self, gate: anyio.Event | None = None) -> None:
        self.gate, self.waiting = gate, anyio.Event()

    async def __call__(self, model: str, messages: Any = None, **kwargs: Any) -> Any:
        if self.gate is not None:
            self.waiting.set()
            await self.gate.wait()
        return testing.text("ok", usage=testing.usage(100, 1))


def _kept(session: ctxmw.Session, *more: object, root: object = None) -> Counter[str]:
    """The session's own tracked objects (or ``root``'s): not its transcript's, settings',
    model's or logger's, nor ``more``."""
    gc.collect()  # the collector stops tracking tuples and dicts of atomics when it sees them
    shared = [
        *session.messages,
        session.settings,
        session.recorder.settings,
        session.recorder.logger,
        *more,
    ]
    return tracked_reachable(session if root is None else root, shared)


async def test_a_finished_session_keeps_few_tracked_objects(tmp_path: Path) -> None:
    """Five turns on a save_file, default strategies and telemetry on."""
    completion = _Instant()
    session = ctxmw.Session(MODEL, save_file=tmp_path / "a.jsonl", completion=completion)
    for k in range(5):
        await session.ask(f"step {k}")
    kept = _kept(session, completion)
    assert sum(kept.values()) <= 64, kept  # 58 to 61 after the cuts, 72 before


async def test_a_call_waiting_for_its_model_holds_few_more(tmp_path: Path) -> None:
    """A session's fourth turn parked at its model call (where a session spends a provider's
    latency): what its task holds beyond what the session keeps between calls."""
    gate = anyio.Event()
    completion = _Instant()
    session = ctxmw.Session(MODEL, save_file=tmp_path / "a.jsonl", completion=completion)
    for k in range(3):
        await session.ask(f"step {k}")
    completion.gate = gate
    parked: list[asyncio.Task[Any]] = []

    async def turn() -> None:
        parked.append(asyncio.current_task())  # type: ignore[arg-type]
        await session.ask("step 3")

    async with anyio.create_task_group() as group:
        group.start_soon(turn)
        await completion.waiting.wait()
        outside = (completion, parked[0].get_loop(), asyncio.current_task())
        in_flight = _kept(session, *outside, root=parked[0])
        gate.set()
    between = _kept(session, completion)
    held = sum(in_flight.values()) - sum(between.values())
    assert held <= 63, in_flight - between  # 58 to 59 after the cuts, 65 before


async def test_a_turns_worker_trips_carry_no_closure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a thousand sessions most calls wait for a worker thread (anyio runs 40 trips at
    once): each trip is a module function and its arguments, not a closure whose cells (one
    tracked object per captured name) the waiting call would hold."""
    trips: list[Any] = []
    run_sync = to_thread.run_sync

    async def spy(func: Any, *args: Any, **kwargs: Any) -> Any:
        trips.append(func)
        return await run_sync(func, *args, **kwargs)

    monkeypatch.setattr(to_thread, "run_sync", spy)
    session = ctxmw.Session(MODEL, save_file=tmp_path / "a.jsonl", completion=_Instant())
    for k in range(2):
        await session.ask(f"step {k}")
    assert len(trips) >= 4  # the trip before each turn, and its commit's
    assert [f for f in trips if getattr(f, "__closure__", None) is not None] == []
