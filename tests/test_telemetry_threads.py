"""Telemetry does its CPU work on the event loop, never in a worker thread.

With a thousand sessions, CPU-bound work in worker threads competes with the loop for the
interpreter lock and stretches every loop step. The only worker-thread trip of a recorded call
is the ledger append (pure file I/O); a long payload's first count gives the loop back between
chunks instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from ctxmw.telemetry import ApproxCounter, CallRecorder
from ctxmw.telemetry.record import LedgerWriter
from ctxmw.testing import text, usage

MODEL = "openai/gpt-4o-mini"


def transcript(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    messages += [{"role": "user", "content": f"message {i} " * 8} for i in range(n - 1)]
    return messages


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every function sent to a worker thread, in order (then run there as usual)."""
    seen: list[Any] = []
    real = anyio.to_thread.run_sync

    async def spy(func: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(func)
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", spy)
    return seen


async def _calls(recorder: CallRecorder, sizes: list[int]) -> None:
    history = transcript(sizes[-1])
    for n in sizes:
        prompt = history[:n]
        await recorder.record(
            model=MODEL,
            wire_kwargs={"model": MODEL, "messages": prompt},
            transcript=prompt,
            response=text("ok", usage=usage(100, 1)),
        )


@pytest.mark.anyio
async def test_only_the_ledger_append_goes_to_a_worker_thread(
    trips: list[Any], tmp_path: Path
) -> None:
    recorder = CallRecorder("s", save_file=tmp_path / "s.jsonl", token_counter=ApproxCounter())
    await _calls(recorder, [600, 603, 1400, 1401])
    names = {getattr(f, "__qualname__", repr(f)) for f in trips}
    assert names == {LedgerWriter.append_now.__qualname__}
    assert len(trips) == 4  # one trip per call


@pytest.mark.anyio
async def test_a_long_first_count_gives_the_loop_back(trips: list[Any]) -> None:
    ticks = 0
    done = False

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    recorder = CallRecorder("s", token_counter=ApproxCounter())
    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        await anyio.lowlevel.checkpoint()
        before = ticks
        await _calls(recorder, [3000])
        during = ticks - before
        done = True
    assert trips == []
    assert during >= 3000 // 512  # the loop ran other tasks between the chunks
