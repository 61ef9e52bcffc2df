"""Recover from a provider error: the failed turn's input waits in the session, run() sends it.

A rate limit on the first model call of a turn writes nothing to the transcript (no dangling user
message), and the input is not lost either: ``session.pending_input`` holds it and
``session.run()`` sends it. Runs offline: the scripted FakeCompletion stands in for the model.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio

import ctxmw  # before litellm: ctxmw keeps litellm's cost map local (no network)
from ctxmw.testing import FakeCompletion, text


async def main() -> None:
    import litellm  # imported after ctxmw (see above)

    limited = litellm.RateLimitError(message="slow down", llm_provider="openai", model="gpt-4o")
    fake = FakeCompletion(limited, text("Paris."))
    with tempfile.TemporaryDirectory() as tmp:
        save_file = Path(tmp) / "agent.jsonl"
        session = ctxmw.Session("openai/gpt-4o-mini", save_file=save_file, completion=fake)
        try:
            await session.ask("What is the capital of France?")
        except litellm.RateLimitError as exc:  # litellm's own error, unwrapped
            print(f"provider said: {exc.message}")
        print(f"saved so far: {len(session.messages)} messages")
        print(f"waiting to be sent: {session.pending_input[0]['content']!r}")
        # A real agent would back off here before trying again.
        reply = await session.run()  # no arguments: continue with the waiting input
        print(f"answer: {reply.choices[0].message.content}")
        print(f"saved now: {[m['role'] for m in session.messages]}")
        print(f"model calls: {len(fake.calls)}; the retry sent {fake.calls[1]['messages']}")


anyio.run(main)
