"""A per-tool compressor: old order lookups shrink to the fields the model needs.

Run: python examples/tool_compressor.py  (offline; no model is called)
"""

from __future__ import annotations

import json
from typing import Any

import anyio

import ctxmw
from ctxmw import Messages


@ctxmw.compressor("lookup_order")
def lookup_order(content: str, arguments: dict[str, Any]) -> str:
    """Keep the id and the status; the delivery history is what made the result large."""
    data = json.loads(content)
    return json.dumps({"order_id": data["order_id"], "status": data["status"]})


def history(calls: int) -> Messages:
    msgs: Messages = [{"role": "user", "content": "Check every open order."}]
    for i in range(calls):
        args = json.dumps({"order_id": f"ORD-{i}"})
        result = {"order_id": f"ORD-{i}", "status": "shipped", "events": ["scanned"] * 80}
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "lookup_order", "arguments": args},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": json.dumps(result)})
    return msgs


async def main() -> None:
    msgs = history(60)
    prompt = await ctxmw.prepare_prompt(msgs, "shorten_tools_epoch")
    ctxmw.validate(prompt)
    results = [m["content"] for m in prompt if m["role"] == "tool"]
    print("oldest result as sent:", results[0])  # compacted tier: the compressor's output
    print("newest result as sent:", results[-1][:60], "...")  # full tier: untouched
    assert results[0] == '{"order_id": "ORD-0", "status": "shipped"}'


if __name__ == "__main__":
    anyio.run(main)
