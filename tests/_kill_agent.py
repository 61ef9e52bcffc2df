"""A 50-round tool loop for the kill-safety test; runs in a subprocess, never imports litellm.

Usage: ``python _kill_agent.py SAVE_FILE DELAY_SECONDS``. Prints ``started`` once the session
exists; each model call sleeps ``DELAY_SECONDS``. Every round calls ``echo`` twice.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import anyio

from ctxmw import Session

ROUNDS = 50


def echo(text: str, times: int = 40) -> str:
    """Repeat a text.

    Args:
        text: what to repeat.
        times: how often.
    """
    return text * times


class Scripted:
    """A completion function that answers without litellm: 49 tool rounds, then text."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.n = 0

    async def __call__(self, **kwargs: Any) -> Any:
        self.n += 1
        await anyio.sleep(self.delay)
        if self.n < ROUNDS:
            calls = [_call(f"r{self.n}a", "alpha"), _call(f"r{self.n}b", "beta")]
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": calls}
        else:
            message = {"role": "assistant", "content": "done"}
        return SimpleNamespace(choices=[SimpleNamespace(message=message)])


def _call(call_id: str, text: str) -> dict[str, Any]:
    args = f'{{"text": "{text}-{call_id}"}}'
    return {"id": call_id, "type": "function", "function": {"name": "echo", "arguments": args}}


async def run(save_file: str, delay: float) -> None:
    session = Session(
        "fake/model",
        save_file=save_file,
        tools=[echo],
        completion=Scripted(delay),
        prompt_strategies="none",
        max_rounds=ROUNDS,
        # The ledger is another file; keeping litellm (seconds to import) out keeps trials short.
        strategy_options={"telemetry": False},
    )
    print("started", flush=True)
    await session.ask("go")


if __name__ == "__main__":
    anyio.run(run, sys.argv[1], float(sys.argv[2]))
