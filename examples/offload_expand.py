"""Reversible offload, offline: a 60 kB log is sent as a preview; the model reads a slice back.

``Session(offload=True)`` sends a tool result over ``offload_threshold`` tokens (2,000 by
default) as a fixed preview plus a handle, keeps the original beside the save_file
(``agent.jsonl.offload/``), and answers the model's ``ctxmw_expand`` calls itself (by ``offset``
and ``limit``, or by lines). A scripted model stands in for the real one. The second half shows a
stateless caller (``ctxmw.acompletion``, its own loop): ctxmw answers the read-back inside the
call, and the caller only ever sees the final reply.

Run: python examples/offload_expand.py  (offline)
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio

import ctxmw
from ctxmw.context.offload import store_dir
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

    # A stateless caller (its own litellm loop) with the same save_file: the model reads
    # characters 0-60 back; ctxmw answers and calls the model again within the call.
    history = [*session.messages, {"role": "user", "content": "What does the log start with?"}]
    again = FakeCompletion(
        lambda call: tool_calls(
            ("ctxmw_expand", {"handle": handle_in(call["messages"][:3]), "offset": 0, "limit": 60})
        ),
        text("It starts at 12:00:00."),
    )
    reply = await ctxmw.acompletion(
        "openai/gpt-4o-mini",
        history,
        save_file=save_file,
        completion=again,
        prompt_strategies="offload",
        tools=[{"type": "function", "function": {"name": "read_log", "parameters": {}}}],
    )
    answered = again.calls[1]["messages"][-1]["content"]
    print("stateless caller got:", reply.choices[0].message.content)
    print("ctxmw answered:", answered.replace("\n", " | ")[:100])
    assert reply.choices[0].message.tool_calls is None


if __name__ == "__main__":
    anyio.run(main)
