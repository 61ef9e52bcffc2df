"""Reversible offload, offline: a 60 kB log is sent as a preview; the model reads a slice back.

``Session(offload=True)`` sends a tool result over ``offload_threshold`` tokens (2,000 by
default) as a fixed preview plus a handle, keeps the original beside the save_file
(``agent.jsonl.offload/``), and answers the model's ``ctxmw_expand(handle, offset, limit)`` calls in
its own tool loop. A scripted model stands in for the real one. The second half shows a
stateless caller answering the same tool call with ``answer_expand``.

Run: python examples/offload_expand.py  (offline)
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import anyio

import ctxmw
from ctxmw.context.offload import EXPAND_TOOL, FileResultStore, answer_expand, store_dir
from ctxmw.testing import FakeCompletion, text, tool_calls

LOG = "".join(
    f"12:{i // 60:02d}:{i % 60:02d} worker {i % 7} {'ERROR disk full' if i == 1867 else 'ok'}\n"
    for i in range(2400)
)


def read_log() -> str:
    """Read the worker log."""
    return LOG


def handle_in(prompt: list[dict[str, Any]]) -> str:
    return str(prompt[-1]["content"]).split("[ctxmw offload ", 1)[1][:16]


def expand_around_the_error(call: dict[str, Any]) -> Any:
    """The 'model' reads 200 characters around the error, through ctxmw_expand."""
    offset = LOG.index("12:31:07") - 50
    args = {"handle": handle_in(call["messages"]), "offset": offset, "limit": 200}
    return tool_calls(("ctxmw_expand", args))


async def main() -> None:
    save_file = Path(tempfile.mkdtemp()) / "agent.jsonl"
    fake = FakeCompletion(
        tool_calls(("read_log", {})), expand_around_the_error, text("Disk full at 12:31:07.")
    )
    session = ctxmw.Session(
        "openai/gpt-4o-mini", save_file=save_file, tools=[read_log], completion=fake, offload=True
    )
    reply = await session.ask("Why did the workers stop?")
    preview = fake.calls[1]["messages"][-1]["content"]
    slice_ = fake.calls[2]["messages"][-1]["content"]
    print(f"log: {len(LOG):,} characters; the model was sent a {len(preview):,}-character preview")
    print("preview header:", preview.split("\n", 1)[0][:100], "...")
    print("ctxmw_expand answered:", slice_.split("\n", 1)[0])
    assert "ERROR disk full" in slice_
    assert session.messages[2]["content"] == LOG  # the transcript keeps the full result
    print("reply:", reply.choices[0].message.content)
    print("stored originals:", [p.name for p in store_dir(save_file).iterdir()])

    # A stateless caller (its own litellm loop): send EXPAND_TOOL with its tools, and answer
    # the model's ctxmw_expand calls with answer_expand over the store beside the save_file.
    call = {
        "id": "call_x",
        "type": "function",
        "function": {
            "name": EXPAND_TOOL["function"]["name"],
            "arguments": json.dumps(
                {"handle": handle_in(fake.calls[1]["messages"]), "offset": 0, "limit": 60}
            ),
        },
    }
    answer = await answer_expand(call, FileResultStore(store_dir(save_file)))
    print("stateless answer:", answer["content"].replace("\n", " | ")[:100])


if __name__ == "__main__":
    anyio.run(main)
