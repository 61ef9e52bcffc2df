"""What a CallRecorder holds between calls: the last call's lists, never earlier calls' copies."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from ctxmw.telemetry import ApproxCounter, CallRecorder

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"


class _Msg(dict[str, Any]):
    """A message dict that can be weakly referenced (to see whether anything still holds it)."""


async def _record(recorder: CallRecorder, payload: list[Any], transcript: list[Any]) -> None:
    await recorder.record(
        model=MODEL,
        wire_kwargs={"model": MODEL, "messages": payload},
        transcript=transcript,
        trace=[("rebuild", payload)],
        response=None,
    )


async def test_the_recorder_lets_go_of_the_copies_an_earlier_call_sent() -> None:
    """A strategy that rebuilds every message each call: after the call, only the last
    payload's copies may stay alive (the old identity cache kept thousands)."""
    recorder = CallRecorder("s", token_counter=ApproxCounter())
    transcript: list[Any] = [{"role": "system", "content": "Be brief."}]
    refs: list[weakref.ref[_Msg]] = []
    for k in range(60):
        transcript = [*transcript, {"role": "user", "content": f"question {k}"}]
        transcript = [*transcript, {"role": "assistant", "content": f"answer {k}"}]
        payload = [_Msg(m) for m in transcript]
        refs.extend(weakref.ref(m) for m in payload)
        await _record(recorder, payload, transcript)
        del payload
    gc.collect()
    alive = sum(ref() is not None for ref in refs)
    assert alive <= len(transcript)


async def test_the_token_memo_stays_bounded_by_the_payload() -> None:
    """Messages that change every call (a rebuilt summary head) do not pile up counts."""
    recorder = CallRecorder("s", token_counter=ApproxCounter())
    tail: list[Any] = [{"role": "user", "content": "go"}]
    for k in range(400):
        head = {"role": "system", "content": f"summary as of call {k}"}
        await _record(recorder, [head, *tail], [*tail])
    assert recorder.held_counts <= 2 * len(tail) + 2 + 256
