"""Property: a long-lived conversation gives, byte for byte, what a fresh one gives.

Two callers do the same things to their histories (append turns and long tool results, edit an
earlier result, drop the tail and restart, meet a provider error) and call ``ctxmw.acompletion``
with the same answers queued and the same clock. One keeps its conversation in the registry
between calls (its memo, History, recorder and record go on); the other's registry is emptied
before every call (each call starts cold, as after the registry forgot it). Every prompt the
model gets is the same, and so is the save_file they leave.

The calls come 30 seconds apart. A longer gap is the one thing a conversation knows that its
messages do not say: ``shorten_tools_economic`` remembers the call points whose cache had gone
cold and moved its boundary there, and a forgotten conversation has lost that (the Strategies
guide says so); :func:`test_a_forgotten_conversation_has_lost_its_cold_points` pins it.
"""

from __future__ import annotations

import contextlib
import itertools
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxmw
from ctxmw.messages.normal import normal_message
from ctxmw.runtime import wrapper
from ctxmw.runtime.conversations import Conversations
from ctxmw.runtime.transcript import TranscriptFile
from ctxmw.testing import FakeCompletion, text, tool_calls

MODEL = "anthropic/claude-sonnet-4-5"
TOOL = {
    "type": "function",
    "function": {
        "name": "read",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
    },
}
OPS = st.lists(
    st.sampled_from(["tool", "tool", "tool", "user", "edit", "restart", "fail"]),
    min_size=1,
    max_size=24,
)
CHAINS = ["default", "shorten_tools_epoch", "clear_tool_results,cache_breakpoints"]
SMALL = {  # every tier reached within a few calls
    "epoch_size": 3,
    "epoch_tool_call_threshold": 3,
    "epoch_full_tool_calls": 2,
    "epoch_compacted_tool_calls": 3,
    "economic_full_tool_calls": 2,
    "economic_compacted_tool_calls": 3,
    "clear_tool_results_keep": 2,
    "clear_tool_results_trigger": 1_000,
    "alerts": False,
}


class Caller:
    """A framework that owns its history and calls ctxmw statelessly, with a save_file."""

    def __init__(self, save_file: Path, chain: str, cold: bool) -> None:
        self.save_file, self.chain, self.cold = save_file, chain, cold
        self.fake = FakeCompletion()
        self.history: list[dict[str, Any]] = [
            {"role": "system", "content": "You read files."},
            {"role": "user", "content": "start"},
        ]
        self.now = 1_000.0

    async def call(self, *replies: Any) -> None:
        """One call of the caller; ``replies`` are the model's, one per model call it makes."""
        if self.cold:
            wrapper._conversations = Conversations()
        self.fake.queue(*replies)
        with contextlib.suppress(ConnectionError):
            response = await ctxmw.acompletion(
                MODEL,
                self.history,
                tools=[TOOL],
                save_file=self.save_file,
                completion=self.fake,
                prompt_strategies=None if self.chain == "default" else self.chain,
                clock=lambda: self.now,
                strategy_options=SMALL,
            )
            message = response.choices[0].message.model_dump()
            self.history.append({k: v for k, v in message.items() if v is not None})

    async def act(self, op: str, step: int) -> None:
        self.now += 30.0
        if op == "wait":
            self.now += 3_600.0  # past every cache's time to live
        elif op == "edit":
            results = [i for i, m in enumerate(self.history) if m["role"] == "tool"]
            if results:
                i = results[step % len(results)]
                self.history[i] = {**self.history[i], "content": f"edited {step}"}
        elif op == "restart":
            users = [i for i, m in enumerate(self.history) if m["role"] == "user"]
            self.history = self.history[: users[step % len(users)] + 1]
        if self.history[-1]["role"] == "assistant" and not self.history[-1].get("tool_calls"):
            self.history.append({"role": "user", "content": f"go on {step}"})
        if op == "fail":
            await self.call(ConnectionError("provider down"))
        elif op == "tool":
            await self.call(tool_calls(("read", {"n": step})))
            for c in self.history[-1].get("tool_calls") or []:
                body = "\n".join(f"line {step}.{k}: " + "x" * 60 for k in range(60))
                self.history.append({"role": "tool", "tool_call_id": c["id"], "content": body})
        else:
            await self.call(text(f"answer {step}"))


async def _run(ops: list[str], chain: str, cold: bool, tmp: Path) -> tuple[Any, Any]:
    """Every prompt the model got, and every revision of the save_file."""
    caller = Caller(tmp / ("cold.jsonl" if cold else "kept.jsonl"), chain, cold)
    for step, op in enumerate(ops, start=1):
        await caller.act(op, step)
    saved = await TranscriptFile(caller.save_file).revisions()
    every = [[normal_message(m) for m in r] for r in [*saved.earlier, saved.current]]
    return [c["messages"] for c in caller.fake.calls], every


@pytest.mark.parametrize("chain", CHAINS)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=OPS)
def test_a_long_lived_conversation_gives_what_a_fresh_one_gives(
    chain: str, ops: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def both() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            monkeypatch.setattr("ctxmw.testing._ids", itertools.count(1))  # the same tool-call ids
            wrapper._conversations = Conversations()
            kept = await _run(ops, chain, False, Path(tmp))
            monkeypatch.setattr("ctxmw.testing._ids", itertools.count(1))
            cold = await _run(ops, chain, True, Path(tmp))
        assert kept[0] == cold[0]  # every prompt
        assert kept[1] == cold[1]  # every revision of the save_file

    anyio.run(both)


def test_the_kept_conversation_is_the_registrys_own_object(tmp_path: Path) -> None:
    """Guard against a vacuous property: the kept caller's calls really share one conversation
    (its memo and record go on), the cold caller's do not."""

    async def run() -> None:
        wrapper._conversations = Conversations()
        caller = Caller(tmp_path / "a.jsonl", "default", cold=False)
        await caller.act("tool", 1)
        first = wrapper._conversations.values()[0]
        record = first.record
        await caller.act("tool", 2)
        assert wrapper._conversations.values() == [first]
        assert first.record is record
        assert record.loaded
        assert any(k.startswith("history:") for k in first.memo)

    anyio.run(run)


def test_a_forgotten_conversation_has_lost_its_cold_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an hour's gap the kept conversation moves the boundary at once (the cache is cold
    anyway); one forgotten before that call cannot know the gap and keeps its prefix."""

    async def prompts(cold: bool) -> Any:
        monkeypatch.setattr("ctxmw.testing._ids", itertools.count(1))
        wrapper._conversations = Conversations()
        return (await _run(["tool", "tool", "tool", "wait"], "default", cold, tmp_path))[0]

    kept, cold = anyio.run(prompts, False), anyio.run(prompts, True)
    assert kept[:-1] == cold[:-1]
    assert kept[-1] != cold[-1]
