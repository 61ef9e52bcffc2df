"""ctxmw's per-call CPU by layer, beside litellm's own client CPU: how far the 0.10x goal is.

Run: ``.venv/bin/python benchmarks/bench_call_layers.py [--calls 40] [--sizes 2000,10000]``.

The same calls as ``bench_overhead.py`` part 1 (a tool-agent transcript, one round added per
call, the instant fake, a save_file), on both paths, under four setups, each in one run beside
litellm's own client work on the very prompts ctxmw sent:

* ``floor``: no strategy (``prompt_strategies="none"``) and no telemetry (``telemetry=False``):
  what every call pays to line the caller's messages up with the save_file, take its lock, run
  the turn and commit the round;
* ``+ telemetry``: the same with the telemetry on (the prefix estimate, usage, cost, alerts,
  the ledger line);
* ``+ strategies``: the default strategy list, telemetry off;
* ``default``: both, what a call costs out of the box.

Each row prints ctxmw's process CPU per call without the durable append (the write and fsync,
timed on its own) and its ratio to litellm's process CPU for the same prompts (median of the
warm calls). The goal is at most 0.10x at 2,000 and 10,000 messages on both paths; the floor row
says how much of that the work no option turns off already takes.

Two more columns: litellm's process CPU on the caller's whole history (what the call would have
sent without ctxmw), and the client's CPU with ctxmw (ctxmw's, then litellm's on the shortened
prompt) over that: below 1.0x, the strategies save litellm more work than ctxmw adds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench_overhead import (
    AppendClock,
    TelemetryClock,
    Timing,
    Trips,
    litellm_call,
    session_path,
    stateless,
    timed,
)

SETUPS: dict[str, dict[str, Any]] = {
    "floor": {"prompt_strategies": "none", "settings": {"telemetry": False}},
    "+ telemetry": {"prompt_strategies": "none", "settings": {"telemetry": True}},
    "+ strategies": {"settings": {"telemetry": False}},
    "default": {"settings": {"telemetry": True}},
}


class Layers(Timing):
    """A :class:`Timing` that also times litellm on the caller's whole history of each call."""

    def __init__(self) -> None:
        super().__init__()
        self.unshortened: list[float] = []

    async def litellm(self) -> Layers:
        await super().litellm()
        for prompt in self.whole:
            self.unshortened.append((await timed(lambda p=prompt: litellm_call(p)))[2])
        return self


async def main(sizes: list[int], calls: int) -> None:
    TelemetryClock.install()
    Trips.install()
    AppendClock.install()
    await litellm_call([{"role": "user", "content": "warm-up"}])
    print(
        f"per call, median of {calls} warm calls: ctxmw's process CPU without the append, "
        "litellm's process CPU on the same prompts, the ratio (goal <= 0.10x)"
    )
    print(
        f"{'messages':>8} {'path':>9} {'setup':>13} | {'ctxmw':>8} {'litellm':>8} | {'ratio':>6} |"
        f" {'litellm on the whole history':>28} | {'with ctxmw/without':>18}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            for name, path in (("stateless", stateless), ("session", session_path)):
                for setup, options in SETUPS.items():
                    timing = await path(n, calls, Path(tmp), options, Layers())
                    assert isinstance(timing, Layers)
                    own = timing.without_append()[0]
                    litellm = timing.medians()[1][2]
                    whole = statistics.median(timing.unshortened)
                    print(
                        f"{n:>8} {name:>9} {setup:>13} | {own * 1e3:>5.2f} ms {litellm * 1e3:>5.2f}"
                        f" ms | {own / litellm:.3f}x | {whole * 1e3:>25.2f} ms |"
                        f" {(own + litellm) / whole:>17.2f}x",
                        flush=True,
                    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--sizes", default="2000,10000")
    args = parser.parse_args()
    asyncio.run(main([int(s) for s in args.sizes.split(",")], args.calls))
