"""Property: with read-back replies scripted at random points of generated caller behaviours,
every prompt sent keeps its tool calls and results paired, the caller's messages are never
mutated, the caller never receives a ``ctxmw_expand`` call, and a caller whose conversation is
forgotten before every call (as after a restart: only the save_file is left) is sent the same
prompts as one whose conversation is kept.

The caller does what the one of :mod:`tests.test_conversation_property` does (stateless
``acompletion`` with a save_file: tool rounds, user turns, an edited result, a restarted turn, a
provider error), and its model sometimes reads back: a reply that only reads back (answered
inside the call), a reply that reads back beside a call of the caller's tool (carried into the
next prompts), and a model that keeps reading back past the bound.
"""

from __future__ import annotations

import copy
import itertools
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxmw.context._record import handle_for
from ctxmw.context.readback import READBACK_TOOL_NAME
from ctxmw.messages.form import call_names
from ctxmw.messages.validate import scan
from ctxmw.runtime import _readback, wrapper
from ctxmw.runtime.conversations import Conversations
from ctxmw.testing import readback, text, tool_call, tool_calls
from tests.test_conversation_property import Caller

MOVES = ["tool", "tool", "user", "readback", "readback", "mixed", "mixed", "edit", "restart"]
OPS = st.lists(
    st.sampled_from([*MOVES, "fail", "storm"]),
    min_size=1,
    max_size=16,
)
CHAINS = ["default", "shorten_tools_economic"]


class ReadingCaller(Caller):
    """The caller of the conversation property, whose model sometimes reads back, and which
    checks every answer it gets."""

    async def call(self, *replies: Any) -> None:
        before, received = copy.deepcopy(self.history), len(self.history)
        await super().call(*replies)
        assert self.history[:received] == before  # ctxmw never touched the caller's list
        for message in self.history[received:]:
            assert READBACK_TOOL_NAME not in call_names(message)  # never the caller's to see
        assert self.fake.remaining == 0  # one model call per queued reply, no more

    def handle(self, step: int) -> str:
        """The handle of an earlier result (every one can be read back), or of none."""
        results = [m for m in self.history if m["role"] == "tool"]
        if not results or step % 5 == 0:
            return f"{step:016x}"  # no such result: a stable "no longer in the conversation"
        chosen = results[step % len(results)]
        return handle_for(str(chosen["tool_call_id"]), str(chosen["content"]))

    async def act(self, op: str, step: int) -> None:
        if op not in ("readback", "mixed", "storm"):
            await super().act(op, step)
            return
        self.now += 30.0
        if self.history[-1]["role"] == "assistant" and not self.history[-1].get("tool_calls"):
            self.history.append({"role": "user", "content": f"go on {step}"})
        reads = tool_calls(readback(self.handle(step), 1 + step % 3, 3 + step % 3))
        if op == "readback":
            await self.call(reads, text(f"read {step}"))
        elif op == "storm":
            await self.call(*[reads] * (_readback.READBACK_ROUNDS + 2))
        else:
            own = tool_call("read", {"n": step})
            await self.call(tool_calls(own, readback(self.handle(step), 2, 4)))
            for c in self.history[-1].get("tool_calls") or []:
                self.history.append({"role": "tool", "tool_call_id": c["id"], "content": "ok"})


async def _run(ops: list[str], chain: str, cold: bool, tmp: Path) -> list[Any]:
    """Every prompt the model got, each checked for tool pairing."""
    caller = ReadingCaller(tmp / ("cold.jsonl" if cold else "kept.jsonl"), chain, cold)
    for step, op in enumerate(ops, start=1):
        await caller.act(op, step)
    prompts = [c["messages"] for c in caller.fake.calls]
    for n, prompt in enumerate(prompts, start=1):
        assert scan(prompt).problems == [], f"prompt {n} of {len(prompts)}"
    return prompts


@pytest.mark.parametrize("chain", CHAINS)
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=OPS)
def test_read_backs_keep_every_promise_and_a_restart_sends_the_same(
    chain: str, ops: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_readback, "_warned", set())

    async def both() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            monkeypatch.setattr("ctxmw.testing._ids", itertools.count(1))  # the same call ids
            monkeypatch.setattr(wrapper, "_conversations", Conversations())
            kept = await _run(ops, chain, False, Path(tmp))
            monkeypatch.setattr("ctxmw.testing._ids", itertools.count(1))
            cold = await _run(ops, chain, True, Path(tmp))
        assert kept == cold

    anyio.run(both)
