"""A deterministic synthetic agent session: tool rounds, long and short outputs, user turns."""

from __future__ import annotations

import json
from typing import Any

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file and return its text.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "note": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


def session(rounds: int, seed: int = 7) -> tuple[list[dict[str, Any]], list[int]]:
    """The transcript of ``rounds`` model calls and each call point (its length before the call).

    Every round is one model call: most ask for 1-3 tool calls (unique arguments, no repeats),
    every 25th answers in text and the user follows up.
    """
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent. " * 8},
        {"role": "user", "content": "Audit the repository and report every TODO."},
    ]
    points: list[int] = []
    call = 0
    for r in range(rounds):
        points.append(len(messages))
        if r % 25 == 24:
            messages.append({"role": "assistant", "content": f"Progress report {r}: all fine."})
            messages.append({"role": "user", "content": f"Continue with part {r // 25 + 2}."})
            continue
        calls = []
        for _ in range(1 + (r * seed) % 3):
            call += 1
            args = {"path": f"src/module_{call}.py", "note": "x" * ((call * 37) % 300)}
            calls.append(
                {
                    "id": f"call_{call}",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps(args)},
                }
            )
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        for tc in calls:
            size = 50 + (int(tc["id"].split("_")[1]) * 131) % 1500
            text = f"# {tc['id']}\n" + "".join(f"line {i}: value\n" for i in range(size // 14))
            messages.append({"role": "tool", "tool_call_id": tc["id"], "content": text})
    return messages, points
