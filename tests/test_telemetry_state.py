"""A recorder's state, exported and restored elsewhere, measures the next call as one would."""

from __future__ import annotations

import json

import pytest

from ctxmw.settings import Settings
from ctxmw.telemetry.recorder import CallRecorder
from ctxmw.testing import text, usage
from ctxmw.types import Messages
from tests._fleet_convo import comparable, history

pytestmark = pytest.mark.anyio

MODEL = "openai/fake-model"


async def record(recorder: CallRecorder, prompt: Messages, round_: int) -> dict[str, object]:
    wire = {"model": MODEL, "messages": prompt, "api_base": "http://127.0.0.1:9/v1"}
    done = await recorder.record(
        model=MODEL,
        wire_kwargs=wire,
        transcript=prompt,
        trace=[("none", prompt)],
        response=text("ok", usage=usage(10, 1)),
        round=round_,
    )
    return done.to_dict()


async def test_a_restored_recorder_continues_like_the_original() -> None:
    settings = Settings()
    one = CallRecorder("conv", settings=settings)
    prompts = [history(i) for i in range(6)]
    prompts[4] = [*prompts[4][:3], {"role": "user", "content": "an edit"}]  # a bust
    expected = [await record(one, p, i) for i, p in enumerate(prompts)]
    carried: dict[str, object] | None = None
    for i, prompt in enumerate(prompts):
        fresh = CallRecorder("conv", settings=settings)  # another process, every call
        if carried is not None:
            fresh.restore_state(json.loads(json.dumps(carried)))
        got = await record(fresh, prompt, i)
        assert comparable(got) == comparable(expected[i]), f"call {i}"
        carried = fresh.export_state()
    assert expected[4]["bust"] is not None


async def test_a_new_recorder_exports_an_empty_state() -> None:
    state = CallRecorder("conv").export_state()
    assert state == {"prefix": None, "shape": None, "seen": 0, "calls": 0, "hits": [0, 0]}
