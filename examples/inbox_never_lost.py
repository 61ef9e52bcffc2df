"""An inbox note survives a failed model call, and the save_file a full disk, offline.

Run with ``python examples/inbox_never_lost.py``; it needs no network and no API key.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio

import ctxmw
from ctxmw.testing import FakeCompletion, text

MODEL = "openai/gpt-4o-mini"


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        save_file = Path(tmp) / "agent.jsonl"
        await ctxmw.inbox.deliver(save_file, "Also check the nightly logs.")
        history = [{"role": "user", "content": "Status?"}]

        # The provider fails on the call that carried the note: the note goes back.
        down = FakeCompletion(ConnectionError("provider down"))
        try:
            await ctxmw.acompletion(MODEL, history, save_file=save_file, completion=down)
        except ConnectionError as exc:
            print("First call failed:", exc)
        waiting = [e.name for e in await ctxmw.inbox.list_inbox(save_file) if not e.delivered]
        print("Notes back in the inbox:", len(waiting))

        # The next call (in this process or another) delivers it, in its place.
        up = FakeCompletion(text("All green; the nightly logs are clean."))
        await ctxmw.acompletion(MODEL, history, save_file=save_file, completion=up)
        print("The retried call's last message:", up.prompts[0][-1]["content"])

        # Once the round is saved, the note is in the removed folder (owner-only).
        entries = await ctxmw.inbox.list_inbox(save_file)
        print("Delivered notes on record:", sum(e.delivered for e in entries))


anyio.run(main)
