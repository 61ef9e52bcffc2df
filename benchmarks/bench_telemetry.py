"""Telemetry's added time per call against litellm.token_counter on the whole transcript.

Run: ``.venv/bin/python benchmarks/bench_telemetry.py``. For each transcript size the recorder
first sees the transcript once (warm-up: every message is counted once), then records calls that
each add one tool round (3 messages), as an agent loop does. Beside it, in the same run, the time
``litellm.token_counter`` takes on the whole payload of the same calls. Per-message caching
shows as a ratio that grows with the transcript: the recorder's work follows the new messages.
"""

from __future__ import annotations

import asyncio
import json
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ctxmw.telemetry import CallRecorder  # ctxmw first: it keeps litellm offline

MODEL = "gpt-4o"
SIZES = (100, 1_000, 5_000)
CALLS = 20
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def round_of(k: int) -> list[dict[str, Any]]:
    """One tool round: an assistant call, its result, a short assistant note."""
    call = {
        "id": f"c{k}",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/f{k}.py"})},
    }
    body = "".join(f"line {i} of file {k}: some code here\n" for i in range(12))
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{k}", "content": body},
        {"role": "assistant", "content": f"Read f{k}; moving on."},
    ]


def transcript(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    k = 0
    while len(messages) < n:
        messages += round_of(k)
        k += 1
    return messages[:n]


async def bench(n: int) -> tuple[float, float]:
    import litellm

    messages = transcript(n)
    recorder = CallRecorder("bench", logger=logging.getLogger("bench.silent"))
    await recorder.record(
        model=MODEL, wire_kwargs={"messages": messages, "tools": TOOLS}, transcript=messages
    )  # warm-up: counts every message once
    added, whole = [], []
    for k in range(CALLS):
        messages = messages + round_of(10_000 + k)
        kwargs = {"messages": messages, "tools": TOOLS}
        t0 = time.perf_counter()
        await recorder.record(
            model=MODEL, wire_kwargs=kwargs, transcript=messages, trace=[("none", messages)]
        )
        t1 = time.perf_counter()
        litellm.token_counter(model=MODEL, messages=messages, tools=TOOLS)
        t2 = time.perf_counter()
        added.append(t1 - t0)
        whole.append(t2 - t1)
    return statistics.median(added), statistics.median(whole)


async def main() -> None:
    logging.getLogger("bench.silent").disabled = True
    print(f"{'messages':>9}  {'telemetry/call':>15}  {'token_counter(whole)':>21}  {'ratio':>6}")
    for n in SIZES:
        added, whole = await bench(n)
        print(f"{n:>9}  {added * 1e3:>12.3f} ms  {whole * 1e3:>18.3f} ms  {whole / added:>5.1f}x")


if __name__ == "__main__":
    asyncio.run(main())
