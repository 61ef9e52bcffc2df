"""ctxmw for synchronous code, offline: ``ctxmw.completion`` and a sync agent loop through
``patch_litellm``.

Run it with ``python examples/sync_completion.py``. Three ways in:

1. ``ctxmw.completion(...)``: the sync twin of ``ctxmw.acompletion`` (same arguments, Python
   tools included), here against the shipped fake model;
2. a synchronous agent loop that calls ``litellm.completion`` itself (as mini-swe-agent,
   smolagents and agno's ``Agent.run`` do), routed through ctxmw by ``ctxmw.patch_litellm()``,
   whose ``completion=`` puts the scripted model where the provider would be: 60 tool calls with
   4 KB results;
3. the same sync call made from inside a running event loop (a sync tool of an async agent):
   it runs on ctxmw's own loop thread, so it neither nests loops nor blocks forever.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import anyio

import ctxmw  # before litellm's users: it keeps litellm offline (no remote cost-map fetch)

# isort: split
import litellm

from ctxmw.runtime.transcript import TranscriptFile
from ctxmw.testing import FakeCompletion, text, tool_calls

ROUNDS = 60
READ_LOG = {
    "type": "function",
    "function": {
        "name": "read_log",
        "description": "Read a log file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}


def stock(item: str) -> int:
    """How many of an item are in stock.

    Args:
        item: the product name, lower case.
    """
    return {"apples": 12, "pears": 7}.get(item, 0)


def read_log(round_: int) -> str:
    """A 4 KB log, different each round."""
    line = f"{round_:03d} worker ok, queue depth {round_ * 7 % 13}, latency 12ms\n"
    return (line * (4096 // len(line) + 1))[:4096]


def with_python_tools(save_file: Path) -> None:
    fake = FakeCompletion(tool_calls(("stock", {"item": "apples"})), text("12 apples."))
    reply = ctxmw.completion(
        "openai/gpt-4o",
        [{"role": "user", "content": "How many apples?"}],
        tools=[stock],
        save_file=str(save_file),
        completion=fake,
    )
    print(f"ctxmw.completion: {reply.choices[0].message.content} model calls: {len(fake.calls)}")


def sync_agent(save_file: Path) -> list[dict[str, Any]]:
    """A plain synchronous tool loop over ``litellm.completion``; returns its history."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find the error in the logs."}]
    # The scripted model reports no cache: its cache alerts would only be noise here.
    options = {"ctxmw": {"save_file": str(save_file), "settings": {"alerts": False}}}
    for round_ in range(ROUNDS + 1):
        response = litellm.completion(
            model="openai/gpt-4o", messages=messages, tools=[READ_LOG], metadata=options
        )
        message = response.choices[0].message.model_dump(exclude_none=True)
        messages.append(message)
        for call in message.get("tool_calls") or []:
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": read_log(round_)}
            )
        if not message.get("tool_calls"):
            break
    return messages


def through_the_patch(save_file: Path) -> None:
    reads = [tool_calls(("read_log", {"path": f"/var/log/w{n}.log"})) for n in range(ROUNDS)]
    model = FakeCompletion(*reads, text("A worker restarted; no data lost."))
    with ctxmw.patch_litellm(completion=model):  # delete completion= to call the provider
        history = sync_agent(save_file)
    sent, had = len(json.dumps(model.prompts[-1])), len(json.dumps(history[:-1]))
    valid = all(_valid(prompt) for prompt in model.prompts)
    print(f"sync agent: {len(model.calls)} model calls, every prompt valid: {valid}")
    print(f"last prompt: {sent:,} characters sent, history {had:,}: {1 - sent / had:.0%} fewer")
    revisions = anyio.run(TranscriptFile(save_file).revisions)
    ledger = save_file.with_name(f"{save_file.name}.ledger.jsonl").read_text().splitlines()
    print(f"one transcript: {len(revisions.current)} messages; ledger: {len(ledger)} calls")


def _valid(prompt: list[dict[str, Any]]) -> bool:
    try:
        ctxmw.validate(prompt)
    except ctxmw.InvalidTranscriptError:
        return False
    return True


def inside_a_running_loop(save_file: Path) -> None:
    async def async_agent() -> str:
        # A sync tool of an async agent: this thread runs the agent's event loop.
        reply = ctxmw.completion(
            "openai/gpt-4o",
            [{"role": "user", "content": "Summarise the incident."}],
            save_file=str(save_file),
            completion=FakeCompletion(text("A worker restarted; no data lost.")),
        )
        return str(reply.choices[0].message.content)

    print(f"from inside a running loop: {asyncio.run(async_agent())}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with_python_tools(folder / "shop.jsonl")
        through_the_patch(folder / "agent.jsonl")
        inside_a_running_loop(folder / "incident.jsonl")
