"""Worker-thread trips per kind of call: each one costs the event loop's thread CPU and latency.

Run: ``.venv/bin/python benchmarks/bench_trips.py`` (a second or two, offline, the shipped fake).

A warm call (the save_file already loaded, no inbox note waiting) aims at one trip before the
model call (the lock, "did the file change?", the inbox listing) and one after it (the round's
write and fsync, the telemetry's ledger line, the inbox notes settled, the lock given back). The
table prints, per kind of call, the trips counted and the figure that design aims at, side by
side; a row that exceeds its aim is marked, and ``--check`` exits 1 on one.

Trips are counted by a wrapper this script installs around both doors to a worker thread:
``anyio.to_thread.run_sync`` and the event loop's ``run_in_executor`` (what aiofiles uses).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _trips import Trips

import ctxmw  # ctxmw first: it keeps litellm offline
from ctxmw.testing import FakeCompletion, text, tool_calls
from ctxmw.types import Messages

MODEL = "openai/gpt-4o-mini"
QUIET = {"telemetry": False}


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


Row = tuple[str, float, float]  # kind of call, trips per call measured, trips aimed at


async def warm_turns(folder: Path, settings: dict[str, Any] | None) -> float:
    fake = FakeCompletion(*(text(f"answer {n}") for n in range(6)))
    session = ctxmw.Session(
        MODEL, save_file=folder / "turns.jsonl", completion=fake, settings=settings
    )
    await session.ask("first")  # cold: creates the file
    Trips.take()
    for n in range(5):
        await session.ask(f"turn {n}")
    return Trips.take() / 5


async def stateless_calls(folder: Path, settings: dict[str, Any] | None) -> tuple[float, float]:
    """(the first call's trips, a warm call's on average)."""
    save_file = folder / "stateless.jsonl"
    history: Messages = [{"role": "user", "content": "first"}]
    fake = FakeCompletion(*(text(f"answer {n}") for n in range(6)))
    counts = []
    for n in range(6):
        response = await ctxmw.acompletion(
            MODEL, history, save_file=save_file, completion=fake, settings=settings
        )
        counts.append(Trips.take())
        history = [
            *history,
            response.choices[0].message.model_dump(),
            {"role": "user", "content": f"q{n}"},
        ]
    return counts[0], sum(counts[1:]) / len(counts[1:])


async def tool_turn(folder: Path, settings: dict[str, Any] | None) -> float:
    fake = FakeCompletion(text("hello"), tool_calls(("add", {"a": 1, "b": 2})), text("3"))
    session = ctxmw.Session(
        MODEL, save_file=folder / "tools.jsonl", tools=[add], completion=fake, settings=settings
    )
    await session.ask("hi")
    Trips.take()
    await session.ask("1 + 2?")
    return Trips.take()


async def streams(folder: Path) -> float:
    save_file = folder / "stream.jsonl"
    history: Messages = [{"role": "user", "content": "one"}]
    fake = FakeCompletion(*(text(f"a{n}") for n in range(4)))
    counts = []
    for n in range(4):
        stream = await ctxmw.acompletion(
            MODEL, history, save_file=save_file, stream=True, completion=fake, settings=QUIET
        )
        _ = [chunk async for chunk in stream]
        counts.append(Trips.take())
        history = [*history, {"role": "assistant", "content": f"a{n}"}]
        history.append({"role": "user", "content": "more"})
    return sum(counts[1:]) / len(counts[1:])


async def after_another_writer(folder: Path) -> float:
    save_file = folder / "outside.jsonl"
    history: Messages = [{"role": "user", "content": "one"}]
    fake = FakeCompletion(text("a1"), text("a2"))
    await ctxmw.acompletion(MODEL, history, save_file=save_file, completion=fake, settings=QUIET)
    with save_file.open("a") as handle:
        handle.write(json.dumps({"role": "user", "content": "from another writer"}) + "\n")
    history = json.loads("[" + ",".join(save_file.read_text().splitlines()) + "]")
    history.append({"role": "user", "content": "two"})
    Trips.take()
    await ctxmw.acompletion(MODEL, history, save_file=save_file, completion=fake, settings=QUIET)
    return Trips.take()


async def inbox_listing(folder: Path) -> float:
    Trips.take()
    await ctxmw.prepare_prompt(
        [{"role": "user", "content": "hi"}], "inbox", save_file=folder / "inbox.jsonl"
    )
    return Trips.take()


async def measure(folder: Path) -> list[Row]:
    rows: list[Row] = []

    async def each(name: str, aim: float, run: Callable[[], Awaitable[float]]) -> None:
        rows.append((name, await run(), aim))

    await each("Session turn, warm", 2, lambda: warm_turns(folder / "a", QUIET))
    await each("Session turn, warm, telemetry on", 2, lambda: warm_turns(folder / "b", None))
    first, warm = await stateless_calls(folder / "c", QUIET)
    rows += [("acompletion, first call (reads the file)", first, 3)]
    rows += [("acompletion, warm", warm, 2)]
    _, warm = await stateless_calls(folder / "d", None)
    rows += [("acompletion, warm, telemetry on", warm, 2)]
    await each("Session turn with one tool round", 3, lambda: tool_turn(folder / "e", QUIET))
    await each("Session tool turn, telemetry on", 3, lambda: tool_turn(folder / "f", None))
    await each("acompletion stream, warm", 2, lambda: streams(folder / "g"))
    await each("acompletion after another writer", 3, lambda: after_another_writer(folder / "h"))
    await each("prepare_prompt 'inbox', no inbox", 1, lambda: inbox_listing(folder / "i"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a row exceeds its aim")
    args = parser.parse_args(argv)
    Trips.install()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in "abcdefghi":
            (folder / name).mkdir()
        rows = anyio.run(measure, folder)
    print(f"{'kind of call':<44} {'trips':>6} {'aim':>4}")
    over = 0
    for name, trips, aim in rows:
        mark = "  OVER" if trips > aim else ""
        over += bool(mark)
        print(f"{name:<44} {trips:>6.2f} {aim:>4.0f}{mark}")
    print(f"{over} of {len(rows)} kinds of call over their aim")
    return 1 if args.check and over else 0


if __name__ == "__main__":
    raise SystemExit(main())
