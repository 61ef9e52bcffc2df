"""What the zero-configuration telemetry costs a drop-in call: the default ledger on and off.

Run: ``.venv/bin/python benchmarks/bench_default_ledger.py``. A caller sends its whole growing
history to ``ctxmw.acompletion`` with no save_file and no session id (the litellm habit), the
scripted fake answering. The same conversation is run with the default ledger off
(``default_ledger=False``: the calls are still found by their head and measured) and on (one
owner-only append per call, under a lock, in a worker thread), alternately, several times; it
prints the median wall time per call of each and their ratio, measured side by side in one run.
``--calls N`` sets the conversation's length, ``--repeats N`` the alternations.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ctxmw  # ctxmw first: it keeps litellm offline
from ctxmw.runtime import wrapper
from ctxmw.runtime._heads import HeadThreads
from ctxmw.runtime.conversations import Conversations
from ctxmw.testing import FakeCompletion, text, usage

MODEL = "openai/gpt-4o"
SYSTEM = {"role": "system", "content": "You review code. " + "Be precise. " * 400}


async def conversation(calls: int, ledger: bool) -> float:
    """Median seconds per call of one conversation of ``calls`` drop-in calls."""
    wrapper._conversations, wrapper._heads = Conversations(), HeadThreads()  # a fresh process
    fake = FakeCompletion(*[text("ok", usage=usage(2000, 5, cached_tokens=1920))] * calls)
    history: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": "Review the code."}]
    settings = {"default_ledger": ledger}
    times = []
    for n in range(calls):
        start = time.perf_counter()
        await ctxmw.acompletion(MODEL, history, completion=fake, settings=settings)
        times.append(time.perf_counter() - start)
        history = [*history, {"role": "assistant", "content": f"point {n}"}]
        history.append({"role": "user", "content": f"and then {n}?"})
    return statistics.median(times[1:])


async def main(calls: int, repeats: int) -> None:
    off: list[float] = []
    on: list[float] = []
    with tempfile.TemporaryDirectory() as state:
        os.environ["CTXMW_STATE_DIR"] = state
        await conversation(5, True)  # warm-up: litellm loaded, first-call costs paid
        for _ in range(repeats):
            off.append(await conversation(calls, False))
            on.append(await conversation(calls, True))
        size = (Path(state) / "calls.ledger.jsonl").stat().st_size
    a, b = statistics.median(off), statistics.median(on)
    print(f"{calls} drop-in calls per conversation, {repeats} alternations, median per call:")
    print(f"  default ledger off: {a * 1e3:.2f} ms")
    print(f"  default ledger on:  {b * 1e3:.2f} ms  ({b / a:.2f}x off)")
    print(f"  ledger bytes written: {size:,} ({size / (calls * repeats + 5):.0f} per call)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    asyncio.run(main(options.calls, options.repeats))
