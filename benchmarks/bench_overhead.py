"""ctxmw's own time per call beside litellm's own client time, and a thousand sessions in one loop.

Run: ``.venv/bin/python benchmarks/bench_overhead.py`` (``--quick`` for a smaller run).

Part 1, per call at 100, 2,000 and 10,000 messages (a tool-agent transcript: one call, its
result and a short note per round). For each size, in one run:

* ``litellm``: ``litellm.acompletion(..., mock_response=...)`` on the prompt ctxmw sent, i.e.
  litellm's own client-side work for that call (no network, no model);
* ``stateless``: ``ctxmw.acompletion`` given the whole history on every call (the litellm habit,
  what agent frameworks do), with a save_file, the default strategies and telemetry on, and a
  completion function that returns at once;
* ``session``: ``Session.ask`` on a session resumed from the same transcript.

Beside each: the part of ctxmw's time spent in its telemetry (``CallRecorder.record``: digests,
prefix estimate, usage, cost, alerts, the ledger line), and that part over litellm's time.

Each path is warmed with one call at the size (the first call indexes the history), then the
median of the next calls is reported, each call adding one round. The ratios are ctxmw's time
over litellm's time for the same call, measured side by side.

Part 2, ``--sessions`` concurrent sessions x ``--rounds`` rounds in one event loop (default 1,000
x 50): total time, the longest event-loop stall (a ticker task that sleeps 5 ms and records how
late it woke), the longest single loop step (see :class:`StepWatch`), the longest
garbage-collection pass and how many full (generation 2) passes ran
(``gc.callbacks``), then, traced, peak memory and memory per session beyond its transcript's own
bytes. ``--gc freeze`` calls ``gc.freeze()`` after the warm-up (the start-up objects, litellm's
modules above all, leave the collector's reach), ``--gc both`` runs the untraced pass both ways
side by side. ctxmw itself never changes the process's gc settings.

``--part 1`` or ``--part 2`` runs one part only.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ctxmw  # ctxmw first: it keeps litellm offline
from ctxmw import testing
from ctxmw.telemetry.recorder import CallRecorder

MODEL = "openai/gpt-4o-mini"
SIZES = (100, 2_000, 10_000)


def round_of(k: int) -> list[dict[str, Any]]:
    """One tool round: an assistant call, its result, a short assistant note."""
    call = {
        "id": f"call_{k}",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/f{k}.py"})},
    }
    body = "".join(f"line {i} of file {k}: some code here\n" for i in range(12))
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{k}", "content": body},
        {"role": "assistant", "content": f"Read f{k}; moving on."},
    ]


def transcript(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test."},
    ]
    k = 0
    while len(messages) < n:
        messages += round_of(k)
        k += 1
    return messages[:n]


class Instant:
    """A completion function that answers at once and remembers the last prompt."""

    def __init__(self) -> None:
        self.last: list[Any] = []

    async def __call__(self, model: str, messages: list[Any] | None = None, **kw: Any) -> Any:
        self.last = list(messages or [])
        return testing.text("ok", usage=testing.usage(100, 1))


class TelemetryClock:
    """Seconds spent in ``CallRecorder.record`` (the whole telemetry of a call), summed."""

    spent = 0.0
    _record = CallRecorder.record

    @classmethod
    def install(cls) -> None:
        async def timed(self: CallRecorder, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await cls._record(self, **kwargs)
            finally:
                cls.spent += time.perf_counter() - t0

        CallRecorder.record = timed  # type: ignore[method-assign]

    @classmethod
    def take(cls) -> float:
        spent, cls.spent = cls.spent, 0.0
        return spent


async def litellm_time(prompt: list[Any]) -> float:
    import litellm

    t0 = time.perf_counter()
    await litellm.acompletion(model=MODEL, messages=prompt, mock_response="ok")
    return time.perf_counter() - t0


def _balanced(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cut a trailing unanswered call so the history validates."""
    while history and history[-1].get("tool_calls"):
        history = history[:-1]
    return history


Timing = tuple[float, float, float]  # ctxmw's time, its telemetry's part, litellm's time


async def stateless(n: int, calls: int, folder: Path) -> Timing:
    fake = Instant()
    history = _balanced(transcript(n))
    save = folder / f"stateless-{n}.jsonl"
    ours, tele, theirs = [], [], []
    for k in range(calls + 1):
        history = [*history, *round_of(1_000_000 + k), {"role": "user", "content": f"go {k}"}]
        TelemetryClock.take()
        t0 = time.perf_counter()
        await ctxmw.acompletion(MODEL, history, save_file=save, completion=fake)
        elapsed = time.perf_counter() - t0
        history = [*history, {"role": "assistant", "content": "ok"}]
        if k:
            ours.append(elapsed)
            tele.append(TelemetryClock.take())
            theirs.append(await litellm_time(fake.last))
    return statistics.median(ours), statistics.median(tele), statistics.median(theirs)


async def session_path(n: int, calls: int, folder: Path) -> Timing:
    fake = Instant()
    save = folder / f"session-{n}.jsonl"
    lines = "".join(json.dumps(m) + "\n" for m in _balanced(transcript(n)))
    save.write_text(lines)
    session = ctxmw.Session(MODEL, save_file=save, completion=fake)
    ours, tele, theirs = [], [], []
    for k in range(calls + 1):
        TelemetryClock.take()
        t0 = time.perf_counter()
        await session.ask(f"go {k}")
        elapsed = time.perf_counter() - t0
        if k:
            ours.append(elapsed)
            tele.append(TelemetryClock.take())
            theirs.append(await litellm_time(fake.last))
    return statistics.median(ours), statistics.median(tele), statistics.median(theirs)


async def part1(calls: int) -> None:
    print("per call (median of", calls, "warm calls)")
    print(
        f"{'messages':>9} {'path':>10} {'ctxmw':>10} {'litellm':>10} {'ctxmw/litellm':>14} "
        f"{'telemetry':>10} {'telemetry/litellm':>18}",
        flush=True,
    )
    TelemetryClock.install()
    with tempfile.TemporaryDirectory() as tmp:
        for n in SIZES:
            for name, path in (("stateless", stateless), ("session", session_path)):
                ours, tele, theirs = await path(n, calls, Path(tmp))
                print(
                    f"{n:>9} {name:>10} {ours * 1e3:>7.2f} ms {theirs * 1e3:>7.2f} ms "
                    f"{ours / theirs:>13.2f}x {tele * 1e3:>7.2f} ms {tele / theirs:>17.3f}x",
                    flush=True,
                )


class GcWatch:
    """The longest garbage-collection pass and the number of full ones, from ``gc.callbacks``."""

    def __init__(self) -> None:
        self.longest, self.full, self._start = 0.0, 0, 0.0

    def __enter__(self) -> GcWatch:
        gc.callbacks.append(self._on)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._on)

    def _on(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        self.longest = max(self.longest, time.perf_counter() - self._start)
        self.full += info["generation"] == 2


class StepWatch:
    """The longest single event-loop step (one callback: a task running up to its next await).

    The ticker's lateness is the time of whole loop iterations: with hundreds of sessions ready
    at once (an instant fake model keeps every session busy) it is the sum of their steps, the
    price of a saturated CPU. The longest step is what blocks everyone else: a blocking call,
    a full gc pass, one long computation.
    """

    def __init__(self) -> None:
        self.longest = 0.0
        self._run = asyncio.Handle._run

    def __enter__(self) -> StepWatch:
        run, watch = self._run, self

        def timed(handle: asyncio.Handle) -> None:
            t0 = time.perf_counter()
            run(handle)
            watch.longest = max(watch.longest, time.perf_counter() - t0)

        asyncio.Handle._run = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.Handle._run = self._run  # type: ignore[method-assign]


async def ticker(stop: asyncio.Event, worst: list[float]) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(0.005)
        worst[0] = max(worst[0], time.perf_counter() - t0 - 0.005)


async def one_session(folder: Path, i: int, rounds: int, keep: list[Any]) -> None:
    fake = Instant()
    session = ctxmw.Session(MODEL, save_file=folder / f"s{i}.jsonl", completion=fake)
    for r in range(rounds):
        await session.ask(f"step {r}: " + "x" * 200)
    keep.append(session)


def transcript_bytes(sessions: list[Any]) -> int:
    return sum(len(json.dumps(m)) for s in sessions for m in s.messages)


async def part2(sessions: int, rounds: int, traced: bool, freeze: bool = False) -> None:
    stop, worst, keep = asyncio.Event(), [0.0], []
    with tempfile.TemporaryDirectory() as tmp:
        await one_session(Path(tmp), -1, 2, [])  # warm-up: imports, tokenizer tables
        gc.collect()
        if freeze:
            gc.freeze()
        if traced:
            tracemalloc.start()
        tick = asyncio.create_task(ticker(stop, worst))
        t0 = time.perf_counter()
        with GcWatch() as watch, StepWatch() as steps:
            await asyncio.gather(
                *(one_session(Path(tmp), i, rounds, keep) for i in range(sessions))
            )
        total = time.perf_counter() - t0
        stop.set()
        await tick
        label = ("traced" if traced else "untraced") + (", gc.freeze()" if freeze else "")
        print(
            f"{sessions} sessions x {rounds} rounds ({label}): {total:.1f} s total, "
            f"longest loop stall {worst[0] * 1e3:.1f} ms, longest single step "
            f"{steps.longest * 1e3:.1f} ms, longest gc pass {watch.longest * 1e3:.1f} ms, "
            f"{watch.full} full gc passes",
            flush=True,
        )
        if traced:
            gc.collect()
            current, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            own = transcript_bytes(keep)
            per = (current - own) / sessions
            print(
                f"  peak traced {peak / 2**20:.1f} MB, held {current / 2**20:.1f} MB, "
                f"transcripts {own / 2**20:.1f} MB, per session beyond its transcript "
                f"{per / 2**20:.3f} MB",
                flush=True,
            )
        if freeze:
            gc.unfreeze()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument(
        "--part", type=int, choices=(1, 2), help="run only part 1 or only part 2 (default: both)"
    )
    parser.add_argument(
        "--gc",
        choices=("default", "freeze", "both"),
        default="default",
        help="part 2's untraced pass with gc.freeze() after the warm-up, or both side by side",
    )
    parser.add_argument(
        "--traced",
        choices=("yes", "no", "only"),
        default="yes",
        help="part 2's traced (memory) pass after the untraced one(s), skipped, or alone",
    )
    args = parser.parse_args()
    # The alert rules fire on this synthetic traffic (an instant fake reports no cache reads).
    logging.getLogger("ctxmw").setLevel(logging.ERROR)
    if args.quick:
        global SIZES
        SIZES = (100, 2_000)
        args.sessions, args.rounds, args.calls = 100, 10, 5
    if args.part != 2:
        asyncio.run(part1(args.calls))
    if args.part != 1:
        passes = {"default": (False,), "freeze": (True,), "both": (False, True)}[args.gc]
        for freeze in passes if args.traced != "only" else ():
            asyncio.run(part2(args.sessions, args.rounds, traced=False, freeze=freeze))
        if args.traced != "no":
            asyncio.run(part2(args.sessions, args.rounds, traced=True, freeze=args.gc == "freeze"))


if __name__ == "__main__":
    main()
