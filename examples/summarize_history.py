"""Model-written summaries, offline: a scripted completion stands in for the cheap model.

The first summary drops a tracking number, so the survival check rejects it and the strategy
falls back to truncation that keeps every durable line; later calls in the same step reuse it.

Run: python examples/summarize_history.py  (offline; the "model" is a local function)
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

import ctxmw
from ctxmw import Messages, StrategyContext

logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")


CALLS: list[dict[str, Any]] = []


async def careless_model(**kwargs: Any) -> dict[str, Any]:
    """A summariser that forgets the tracking number (a litellm-shaped response, as a dict)."""
    CALLS.append(kwargs)
    text = "DECISION: refund ORD-1042 in full\nThe parcel was lost in transit."
    return {"choices": [{"message": {"role": "assistant", "content": text}}]}


def history() -> Messages:
    msgs: Messages = [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "Sort out the lost parcel."},
        {"role": "assistant", "content": "DECISION: refund ORD-1042 in full"},
        {"role": "user", "content": "The tracking number was RA123456789DE."},
    ]
    for i in range(30):
        msgs.append({"role": "assistant", "content": f"Checked depot {i}: " + "nothing. " * 40})
        msgs.append({"role": "user", "content": "Keep looking."})
    return msgs


async def main() -> None:
    settings = ctxmw.Settings(context_window=4_000, output_reservation=500)
    ctx = StrategyContext(settings=settings, completion=careless_model)
    # Called directly to inject the completion function; the wrapper passes its own through ctx.
    prompt = await ctxmw.strategies.summarize.summarize(history(), ctx)
    ctxmw.validate(prompt)
    source = ctx.stats["summarize"]["source"]
    print(f"{len(history())} messages -> {len(prompt)}; summary source: {source}")
    print(prompt[2]["content"])
    assert "RA123456789DE" in prompt[2]["content"]

    later = [*history(), {"role": "assistant", "content": "Still looking."}]
    again = await ctxmw.strategies.summarize.summarize(later, ctx)
    assert again[: len(prompt)] == prompt  # same step: the prompt only grew at its end
    print(f"next call, same step: prefix unchanged, model asked {len(CALLS)} time(s) in all")


if __name__ == "__main__":
    anyio.run(main)
