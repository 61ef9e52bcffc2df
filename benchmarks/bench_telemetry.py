"""Telemetry's added time per call against litellm.token_counter on the whole transcript.

Run: ``.venv/bin/python benchmarks/bench_telemetry.py``. For each transcript size the recorder
first sees the transcript once (warm-up: every message is counted once), then records calls that
each add one tool round (3 messages), as an agent loop does. Beside it, in the same run, the time
``litellm.token_counter`` takes on the whole payload of the same calls. Per-message caching
shows as a ratio that grows with the transcript: the recorder's work follows the new messages.

Beside each, the loop-thread CPU time of a warm call (``time.thread_time``: steadier than wall
time on a shared machine), and the longest event-loop step during the first call (a task
yielding at every step runs beside it): what every other session waits while the whole
transcript is digested and counted. ``--sizes 100,2000,10000`` picks the sizes.

``--parts``: the two per-call constants side by side in one run, each against what it replaced:
the cost from the model's resolved rates (``ctxmw.telemetry.cost.fast_cost``) against
``litellm.completion_cost`` on the same responses, and one message counted with the per-model
counter (``LiteLLMCounter.message_tokens``) against ``litellm.token_counter`` on that message;
each pair is checked equal before it is timed.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _agent import round_of, transcript

from ctxmw.telemetry import CallRecorder  # ctxmw first: it keeps litellm offline

HEAD = [{"role": "system", "content": "You are an agent."}]

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


async def bench(n: int) -> tuple[float, float, float, float]:
    """Median wall and loop-CPU time of a warm call, litellm's count of the whole payload, and
    the longest loop step of the first call (the whole transcript never seen before)."""
    import litellm

    messages = transcript(n, head=HEAD, id_prefix="c")[:n]
    recorder = CallRecorder("bench", logger=logging.getLogger("bench.silent"))
    first = await _longest_step(
        recorder.record(
            model=MODEL,
            wire_kwargs={"messages": messages, "tools": TOOLS},
            transcript=messages,
            trace=[("none", messages)],
        )
    )  # warm-up: counts every message once
    added, cpu, whole = [], [], []
    for k in range(CALLS):
        messages = messages + round_of(10_000 + k, id_prefix="c")
        kwargs = {"messages": messages, "tools": TOOLS}
        t0, c0 = time.perf_counter(), time.thread_time()
        await recorder.record(
            model=MODEL, wire_kwargs=kwargs, transcript=messages, trace=[("none", messages)]
        )
        t1, c1 = time.perf_counter(), time.thread_time()
        litellm.token_counter(model=MODEL, messages=messages, tools=TOOLS)
        t2 = time.perf_counter()
        added.append(t1 - t0)
        cpu.append(c1 - c0)
        whole.append(t2 - t1)
    return statistics.median(added), statistics.median(cpu), statistics.median(whole), first


async def _longest_step(call: Any) -> float:
    """Run ``call`` beside a task that yields at every loop step; the longest gap it saw."""
    done, longest = asyncio.Event(), [0.0]

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0)
            now = time.perf_counter()
            longest[0], last = max(longest[0], now - last), now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    await call
    done.set()
    await task
    return longest[0]


def _timed(fn: Any, rounds: int = 300) -> float:
    t0 = time.perf_counter()
    for _ in range(rounds):
        fn()
    return (time.perf_counter() - t0) / rounds


def _row(name: str, fast: float, other: str, slow: float) -> None:
    ratio = fast / slow
    print(f"{name:<6} fast {fast * 1e3:7.3f} ms  {other:<15} {slow * 1e3:7.3f} ms  {ratio:.3f}x")


def parts() -> None:
    """Cost and token counting, fast path against litellm's per-call one, side by side."""
    import litellm

    from ctxmw import _litellm
    from ctxmw.context.tokens import LiteLLMCounter
    from ctxmw.telemetry.cost import fast_cost

    usage = _litellm.usage_object(12_000, 300, cached_tokens=8_000)
    reply = _litellm.model_response("ok", None, usage, "gpt-4o-mini-2024-07-18")
    model, provider = "openai/gpt-4o-mini", "openai"
    assert fast_cost(reply, model, provider) == _litellm.completion_cost(reply, model, provider)
    fast = _timed(lambda: fast_cost(reply, model, provider))
    slow = _timed(lambda: _litellm.completion_cost(reply, model, provider))
    _row("cost", fast, "completion_cost", slow)
    counter, message = LiteLLMCounter(), round_of(7, id_prefix="c")[1]
    once = counter.message_tokens(MODEL, message)
    assert once == litellm.token_counter(
        model=MODEL, messages=[message], count_response_tokens=True
    )
    fast = _timed(lambda: counter.message_tokens(MODEL, message))
    slow = _timed(
        lambda: litellm.token_counter(model=MODEL, messages=[message], count_response_tokens=True)
    )
    _row("count", fast, "token_counter", slow)


async def main() -> None:
    if "--parts" in sys.argv:
        parts()
        return
    sizes = SIZES
    if "--sizes" in sys.argv:
        sizes = tuple(int(n) for n in sys.argv[sys.argv.index("--sizes") + 1].split(","))
    logging.getLogger("bench.silent").disabled = True
    # The process's first record loads the tokenizer: not any size's first call.
    await CallRecorder("warm", logger=logging.getLogger("bench.silent")).record(
        model=MODEL, wire_kwargs={"messages": HEAD, "tools": TOOLS}, transcript=HEAD
    )
    print(
        f"{'messages':>9}  {'telemetry/call':>15}  {'loop CPU':>9}  {'token_counter(whole)':>21}"
        f"  {'ratio':>6}  {'first call: longest loop step':>30}"
    )
    for n in sizes:
        added, cpu, whole, first = await bench(n)
        print(
            f"{n:>9}  {added * 1e3:>12.3f} ms  {cpu * 1e3:>6.3f} ms  {whole * 1e3:>18.3f} ms  "
            f"{whole / added:>5.1f}x  {first * 1e3:>27.1f} ms"
        )


if __name__ == "__main__":
    asyncio.run(main())
