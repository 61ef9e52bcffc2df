"""The tool-agent transcript the per-call benchmarks grow: one call, its result, a short note."""

from __future__ import annotations

import json
from typing import Any

HEAD: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the failing test."},
]


def round_of(k: int, lines: int = 12, id_prefix: str = "call_") -> list[dict[str, Any]]:
    """One tool round: an assistant call, its result (``lines`` lines of code), a short note."""
    call = {
        "id": f"{id_prefix}{k}",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/f{k}.py"})},
    }
    body = "".join(f"line {i} of file {k}: some code here\n" for i in range(lines))
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"{id_prefix}{k}", "content": body},
        {"role": "assistant", "content": f"Read f{k}; moving on."},
    ]


def transcript(
    n: int, lines: int = 12, head: list[dict[str, Any]] = HEAD, id_prefix: str = "call_"
) -> list[dict[str, Any]]:
    """``head``, then whole rounds until there are at least ``n`` messages."""
    messages = [dict(m) for m in head]
    k = 0
    while len(messages) < n:
        messages += round_of(k, lines, id_prefix)
        k += 1
    return messages
