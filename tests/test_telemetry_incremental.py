"""The incremental telemetry (identity against the previous call) equals a from-scratch one.

Property: over generated call sequences (a transcript that grows, strategies that pass messages
on, rebuild equal copies, reorder keys, edit, drop, insert, mark; a tools list that changes;
summary side calls; the same list sent twice), a recorder given the very dicts of each call
writes exactly the records of a from-scratch recorder: given deep copies of everything (no
object it has seen before) and digesting every message of every list anew.
"""

from __future__ import annotations

import copy
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmw.history import DigestSlots, SlotView
from ctxmw.settings import Settings
from ctxmw.telemetry import ApproxCounter, CallRecorder
from ctxmw.telemetry.marks import with_mark

MODEL = "openai/gpt-4o-mini"
TOOLS_A = [{"type": "function", "function": {"name": "read", "parameters": {}}}]
TOOLS_B = [*TOOLS_A, {"type": "function", "function": {"name": "write", "parameters": {}}}]

OPS = ("grow", "tool", "rebuild", "reorder", "edit", "drop", "insert", "mark", "tools", "same")
Call = tuple[str, int, bool]  # operation, position seed, a summary side call after it


def _apply(op: str, seed: int, transcript: list[Any], prompt: list[Any], k: int) -> list[Any]:
    """The next prompt: the transcript's messages, then one strategy-like change."""
    prompt = [*transcript[: len(prompt)], *transcript[len(prompt) :]] if op != "same" else prompt
    i = seed % len(prompt)
    if op == "rebuild":
        prompt[i] = dict(prompt[i])
    elif op == "reorder":
        prompt[i] = dict(reversed(list(prompt[i].items())))
    elif op == "edit":
        prompt[i] = {**prompt[i], "content": f"edited {k}"}
    elif op == "drop" and len(prompt) > 2:
        del prompt[i]
    elif op == "insert":
        prompt.insert(i, {"role": "user", "content": f"note {k}"})
    elif op == "mark":
        prompt[i] = with_mark(prompt[i], "5m")
    return prompt


def _grow(op: str, transcript: list[Any], k: int) -> list[Any]:
    if op == "tool":
        call = {"id": f"c{k}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        return [
            *transcript,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": f"result {k} " * 5},
        ]
    return [
        *transcript,
        {"role": "assistant", "content": f"answer {k}"},
        {"role": "user", "content": f"question {k}"},
    ]


class _Scratch(DigestSlots):
    """Digests every list from nothing: no slot, no reuse."""

    def digests(self, slot: str, messages: Any) -> SlotView:
        return DigestSlots().digests(slot, messages)


def _from_scratch() -> CallRecorder:
    recorder = CallRecorder("s", settings=Settings(), token_counter=ApproxCounter())
    recorder._digests = recorder._tracker._digests = _Scratch()  # the reference: no reuse
    return recorder


async def _record(
    recorder: CallRecorder, prompt: list[Any], transcript: list[Any], tools: Any, k: int, kind: str
) -> dict[str, Any]:
    trace = [("pass", transcript), ("change", prompt)]
    record = await recorder.record(
        model=MODEL,
        wire_kwargs={"model": MODEL, "messages": prompt, "tools": tools},
        transcript=transcript,
        trace=trace if kind == "agent" else None,
        response=None,
        round=k,
        kind=kind,
    )
    data = record.to_dict()
    del data["ts"], data["latency_s"]
    return data


async def _both(calls: list[Call]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    fast = CallRecorder("s", settings=Settings(), token_counter=ApproxCounter())
    slow = _from_scratch()
    transcript: list[Any] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Start."},
    ]
    prompt: list[Any] = list(transcript)
    tools: Any = TOOLS_A
    got, want = [], []
    for k, (op, seed, side) in enumerate(calls):
        transcript = _grow(op, transcript, k) if op in ("grow", "tool") else transcript
        tools = (TOOLS_B if tools is TOOLS_A else TOOLS_A) if op == "tools" else tools
        prompt = _apply(op, seed, transcript, prompt, k)
        for kind in ("agent", "summary") if side else ("agent",):
            sent = prompt if kind == "agent" else [*prompt[:2], {"role": "user", "content": "?"}]
            got.append(await _record(fast, sent, transcript, tools, k, kind))
            twin = copy.deepcopy((sent, transcript, tools))
            want.append(await _record(slow, twin[0], twin[1], twin[2], k, kind))
    assert fast.export_state() == slow.export_state()
    return got, want


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(OPS), st.integers(0, 1_000), st.booleans()),
        min_size=1,
        max_size=25,
    )
)
def test_incremental_records_equal_the_from_scratch_ones(calls: list[Call]) -> None:
    got, want = anyio.run(_both, calls)
    assert got == want


def test_a_long_payload_whose_messages_move_equals_from_scratch() -> None:
    """A long payload, then a message dropped and one inserted near its start (every later
    message moves: they are found again by identity, not digested anew), then growth."""
    steps: list[Call] = [("drop", 3, False), ("insert", 5, True), ("rebuild", 7, False)]
    calls: list[Call] = [("grow", 0, False)] * 40 + steps + [("grow", 0, True)]
    got, want = anyio.run(_both, calls)
    assert got == want
