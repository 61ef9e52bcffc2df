"""What ctxmw keeps for the garbage collector to walk, and what its worker-thread trips carry.

Run: ``.venv/bin/python benchmarks/bench_tracked.py``.

Every full (generation 2) gc pass walks every live tracked container; with a thousand sessions in
one process each object a session keeps (or a call holds at its awaits) is walked a thousand
times per pass (see ``docs/design/performance.md``). This prints, each measured after
``gc.collect()`` and not counting the transcript's own objects, the settings or the logger:

* what a finished ``Session`` keeps after five turns, and what a call parked at its model call
  holds beyond that;
* whether any worker-thread trip of a turn is a closure (each cell another object the waiting
  call holds);
* what a ``CallRecorder`` keeps after 40 calls, a ``LedgerWriter`` before its first write of its
  own, and the job carrying a commit's held ledger lines;
* what a held ``SaveFileLock`` keeps, and the tool index's groups that stay tracked;
* what an alert window keeps after 30 calls;
* what the strategies' memo keeps beyond the transcript at two sizes (the rendered prompt's
  compacted copies and one ``Call`` per completed call grow with it; nothing else should).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _agent import transcript
from _tracked import tracked_beyond, tracked_reachable

import ctxmw  # ctxmw first: it keeps litellm offline
from ctxmw import Settings, testing
from ctxmw.context.tokens import ApproxCounter
from ctxmw.messages.pairs import index_tools
from ctxmw.runtime.lock import SaveFileLock
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.telemetry import CallRecorder, LedgerWriter
from ctxmw.telemetry.alerts import AlertRules, AlertState
from ctxmw.types import StrategyContext

MODEL = "openai/gpt-4o-mini"


class Instant:
    """A model that answers at once, optionally after waiting for ``gate`` (a call in flight)."""

    def __init__(self) -> None:
        self.gate: asyncio.Event | None = None
        self.waiting = asyncio.Event()

    async def __call__(self, model: str, messages: Any = None, **kwargs: Any) -> Any:
        if self.gate is not None:
            self.waiting.set()
            await self.gate.wait()
        return testing.text("ok", usage=testing.usage(100, 1))


def kept(session: ctxmw.Session, *more: object, root: object = None) -> Counter[str]:
    gc.collect()  # the collector stops tracking tuples and dicts of atomics when it sees them
    shared = [*session.messages, session.settings, session.recorder.settings]
    shared += [session.recorder.logger, *more]
    return tracked_reachable(session if root is None else root, shared)


def line(label: str, counts: Counter[str] | int) -> None:
    total = counts if isinstance(counts, int) else sum(counts.values())
    detail = "" if isinstance(counts, int) else f"  ({dict(counts.most_common(6))})"
    print(f"{label:<62} {total:>5}{detail}", flush=True)


async def session_figures(folder: Path) -> None:
    completion = Instant()
    session = ctxmw.Session(MODEL, save_file=folder / "a.jsonl", completion=completion)
    for k in range(5):
        await session.ask(f"step {k}")
    between = kept(session, completion)
    line("a finished Session (5 turns) keeps", between)
    completion.gate = asyncio.Event()
    task = asyncio.create_task(session.ask("step 5"))
    await completion.waiting.wait()
    outside = (completion, asyncio.get_running_loop(), asyncio.current_task())
    in_flight = kept(session, *outside, root=task)
    completion.gate.set()
    await task
    line(
        "a call parked at its model call holds beyond that",
        sum(in_flight.values()) - sum(between.values()),
    )


async def trip_figures(folder: Path) -> None:
    from anyio import to_thread

    trips: list[Any] = []
    run_sync = to_thread.run_sync

    async def spy(func: Any, *args: Any, **kwargs: Any) -> Any:
        trips.append(func)
        return await run_sync(func, *args, **kwargs)

    to_thread.run_sync = spy  # type: ignore[assignment]
    try:
        session = ctxmw.Session(MODEL, save_file=folder / "b.jsonl", completion=Instant())
        for k in range(2):
            await session.ask(f"step {k}")
    finally:
        to_thread.run_sync = run_sync  # type: ignore[assignment]
    closures = [f for f in trips if getattr(f, "__closure__", None) is not None]
    line(f"worker-thread trips of 2 turns that are closures (of {len(trips)})", len(closures))


async def telemetry_figures(folder: Path) -> None:
    recorder = CallRecorder("s", save_file=folder / "c.jsonl", token_counter=ApproxCounter())
    history: list[Any] = [{"role": "system", "content": "Be brief."}]
    for k in range(40):
        history = [*history, {"role": "user", "content": f"question {k}"}]
        wire = {"model": MODEL, "messages": list(history)}
        await recorder.record(model=MODEL, wire_kwargs=wire, transcript=history)
        history = [*history, {"role": "assistant", "content": f"answer {k}"}]
    gc.collect()
    shared = [*history, recorder.settings, recorder.logger]
    line("a CallRecorder after 40 calls keeps", tracked_reachable(recorder, shared))
    writer = LedgerWriter(folder / "d.ledger.jsonl")
    writer.append_now(b'{"a": 1}\n')
    gc.collect()
    line("a LedgerWriter before a write of its own keeps", tracked_reachable(writer))
    wire = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    await recorder.record(model=MODEL, wire_kwargs=wire, transcript=[], hold_ledger=True)
    job = recorder.take_held()
    gc.collect()
    line("a commit's held ledger lines (the trip's job)", tracked_reachable(job, [recorder.ledger]))
    state = AlertState(AlertRules(window=10))
    for k in range(30):
        state.observe({"prompt_tokens": 900, "cache_read_tokens": 0, "cache_write_tokens": k})
    gc.collect()
    line("an alert window after 30 calls keeps", tracked_reachable(state))


async def file_figures(folder: Path) -> None:
    save_file = folder / "e.jsonl"
    lock = SaveFileLock(save_file)
    await lock.acquire()
    gc.collect()
    lock_kept = tracked_reachable(lock, [save_file])
    line("a held SaveFileLock keeps (beyond the save_file's path)", lock_kept)
    await lock.release()
    messages = transcript(90)
    index = index_tools(messages, {}, "x")
    gc.collect()
    tracked = [m for m in index.groups.values() if gc.is_tracked(m)]
    line(f"tool index groups still tracked (of {len(index.groups)})", len(tracked))


async def memo_figures() -> None:
    settings = Settings()
    for chain in ("shorten_tools_epoch", "shorten_tools_economic"):
        strategies = resolve_strategies(chain, settings)
        figures = []
        for n in (200, 400):
            memo: dict[str, Any] = {}
            history = transcript(n)
            for k in range(3):
                history = [*history, {"role": "user", "content": f"go {k}"}]
                ctx = StrategyContext(settings, model=MODEL, memo=memo)
                await apply_strategies(history, strategies, ctx)
            gc.collect()
            figures.append(tracked_beyond(memo, history))
        print(
            f"{chain + ' memo beyond the transcript, 200 / 400 msgs':<62} "
            f"{figures[0]:>5} / {figures[1]}",
            flush=True,
        )


async def main() -> None:
    logging.getLogger("ctxmw").setLevel(logging.ERROR)
    print(f"{'tracked objects (after gc.collect())':<62} {'count':>5}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        await session_figures(folder)
        await trip_figures(folder)
        await telemetry_figures(folder)
        await file_figures(folder)
    await memo_figures()


if __name__ == "__main__":
    asyncio.run(main())
