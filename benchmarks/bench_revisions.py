"""What a stateless caller's history costs ctxmw per call, and on disk, beside json.dumps.

Not a test: run ``python benchmarks/bench_revisions.py``. Everything is measured in one run on
the same synthetic transcript, so the ratios mean something on any machine:

* ``plan_history`` (lining the caller's history up against the record) when the history grew
  by one message, and when the system prompt moved (an edit), each beside one ``json.dumps`` of
  the whole history: cold (nothing known), and as a conversation's next call runs it (the
  previous call's messages as the hint, normal keys cached, every dict rebuilt by the caller);
* the save_file's bytes after 100 calls whose system prompt carries the time, beside the bytes
  of the conversation itself: the record grows with the calls, not with their square.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio

import ctxmw
from ctxmw.replay.synthetic import synthetic_transcript
from ctxmw.runtime.revisions import plan_history
from ctxmw.testing import FakeCompletion, text
from ctxmw.types import Messages


def per_call(fn: Callable[[], object], repeat: int = 30) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def history(n_calls: int) -> Messages:
    return [{"role": "system", "content": "Current time: 10:00."}, *synthetic_transcript(n_calls)]


def planning(n_calls: int) -> None:
    stored = history(n_calls)
    ours = [False] * len(stored)
    grown = [*(dict(m) for m in stored), {"role": "user", "content": "next"}]
    moved = [{"role": "system", "content": "Current time: 10:01."}, *grown[1:]]
    dumps = per_call(lambda: json.dumps(stored))
    append = per_call(lambda: plan_history(stored, ours, grown))
    edit = per_call(lambda: plan_history(stored, ours, moved))
    print(
        f"{len(stored):>6} messages: json.dumps {dumps * 1e3:7.2f} ms | plan (grown) "
        f"{append * 1e3:7.2f} ms = {append / dumps:5.1f}x | plan (system moved) "
        f"{edit * 1e3:7.2f} ms = {edit / dumps:5.1f}x"
    )
    # As a conversation's next call runs it (what Session keeps between calls): the previous
    # call's messages as the hint and the normal keys cached; the caller rebuilds every dict.
    keys: dict[int, tuple[object, str]] = {}
    previous = [dict(m) for m in stored]
    plan_history(stored, ours, previous, keys=keys)

    def next_call(messages: Messages) -> None:
        plan_history(stored, ours, [dict(m) for m in messages], hint=previous, keys=keys)

    copy = per_call(lambda: [dict(m) for m in grown])  # the caller's own rebuild, subtracted
    append_hint = per_call(lambda: next_call(grown)) - copy
    edit_hint = per_call(lambda: next_call(moved)) - copy
    print(
        f"{'':>6}  next call of the conversation (hint, keys): plan (grown) "
        f"{append_hint * 1e3:7.2f} ms = {append_hint / dumps:5.1f}x | plan (system moved) "
        f"{edit_hint * 1e3:7.2f} ms = {edit_hint / dumps:5.1f}x"
    )


async def moving_system_prompt(calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        save_file = Path(tmp) / "agent.jsonl"
        fake = FakeCompletion()
        convo: Messages = [{"role": "user", "content": "start"}]
        for n in range(calls):
            fake.queue(text(f"answer {n}"))
            system = {"role": "system", "content": f"Current time: 10:{n:02d}."}
            await ctxmw.acompletion(
                "openai/gpt-4o-mini",
                [system, *convo],
                save_file=save_file,
                completion=fake,
                prompt_strategies="none",
                settings={"telemetry": False},
            )
            convo += [{"role": "assistant", "content": f"answer {n}"}]
            convo += [{"role": "user", "content": f"question {n}"}]
        record, files = await anyio.to_thread.run_sync(_listing, save_file)
        once = len(json.dumps([system, *convo]))
        print(
            f"{calls} calls, moving system prompt: save_file {record} bytes, the conversation "
            f"once {once} bytes: {record / once:.2f}x; files: {files}"
        )


def _listing(save_file: Path) -> tuple[int, list[str]]:
    return save_file.stat().st_size, sorted(p.name for p in save_file.parent.iterdir())


if __name__ == "__main__":
    for n in (100, 1000):
        planning(n)
    anyio.run(moving_system_prompt, 100)
