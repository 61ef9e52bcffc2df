"""Read-back, offline: the model reads lines of a compacted result back; ctxmw answers.

The default strategy compacts old tool results behind a header that names a handle. When the
model calls ``ctxmw_expand`` with that handle, ctxmw answers it itself and calls the model
again: the caller (here a plain ``ctxmw.acompletion`` loop, as an agent framework makes) gets
the final reply only, and the save_file and the ledger hold every call. A scripted model stands
in for the real one.

Run: python examples/readback.py  (offline)
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import anyio

import ctxmw
from ctxmw.testing import FakeCompletion, handles, readback, text, tool_call, tool_calls

MODEL = "anthropic/claude-sonnet-4-5"
READ = {
    "type": "function",
    "function": {
        "name": "read_file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}
# Small tiers and no cache to protect, so that a few calls are enough to compact results.
OPTIONS = {"economic_full_tool_calls": 2, "economic_compacted_tool_calls": 4, "cache_rule": "none"}


def source(n: int) -> str:
    """A numbered file read, the way coding agents show one."""
    return "\n".join(f"{i:>6}→def step_{n}_{i}(): return {n * 100 + i}" for i in range(1, 81))


def history() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "Which step returns 361?"}]
    for n in range(1, 7):
        call = tool_call("read_file", {"path": f"step_{n}.py"}, id=f"read_{n}")
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": f"read_{n}", "content": source(n)})
    return out


def reads_lines_60_to_62(call: dict[str, Any]) -> Any:
    """The 'model' sees a compacted read of step_3.py and reads lines 60-62 of it back."""
    compacted = [m["content"] for m in call["messages"] if "step_3_1()" in str(m.get("content"))]
    shown = compacted[0].splitlines()
    print("the model sees:", shown[0], "... its last line:", shown[-1])
    return tool_calls(readback(handles(call["messages"])[2], 60, 62))


async def main() -> None:
    save_file = Path(tempfile.mkdtemp()) / "agent.jsonl"
    fake = FakeCompletion(reads_lines_60_to_62, text("step_3_61 returns 361."))
    messages = history()
    reply = await ctxmw.acompletion(
        MODEL,
        messages,
        tools=[READ],
        save_file=save_file,
        completion=fake,
        strategy_options=OPTIONS,
    )
    answer = fake.calls[1]["messages"][-1]["content"]
    print("ctxmw answered:", answer.replace("\n", " | "))
    print("the caller got:", reply.choices[0].message.content, reply.choices[0].message.tool_calls)
    print("tools sent:", [t["function"]["name"] for t in fake.calls[0]["tools"]])
    print(
        "model calls:",
        len(fake.calls),
        "- the second one's prompt is the first's plus",
        [m["role"] for m in fake.calls[1]["messages"][len(fake.calls[0]["messages"]) :]],
    )
    ledger = save_file.with_name("agent.jsonl.ledger.jsonl").read_text().splitlines()
    print("ledger, readback per call:", [json.loads(line)["readback"] for line in ledger])

    # The model reads back beside a call of the caller's own tool: the caller gets its own call
    # only, and the next prompt carries the read-back and its answer.
    later = [*messages, reply.choices[0].message.model_dump(exclude_none=True)]
    later.append({"role": "user", "content": "And step 2, line 50?"})
    handle = handles(fake.calls[1]["messages"])[1]
    both = tool_calls(tool_call("read_file", {"path": "notes.md"}), readback(handle, 50, 50))
    fake.queue(both, text("step_2_50 returns 250."))
    mixed = await ctxmw.acompletion(
        MODEL, later, tools=[READ], save_file=save_file, completion=fake, strategy_options=OPTIONS
    )
    own = mixed.choices[0].message
    print("the caller's calls:", [c.function.name for c in own.tool_calls])
    later += [own.model_dump(exclude_none=True)]
    later.append({"role": "tool", "tool_call_id": own.tool_calls[0].id, "content": "(empty)"})
    await ctxmw.acompletion(
        MODEL, later, tools=[READ], save_file=save_file, completion=fake, strategy_options=OPTIONS
    )
    sent = fake.calls[-1]["messages"]
    print("the next prompt's reply calls:", [c["function"]["name"] for c in sent[-3]["tool_calls"]])
    print("then the results:", [m["content"].split("\n")[-1] for m in sent[-2:]])
    print("ctxmw_expand in the caller's history:", "ctxmw_expand" in json.dumps(later))


if __name__ == "__main__":
    anyio.run(main)
