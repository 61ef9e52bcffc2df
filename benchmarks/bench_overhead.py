"""ctxmw's own time per call beside litellm's own client time, and a thousand sessions in one loop.

Run: ``.venv/bin/python benchmarks/bench_overhead.py`` (``--quick`` for a smaller run).

Part 1, per call at 100, 2,000 and 10,000 messages (a tool-agent transcript: one call, its
result and a short note per round). For each size, in one run:

* ``litellm``: ``litellm.acompletion(..., mock_response=...)`` on the prompt ctxmw sent, i.e.
  litellm's own client-side work for that call (no network, no model);
* ``stateless``: ``ctxmw.acompletion`` given the whole history on every call (the litellm habit,
  what agent frameworks do), with a save_file, the default strategies and telemetry on, and a
  completion function that returns at once (its response built before the timed call: in a
  real call litellm builds it, on litellm's side of the table);
* ``session``: ``Session.ask`` on a session resumed from the same transcript.

Beside each: the part of ctxmw's time spent in its telemetry (``CallRecorder.record``: digests,
prefix estimate, usage, cost, alerts, building the ledger line; the line is written in the
commit's trip), in wall time and in loop-thread CPU time, the wall part over litellm's, and the
worker-thread trips ctxmw made per call (counted by a wrapper around ``anyio.to_thread.run_sync``
and ``run_in_executor`` installed here, not in ctxmw).

Each path is warmed with one call at the size (the first call indexes the history), then the
median of the next calls is reported, each call adding one round. Every call is timed alone:
all of ctxmw's calls at a size first, then litellm's calls on the very prompts ctxmw sent, each
call (either side) only once the process is idle (:func:`quiesce`: litellm's background logging
threads would otherwise steal the interpreter lock from the next call, whichever it is). Three
columns each: wall time; the event loop thread's CPU time (``time.thread_time``: the work done
on the loop, what blocks other tasks); and the process's CPU time (``time.process_time``: the
loop's and the worker threads' work; litellm runs its mock call's client work in an executor
thread, so its loop-thread CPU alone understates it). The ratios are ctxmw's over litellm's for
the same calls, measured side by side in one run; on a loaded machine the CPU ratios are the
steadier ones (wall time also counts waiting for a core).

Part 2, ``--sessions`` concurrent sessions x ``--rounds`` rounds in one event loop (default 1,000
x 50): total time and the process's CPU time (steadier than wall time on a shared machine),
the longest event-loop stall (a ticker task that sleeps 5 ms and records how late it woke), the
longest single loop step (see :class:`StepWatch`), the longest garbage-collection pass and how
many full (generation 2) passes ran, with their mean CPU time (``gc.callbacks``), the
worker-thread trips per call (counted as in part 1), then, traced, peak memory and memory per
session beyond its transcript's own bytes. Each pass also counts the gc-tracked objects
(``gc.get_objects()``): those alive at the start (and frozen, with ``--gc freeze``), those
each finished session keeps (its transcript's own given apart: a message dict holding only
strings and numbers is not tracked once a full pass has seen it), and, in the traced pass
(whose timing is not the point), the peak during the run, sampled every 0.25 s by a task that counts
them (the in-flight calls' objects). ``--gc freeze`` calls ``gc.freeze()`` after the
warm-up (the start-up objects, litellm's modules above all, leave the collector's reach),
``--gc both`` runs the untraced pass both ways side by side. ctxmw itself never changes the
process's gc settings. ``--litellm-alone`` runs each untraced pass again with the same traffic
sent by plain callers straight to ``litellm.acompletion(..., mock_response=...)``, no ctxmw: the
stall that litellm's own calls in flight make in the same process, for comparison (ctxmw's
sessions above use an instant fake, not litellm).

By default the fake model answers at once, so every session is always ready to run: the loop
is saturated and the ticker's lateness is the length of a whole loop iteration (the sum of a
thousand sessions' steps), not a stall. ``--latency SECONDS`` makes the fake (and the
litellm-alone callers) wait ``asyncio.sleep`` of that long before answering, jittered by +-50%
from a random seeded per session, like a provider, and each session starts at a random instant
within its first latency (callers arrive spread out, not all in one loop iteration): the
sessions then spend most of their time awaiting the model and the ticker measures stalls.
Beside the stall each pass prints the loop's busy share (the time spent running loop steps over
the pass's wall time).

``--part 1`` or ``--part 2`` runs one part only. ``--compare TREE`` runs part 1 on another
checkout (a git worktree of an earlier commit) and on this one, one size at a time, alternating,
each in a process of its own, and prints this tree's figures over that one's.

Part 1 also prints the per-call goal: ctxmw's process CPU per call without the one durable
append (``TranscriptFile.write_now``: the write and the fsync, timed on its own beside it) over
litellm's own client process CPU for the same prompt; the goal is at most 0.10x at 2,000 and
10,000 messages, on both paths.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

# --compare runs this script again on another tree: BENCH_OVERHEAD_TREE names the tree imported.
sys.path.insert(
    0, os.environ.get("BENCH_OVERHEAD_TREE") or str(Path(__file__).resolve().parents[1])
)

from _agent import round_of, transcript
from _trips import Trips

import ctxmw  # ctxmw first: it keeps litellm offline
from ctxmw import testing
from ctxmw.runtime.transcript import TranscriptFile
from ctxmw.telemetry.recorder import CallRecorder

MODEL = "openai/gpt-4o-mini"
SIZES: tuple[int, ...] = (100, 2_000, 10_000)


class Instant:
    """A completion function that answers at once and remembers the last prompt.

    The response a real call returns is built by litellm (its time is on litellm's side of the
    table), so part 1 builds each response before the timed call (:meth:`ready`) and the fake
    only hands it over; without one ready it builds its own (part 2 counts all the CPU).

    With a ``latency`` (part 2's ``--latency``) it answers after ``asyncio.sleep`` of that many
    seconds, jittered by +-50% from ``jitter`` (a seeded ``random.Random``), like a provider.
    """

    def __init__(self, latency: float = 0.0, jitter: random.Random | None = None) -> None:
        self.last: list[Any] = []
        self._ready: list[Any] = []
        self._latency, self._jitter = latency, jitter or random.Random(0)

    def ready(self) -> None:
        """Build the next call's response now, outside the timed call."""
        self._ready.append(testing.text("ok", usage=testing.usage(100, 1)))

    async def __call__(self, model: str, messages: list[Any] | None = None, **kw: Any) -> Any:
        self.last = list(messages or [])
        if self._latency:
            await asyncio.sleep(self._latency * self._jitter.uniform(0.5, 1.5))
        if self._ready:
            return self._ready.pop()
        return testing.text("ok", usage=testing.usage(100, 1))


class TelemetryClock:
    """Seconds spent in ``CallRecorder.record`` (the whole telemetry of a call), summed: wall
    time, and the loop thread's CPU time (steadier on a loaded machine; part 1 runs one task)."""

    spent = 0.0
    spent_cpu = 0.0
    _record = CallRecorder.record

    @classmethod
    def install(cls) -> None:
        async def timed(self: CallRecorder, **kwargs: Any) -> Any:
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                return await cls._record(self, **kwargs)
            finally:
                cls.add(t0, c0)

        CallRecorder.record = timed  # type: ignore[method-assign]

    @classmethod
    def add(cls, t0: float, c0: float) -> None:
        """Add the time since ``t0`` (wall) and ``c0`` (this thread's CPU)."""
        cls.spent += time.perf_counter() - t0
        cls.spent_cpu += time.thread_time() - c0

    @classmethod
    def take(cls) -> tuple[float, float]:
        spent, cls.spent, cls.spent_cpu = (cls.spent, cls.spent_cpu), 0.0, 0.0
        return spent


class AppendClock(TelemetryClock):
    """The durable append (``TranscriptFile.write_now``: write + fsync, in a worker thread),
    summed: wall time and that thread's CPU time. Part 1 reports ctxmw's CPU without it, and it
    beside, on its own."""

    spent = 0.0
    spent_cpu = 0.0
    _write = TranscriptFile.write_now

    @classmethod
    def install(cls) -> None:
        def timed(self: TranscriptFile, data: bytes) -> None:
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                cls._write(self, data)
            finally:
                cls.add(t0, c0)

        TranscriptFile.write_now = timed  # type: ignore[method-assign]


async def quiesce() -> None:
    """Wait until the process is idle (litellm's background logging threads have finished).

    Idle: under 2 ms of process CPU over a 20 ms sleep (other processes do not count); at most
    about a second.
    """
    for _ in range(50):
        c0 = time.process_time()
        await asyncio.sleep(0.02)
        if time.process_time() - c0 < 0.002:
            return


Sample = tuple[float, float, float]  # wall, loop-thread CPU, process CPU (seconds)


async def timed(call: Any) -> Sample:
    """One call, alone: after :func:`quiesce`, wall time, loop-thread and process CPU time."""
    await quiesce()
    t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
    await call()
    return time.perf_counter() - t0, time.thread_time() - c0, time.process_time() - p0


async def litellm_call(prompt: list[Any]) -> None:
    import litellm

    await litellm.acompletion(model=MODEL, messages=prompt, mock_response="ok")


def _balanced(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cut a trailing unanswered call so the history validates."""
    while history and history[-1].get("tool_calls"):
        history = history[:-1]
    return history


class Timing:
    """One path at one size: per call, ctxmw's and litellm's samples, telemetry, trips."""

    def __init__(self) -> None:
        self.ours: list[Sample] = []
        self.tele: list[tuple[float, float]] = []
        self.trips: list[int] = []
        self.append: list[tuple[float, float]] = []
        self.prompts: list[list[Any]] = []
        self.whole: list[list[Any]] = []  # the caller's whole history of each call
        self.theirs: list[Sample] = []

    def add(self, sample: Sample, prompt: list[Any], whole: list[Any]) -> None:
        self.ours.append(sample)
        self.tele.append(TelemetryClock.take())
        self.trips.append(Trips.take())
        self.append.append(AppendClock.take())
        self.prompts.append(prompt)
        self.whole.append(whole)

    @staticmethod
    def skip() -> None:
        """Forget a call's clocks: the first call at a size indexes the history, not warm."""
        TelemetryClock.take()
        Trips.take()
        AppendClock.take()

    async def litellm(self) -> Timing:
        """litellm's own client time on each prompt ctxmw sent, after all of ctxmw's calls."""
        for prompt in self.prompts:
            self.theirs.append(await timed(lambda p=prompt: litellm_call(p)))
        return self

    def medians(self) -> tuple[list[float], list[float], list[float], float]:
        """Per column (wall, loop CPU, process CPU): ctxmw's and litellm's medians; telemetry
        (wall, loop CPU) and trips."""
        ours = [statistics.median(x) for x in zip(*self.ours, strict=True)]
        theirs = [statistics.median(x) for x in zip(*self.theirs, strict=True)]
        tele = [statistics.median(x) for x in zip(*self.tele, strict=True)]
        return ours, theirs, tele, statistics.median(self.trips)

    def without_append(self) -> tuple[float, float, float]:
        """Medians of ctxmw's process CPU without the append's, the append's wall and CPU."""
        own = [s[2] - a[1] for s, a in zip(self.ours, self.append, strict=True)]
        wall, cpu = zip(*self.append, strict=True)
        return statistics.median(own), statistics.median(wall), statistics.median(cpu)


async def stateless(
    n: int,
    calls: int,
    folder: Path,
    options: dict[str, Any] | None = None,
    timing: Timing | None = None,
) -> Timing:
    """``ctxmw.acompletion`` on the whole history, one round added per call (``options``: more
    keyword arguments; ``timing``: a :class:`Timing` to fill)."""
    fake = Instant()
    history = _balanced(transcript(n)[:n])
    save = folder / f"stateless-{n}-{len(os.listdir(folder))}.jsonl"
    timing = timing or Timing()
    for k in range(calls + 1):
        history = [*history, *round_of(1_000_000 + k), {"role": "user", "content": f"go {k}"}]
        fake.ready()
        sample = await timed(
            lambda h=history: ctxmw.acompletion(
                MODEL, h, save_file=save, completion=fake, **(options or {})
            )
        )
        if k:
            timing.add(sample, fake.last, history)
        else:
            timing.skip()
        history = [*history, {"role": "assistant", "content": "ok"}]
    return await timing.litellm()


async def session_path(
    n: int,
    calls: int,
    folder: Path,
    options: dict[str, Any] | None = None,
    timing: Timing | None = None,
) -> Timing:
    """``Session.ask`` on a session resumed from the same transcript (arguments as above)."""
    fake = Instant()
    save = folder / f"session-{n}-{len(os.listdir(folder))}.jsonl"
    lines = "".join(json.dumps(m) + "\n" for m in _balanced(transcript(n)[:n]))
    save.write_text(lines)
    session = ctxmw.Session(MODEL, save_file=save, completion=fake, **(options or {}))
    timing = timing or Timing()
    for k in range(calls + 1):
        fake.ready()
        sample = await timed(lambda k=k: session.ask(f"go {k}"))
        if k:
            timing.add(sample, fake.last, session.messages[:-1])  # the transcript before the reply
        else:
            timing.skip()
    return await timing.litellm()


async def part1(calls: int, rows: list[dict[str, Any]] | None = None) -> None:
    print(
        f"per call, median of {calls} warm calls: wall, loop-thread CPU, process CPU "
        "(ms; ctxmw | litellm | ctxmw/litellm)"
    )
    print(
        f"{'messages':>8} {'path':>9} | {'wall':>6} {'loop':>6} {'proc':>6} | {'wall':>6} "
        f"{'loop':>6} {'proc':>6} | {'wall':>6} {'loop':>6} {'proc':>6} | {'telemetry':>9} "
        f"{'tele loop':>9} {'tele/litellm':>12} {'trips':>5}",
        flush=True,
    )
    TelemetryClock.install()
    Trips.install()
    AppendClock.install()
    await litellm_call([{"role": "user", "content": "warm-up"}])
    with tempfile.TemporaryDirectory() as tmp:
        for n in SIZES:
            for name, path in (("stateless", stateless), ("session", session_path)):
                timing = await path(n, calls, Path(tmp))
                ours, theirs, tele, trips = timing.medians()
                ms = " ".join(f"{x * 1e3:>6.2f}" for x in ours)
                theirs_ms = " ".join(f"{x * 1e3:>6.2f}" for x in theirs)
                ratios = " ".join(f"{a / b:>5.2f}x" for a, b in zip(ours, theirs, strict=True))
                print(
                    f"{n:>8} {name:>9} | {ms} | {theirs_ms} | {ratios} | {tele[0] * 1e3:>6.2f} ms "
                    f"{tele[1] * 1e3:>6.2f} ms {tele[0] / theirs[0]:>11.3f}x {trips:>5.0f}",
                    flush=True,
                )
                own, append_wall, append_cpu = timing.without_append()
                print(
                    f"{'':>8} {'':>9}   per-call goal: ctxmw process CPU without the append "
                    f"{own * 1e3:.2f} ms = {own / theirs[2]:.3f}x litellm's {theirs[2] * 1e3:.2f} "
                    f"ms (goal <= 0.10x); the append alone: {append_wall * 1e3:.2f} ms wall, "
                    f"{append_cpu * 1e3:.2f} ms CPU",
                    flush=True,
                )
                if rows is not None:
                    rows.append({"n": n, "path": name, "ours": ours, "theirs": theirs, "own": own})


class GcWatch:
    """The longest garbage-collection pass and the number of full ones, from ``gc.callbacks``.

    ``longest_cpu`` is the CPU time of the thread running that pass (``time.thread_time``): a
    pass whose wall time is much longer waited for a core (a loaded machine) or for the
    interpreter lock (finalizers run during the pass may hand it to worker threads).
    """

    def __init__(self) -> None:
        self.longest, self.longest_cpu, self.full = 0.0, 0.0, 0
        self.full_cpu = 0.0  # the full passes' CPU time, summed (its mean is the steadier)
        self._start = self._start_cpu = 0.0

    def __enter__(self) -> GcWatch:
        gc.callbacks.append(self._on)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._on)

    def _on(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start, self._start_cpu = time.perf_counter(), time.thread_time()
            return
        wall, cpu = time.perf_counter() - self._start, time.thread_time() - self._start_cpu
        if wall > self.longest:
            self.longest, self.longest_cpu = wall, cpu
        if info["generation"] == 2:
            self.full += 1
            self.full_cpu += cpu


class StepWatch:
    """The longest single event-loop step (one callback: a task running up to its next await).

    The ticker's lateness is the time of whole loop iterations: with hundreds of sessions ready
    at once (an instant fake model keeps every session busy) it is the sum of their steps, the
    price of a saturated CPU. The longest step is what blocks everyone else: a blocking call,
    a full gc pass, one long computation. ``busy`` sums every step's time: over the run's wall
    time, the share of it the loop was running callbacks (the rest it waited: for timers, I/O,
    worker threads). Near 100% the ticker's lateness measures saturation, not stalls.
    """

    def __init__(self) -> None:
        self.longest = self.busy = 0.0
        self._run = asyncio.Handle._run

    def __enter__(self) -> StepWatch:
        run, watch = self._run, self

        def timed(handle: asyncio.Handle) -> None:
            t0 = time.perf_counter()
            run(handle)
            step = time.perf_counter() - t0
            watch.busy += step
            watch.longest = max(watch.longest, step)

        asyncio.Handle._run = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.Handle._run = self._run  # type: ignore[method-assign]


async def ticker(stop: asyncio.Event, worst: list[float]) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(0.005)
        worst[0] = max(worst[0], time.perf_counter() - t0 - 0.005)


async def one_session(
    folder: Path, i: int, rounds: int, keep: list[Any], latency: float = 0.0
) -> None:
    jitter = random.Random(i)
    fake = Instant(latency, jitter)
    session = ctxmw.Session(MODEL, save_file=folder / f"s{i}.jsonl", completion=fake)
    await arrive(latency, jitter)
    for r in range(rounds):
        await session.ask(f"step {r}: " + "x" * 200)
    keep.append(session)


async def arrive(latency: float, jitter: random.Random) -> None:
    """With a latency, a session starts at a random instant within its first latency: callers
    arrive spread out, as in a service, not all in one loop iteration (whose steps, run back
    to back, the ticker would report as one stall)."""
    if latency:
        await asyncio.sleep(latency * jitter.random())


class LitellmAlone:
    """A caller with no ctxmw: its own history, sent whole to ``litellm.acompletion`` each round."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []


async def one_litellm_caller(
    folder: Path, i: int, rounds: int, keep: list[Any], latency: float = 0.0
) -> None:
    """The same traffic as :func:`one_session` through litellm alone (``mock_response``; a
    ``latency`` is slept before each call, jittered as :class:`Instant` does)."""
    import litellm

    caller, jitter = LitellmAlone(), random.Random(i)
    await arrive(latency, jitter)
    for r in range(rounds):
        caller.messages.append({"role": "user", "content": f"step {r}: " + "x" * 200})
        if latency:
            await asyncio.sleep(latency * jitter.uniform(0.5, 1.5))
        reply = await litellm.acompletion(model=MODEL, messages=caller.messages, mock_response="ok")
        caller.messages.append({"role": "assistant", "content": reply.choices[0].message.content})
    keep.append(caller)


def transcript_bytes(sessions: list[Any]) -> int:
    return sum(len(json.dumps(m)) for s in sessions for m in s.messages)


def tracked() -> int:
    """The gc-tracked objects the collector can reach (frozen ones are not counted)."""
    return len(gc.get_objects())


async def sample_tracked(stop: asyncio.Event, peak: list[int]) -> None:
    """The peak number of tracked objects, sampled every 0.25 s (traced pass only: it blocks)."""
    while not stop.is_set():
        peak[0] = max(peak[0], tracked())
        await asyncio.sleep(0.25)


def tracked_in(value: Any) -> int:
    """The tracked objects of a transcript (its list, messages and their nested containers)."""
    inner = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return gc.is_tracked(value) + sum(map(tracked_in, inner))


def tracked_line(base: int, peak: int, keep: list[Any]) -> str:
    """Tracked objects at the start, kept per finished session, and the run's peak."""
    gc.collect()  # a full pass also stops tracking the dicts that hold only strings and numbers
    per = (tracked() - base) / len(keep)
    own = sum(tracked_in(s.messages) for s in keep) / len(keep)
    frozen = f" (+{gc.get_freeze_count():,} frozen)" if gc.get_freeze_count() else ""
    during = f", peak {peak:,} during the run" if peak else ""
    return (
        f"  tracked objects: {base:,} at the start{frozen}, {per:,.0f} kept per finished session "
        f"({own:,.0f} of them its transcript's own){during}"
    )


async def part2(
    sessions: int,
    rounds: int,
    traced: bool,
    freeze: bool = False,
    alone: bool = False,
    latency: float = 0.0,
) -> None:
    stop, worst, keep = asyncio.Event(), [0.0], []
    one = one_litellm_caller if alone else one_session
    with tempfile.TemporaryDirectory() as tmp:
        await one(Path(tmp), -1, 2, [])  # warm-up: imports, tokenizer tables
        gc.collect()
        if freeze:
            gc.freeze()
        if traced:
            tracemalloc.start()
        base, peak = tracked(), [0]
        tick = asyncio.create_task(ticker(stop, worst))
        sampler = asyncio.create_task(sample_tracked(stop, peak)) if traced else None
        Trips.install()
        Trips.take()
        t0, c0 = time.perf_counter(), time.process_time()
        with GcWatch() as watch, StepWatch() as steps:
            await asyncio.gather(
                *(one(Path(tmp), i, rounds, keep, latency) for i in range(sessions))
            )
        total, cpu = time.perf_counter() - t0, time.process_time() - c0
        trips = Trips.take() / (sessions * rounds)
        stop.set()
        await tick
        if sampler is not None:
            await sampler
        label = ("traced" if traced else "untraced") + (", gc.freeze()" if freeze else "")
        label += f", latency {latency:g} s" if latency else ", instant model"
        who = "litellm alone, no ctxmw: callers" if alone else "sessions"
        print(
            f"{sessions} {who} x {rounds} rounds ({label}): {total:.1f} s total "
            f"({cpu:.1f} CPU s), "
            f"longest loop stall {worst[0] * 1e3:.1f} ms, longest single step "
            f"{steps.longest * 1e3:.1f} ms, longest gc pass {watch.longest * 1e3:.1f} ms "
            f"({watch.longest_cpu * 1e3:.1f} ms CPU), loop busy {steps.busy / total:.0%}, "
            f"{watch.full} full gc passes ({watch.full_cpu / max(watch.full, 1) * 1e3:.1f} ms "
            f"CPU each on average), {trips:.2f} worker-thread trips per call",
            flush=True,
        )
        print(tracked_line(base, peak[0], keep), flush=True)
        if traced:
            gc.collect()
            current, top = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            own = transcript_bytes(keep)
            per = (current - own) / sessions
            print(
                f"  peak traced {top / 2**20:.1f} MB, held {current / 2**20:.1f} MB, "
                f"transcripts {own / 2**20:.1f} MB, per session beyond its transcript "
                f"{per / 2**20:.3f} MB",
                flush=True,
            )
        if freeze:
            gc.unfreeze()


def compare(base: str, calls: int) -> None:
    """Part 1 on ``base`` and on this tree, one size at a time, each in a process of its own
    (alternating which runs first), then ctxmw's figures of this tree over the base's."""
    here = str(Path(__file__).resolve().parents[1])
    found: dict[str, list[dict[str, Any]]] = {base: [], here: []}
    for i, n in enumerate(SIZES):
        for tree in (base, here) if i % 2 == 0 else (here, base):
            label = "base" if tree == base else "this tree"
            print(f"--- {label} ({tree}), {n} messages", file=sys.stderr, flush=True)
            env = {**os.environ, "BENCH_OVERHEAD_TREE": tree}
            argv = [sys.executable, __file__, "--part", "1", "--calls", str(calls)]
            done = subprocess.run(
                [*argv, "--sizes", str(n), "--json"],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            *text, data = done.stdout.strip().splitlines()
            print("\n".join(f"[{label}] {row}" for row in text), flush=True)
            found[tree] += json.loads(data)
    print("\nthis tree over the base, ctxmw's medians per call (wall, loop CPU, process CPU):")
    for old, new in zip(found[base], found[here], strict=True):
        ratios = " ".join(f"{a / b:.2f}x" for a, b in zip(new["ours"], old["ours"], strict=True))
        print(
            f"{new['n']:>8} {new['path']:>9}: {ratios}; over litellm's process CPU: base "
            f"{old['ours'][2] / old['theirs'][2]:.3f}x, this tree "
            f"{new['ours'][2] / new['theirs'][2]:.3f}x",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument(
        "--compare",
        metavar="TREE",
        help="part 1 on another checkout of ctxmw (e.g. a git worktree of main) and on this "
        "one, side by side in one run, with this tree's figures over that one's",
    )
    parser.add_argument("--sizes", help="part 1's transcript sizes, comma-separated")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
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
    parser.add_argument(
        "--litellm-alone",
        action="store_true",
        help="part 2 also runs the same traffic through litellm.acompletion(mock_response) "
        "with no ctxmw (each --gc pass, untraced): the stall litellm's own calls in flight make",
    )
    parser.add_argument(
        "--latency",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="part 2's fake model answers after this many seconds, jittered +-50%% (seeded): "
        "the ticker then measures stalls, not a saturated loop (default 0: at once)",
    )
    args = parser.parse_args()
    # The alert rules fire on this synthetic traffic (an instant fake reports no cache reads).
    logging.getLogger("ctxmw").setLevel(logging.ERROR)
    global SIZES
    if args.quick:
        SIZES = (100, 2_000)
        args.sessions, args.rounds, args.calls = 100, 10, 5
    if args.sizes:
        SIZES = tuple(int(x) for x in args.sizes.split(","))
    if args.compare:
        compare(args.compare, args.calls)
        return
    if args.part != 2:
        rows: list[dict[str, Any]] = []
        asyncio.run(part1(args.calls, rows))
        if args.json:
            print(json.dumps(rows))
    if args.part != 1:
        passes = {"default": (False,), "freeze": (True,), "both": (False, True)}[args.gc]
        size = (args.sessions, args.rounds)
        for freeze in passes if args.traced != "only" else ():
            asyncio.run(part2(*size, traced=False, freeze=freeze, latency=args.latency))
            if args.litellm_alone:
                asyncio.run(
                    part2(*size, traced=False, freeze=freeze, alone=True, latency=args.latency)
                )
        if args.traced != "no":
            freeze = args.gc == "freeze"
            asyncio.run(part2(*size, traced=True, freeze=freeze, latency=args.latency))


if __name__ == "__main__":
    main()
