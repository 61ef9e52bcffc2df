"""A custom prompt strategy, registered by name and chained after the default shortening.

Run: python examples/custom_strategy.py  (offline; no model is called)
"""

from __future__ import annotations

import json
import re

import anyio

import ctxmw
from ctxmw import Messages, StrategyContext

SECRET = re.compile(r"sk-[A-Za-z0-9]{16,}")


@ctxmw.register_strategy("redact_secrets")
def redact_secrets(messages: Messages, ctx: StrategyContext) -> Messages:
    """Hide API keys in tool results from the model (the transcript keeps them)."""
    out = []
    for msg in messages:
        content = msg.get("content")
        if msg.get("role") == "tool" and isinstance(content, str) and SECRET.search(content):
            # A changed message is a new dict; the caller's dicts are never mutated.
            msg = {**msg, "content": SECRET.sub("[secret]", content)}
        out.append(msg)
    return out


def agent_history(calls: int) -> Messages:
    """A long tool-using session: `calls` reads of a file whose content is long."""
    history: Messages = [{"role": "user", "content": "Audit the config files."}]
    for i in range(calls):
        call_id = f"call_{i}"
        args = json.dumps({"path": f"conf/{i}.env"})
        history.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "read", "arguments": args},
                    }
                ],
            }
        )
        history.append(
            {"role": "tool", "tool_call_id": call_id, "content": f"KEY=sk-{i:024d}\n" * 30}
        )
    return history


async def main() -> None:
    history = agent_history(120)
    prompt = await ctxmw.prepare_prompt(
        history, ["shorten_tools_epoch_increment", "redact_secrets"]
    )
    ctxmw.validate(prompt)
    sent = sum(len(json.dumps(m)) for m in prompt)
    kept = sum(len(json.dumps(m)) for m in history)
    assert not any(SECRET.search(str(m.get("content"))) for m in prompt)
    print(f"transcript: {len(history)} messages, {kept:,} chars")
    print(f"prompt:     {len(prompt)} messages, {sent:,} chars ({sent / kept:.0%}), no secrets")


if __name__ == "__main__":
    anyio.run(main)
