"""Talk to an agent through its inbox, offline: deliver a message, then stop it with ``abort``.

Run with ``python examples/inbox_abort.py``; it needs no network and no API key.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio

import ctxmw


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        save_file = Path(tmp) / "agent.jsonl"
        history = [{"role": "user", "content": "Summarise the logs."}]

        # Another process (or `ctxmw inbox send agent.jsonl "..."`) drops a message.
        await ctxmw.inbox.deliver(save_file, "Focus on the errors from last night.")
        prompt = await ctxmw.prepare_prompt(history, "inbox", save_file=save_file)
        print("The model's last message:", prompt[-1])

        # Delivered once: the next prompt no longer carries it.
        again = await ctxmw.prepare_prompt(history, "inbox", save_file=save_file)
        print("Messages on the next call:", len(again))

        # An operator stops the run (or `ctxmw inbox abort agent.jsonl "..."`).
        await ctxmw.inbox.abort(save_file, "Budget reached, stop now.")
        try:
            await ctxmw.prepare_prompt(history, "inbox", save_file=save_file)
        except ctxmw.Aborted as stop:
            print(f"Aborted: {stop.reason}")


if __name__ == "__main__":
    anyio.run(main)
