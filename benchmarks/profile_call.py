"""Where ctxmw's own time of a warm call goes: a profile of many calls, summed by part.

Run: ``.venv/bin/python benchmarks/profile_call.py [--path session|stateless] [--size N]``.

Runs ``--calls`` warm calls at ``--size`` messages (the agent transcript of ``_agent.py``, one
new round per call, the instant fake of ``bench_overhead.py``, telemetry on) under cProfile and
prints each part's share of the event loop thread's CPU time in the calls (cumulative: a part
includes what it calls; the work handed to worker threads, the write and fsync above all, is not
in it) and the functions with the most time of their own. Profiling slows every Python call, so
read shares, not milliseconds: ``bench_overhead.py --part 1`` times the calls.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _agent import round_of, transcript
from bench_overhead import MODEL, Instant, _balanced

import ctxmw  # ctxmw first: it keeps litellm offline

PARTS = {
    "the strategies": ("strategies/_chain.py", "apply_strategies"),
    "the telemetry, after the answer": ("telemetry/recorder.py", "record"),
    "the telemetry, before the call": ("telemetry/recorder.py", "prepare_kwargs"),
    "the commit (the write itself in a worker thread)": ("runtime/session.py", "_commit"),
    "the turn's start (lock, file check, inbox)": ("runtime/session.py", "_begin"),
}
"""Part name: (file, function) whose cumulative time is the part's."""

Call = Callable[[int], Awaitable[None]]


async def session_calls(size: int, folder: Path) -> tuple[Call, str]:
    fake = Instant()
    save = folder / "session.jsonl"
    save.write_text("".join(json.dumps(m) + "\n" for m in _balanced(transcript(size)[:size])))
    session = ctxmw.Session(MODEL, save_file=save, completion=fake)

    async def one(k: int) -> None:
        fake.ready()
        await session.ask(f"go {k}")

    return one, "runtime/session.py:run"


async def stateless_calls(size: int, folder: Path) -> tuple[Call, str]:
    fake = Instant()
    save = folder / "stateless.jsonl"
    history = _balanced(transcript(size)[:size])

    async def one(k: int) -> None:
        nonlocal history
        history = [*history, *round_of(1_000_000 + k), {"role": "user", "content": f"go {k}"}]
        fake.ready()
        await ctxmw.acompletion(MODEL, history, save_file=save, completion=fake)
        history = [*history, {"role": "assistant", "content": "ok"}]

    return one, "runtime/wrapper.py:acompletion"


def cumulative(stats: pstats.Stats, file: str, function: str) -> float:
    raw = stats.stats  # type: ignore[attr-defined]  # pstats keeps its table here
    return sum(
        row[3] for (path, _, name), row in raw.items() if path.endswith(file) and name == function
    )


def report(stats: pstats.Stats, calls: int, whole: str) -> None:
    file, function = whole.split(":")
    total = cumulative(stats, file, function)
    print(f"{total / calls * 1e3:.2f} ms of loop-thread CPU per call under the profiler ({whole})")
    for name, (part_file, part_function) in PARTS.items():
        share = cumulative(stats, part_file, part_function) / total
        print(f"  {share:6.1%}  {name}")
    raw = stats.stats  # type: ignore[attr-defined]
    own = sorted(
        (
            (row[2], f"{Path(path).parent.name}/{Path(path).name}:{name}")
            for (path, _, name), row in raw.items()
        ),
        reverse=True,
    )
    print("functions with the most time of their own (any module):")
    for seconds, where in own[:15]:
        print(f"  {seconds / total:6.1%}  {where}")


async def main(path: str, size: int, calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        make = session_calls if path == "session" else stateless_calls
        one, whole = await make(size, Path(tmp))
        await one(-1)  # the first call loads and indexes the history: not a warm call
        profile = cProfile.Profile(time.thread_time)
        profile.enable()
        for k in range(calls):
            await one(k)
        profile.disable()
    print(f"{path}, {size} messages, {calls} warm calls")
    report(pstats.Stats(profile), calls, whole)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", choices=("session", "stateless"), default="session")
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(main(args.path, args.size, args.calls))
