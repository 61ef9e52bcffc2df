"""Property: whatever a stateless caller does to its history, the model gets exactly that history.

Random edit sequences (append, re-send in a framework's spelling, drop tool items, restart a turn
after a provider error, move the system prompt) run through ``ctxmw.acompletion`` with strategy
``none``. Every prompt is the caller's history, every prompt validates, and the save_file holds
every state the conversation went through, the current one last.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxmw
from ctxmw.messages.normal import normal_message
from ctxmw.runtime.transcript import TranscriptFile
from ctxmw.testing import FakeCompletion, text, tool_calls

MODEL = "openai/gpt-4o-mini"
TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
    },
}
OPS = st.sampled_from(["user", "respell", "drop_tools", "restart", "system"])


def respelled(message: dict[str, Any]) -> dict[str, Any]:
    if message.get("role") != "assistant":
        return message
    out = {"role": "assistant", "content": message.get("content") or None}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": dict(c["function"])}
            for c in message["tool_calls"]
        ]
    return out


def without_tools(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in history if m.get("role") != "tool" and not m.get("tool_calls")]


def as_dict(message: Any) -> dict[str, Any]:
    return {k: v for k, v in message.model_dump().items() if v is not None}


def normal(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [normal_message(m) for m in messages]


class Caller:
    """A framework: owns the history, runs the tools itself, calls ctxmw statelessly."""

    def __init__(self, save_file: Path, use_tools: list[bool]) -> None:
        self.save_file = save_file
        self.fake = FakeCompletion()
        self.history: list[dict[str, Any]] = [
            {"role": "system", "content": "v0"},
            {"role": "user", "content": "start"},
        ]
        self.sent: list[list[dict[str, Any]]] = []
        self.states: list[list[dict[str, Any]]] = []
        self._tools = iter(use_tools)
        self._n = 0

    async def call(self) -> None:
        self._n += 1
        if next(self._tools, False):
            response = tool_calls(("add", {"a": self._n}))
            response.choices[0].message.content = ""  # llama.cpp's habit beside tool calls
            self.fake.queue(response)
        else:
            self.fake.queue(text(f"answer {self._n}"))
        self.sent.append(list(self.history))
        reply = await ctxmw.acompletion(
            MODEL,
            self.history,
            tools=[TOOL],
            save_file=self.save_file,
            completion=self.fake,
            prompt_strategies="none",
        )
        message = as_dict(reply.choices[0].message)
        self.history = [*self.history, message]
        self.states.append(list(self.history))
        for c in message.get("tool_calls") or []:
            self.history.append({"role": "tool", "tool_call_id": c["id"], "content": "1"})

    async def apply(self, op: str, step: int) -> None:
        if op == "user":
            self.history.append({"role": "user", "content": f"more {step}"})
        elif op == "respell":
            self.history = [respelled(m) for m in self.history]
        elif op == "drop_tools":
            self.history = without_tools(self.history)
        elif op == "system":
            self.history[0] = {"role": "system", "content": f"v{step}"}
        elif op == "restart":
            await self._fail_then_restart()
        if self.history[-1].get("role") == "assistant":
            self.history.append({"role": "user", "content": f"go {step}"})
        await self.call()

    async def _fail_then_restart(self) -> None:
        before = list(self.history)
        self.fake.queue(ConnectionError("provider down"))
        self.sent.append(list(self.history))
        with contextlib.suppress(ConnectionError):
            await ctxmw.acompletion(
                MODEL,
                self.history,
                tools=[TOOL],
                save_file=self.save_file,
                completion=self.fake,
                prompt_strategies="none",
            )
        # The framework restarts the turn from its last user message.
        last_user = max(i for i, m in enumerate(before) if m.get("role") == "user")
        self.history = before[: last_user + 1]


async def run_sequence(ops: list[str], use_tools: list[bool]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        caller = Caller(Path(tmp) / "agent.jsonl", use_tools)
        await caller.call()
        for step, op in enumerate(ops, start=1):
            await caller.apply(op, step)
            current = await TranscriptFile(caller.save_file).load()
            assert normal(current) == normal(caller.states[-1])
        assert caller.fake.prompts == caller.sent
        for prompt in caller.fake.prompts:
            ctxmw.validate(prompt)
        revisions = await TranscriptFile(caller.save_file).revisions()
        every = [normal(r) for r in [*revisions.earlier, revisions.current]]
        at = 0
        for state in map(normal, caller.states):
            while every[at][: len(state)] != state:
                at += 1  # raises IndexError if some state is not in the record
        assert every[-1] == normal(caller.states[-1])


@settings(max_examples=25, deadline=None)
@given(ops=st.lists(OPS, max_size=8), use_tools=st.lists(st.booleans(), max_size=20))
def test_the_model_gets_exactly_the_callers_history(ops: list[str], use_tools: list[bool]) -> None:
    anyio.run(run_sequence, ops, use_tools)
