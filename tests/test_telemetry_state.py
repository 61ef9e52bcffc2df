"""A recorder's state, exported and restored elsewhere, measures the next call as one would."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxmw.settings import Settings
from ctxmw.telemetry.record import CallRecord
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
    alerts = {"recent": [], "firing": [], "calls": 0, "filled": False, "busted": 0}
    assert state == {
        "prefix": None,
        "shape": None,
        "seen": 0,
        "calls": 0,
        "hits": [0, 0],
        "alerts": alerts,
    }


SECRET = "AKIA-not-a-real-key-4f9c2d"


async def test_the_exported_state_holds_no_message_content() -> None:
    recorder = CallRecorder("conv", settings=Settings())
    prompt = history(3)
    prompt[-1] = {**prompt[-1], "content": f"password={SECRET}\n" + prompt[-1]["content"]}
    await recorder.record(
        model=MODEL,
        wire_kwargs={"model": MODEL, "messages": prompt},
        transcript=prompt,
        trace=[("none", prompt)],
        response=text(f"the reply quotes {SECRET}", usage=usage(10, 1)),
    )
    exported = json.dumps(recorder.export_state())
    assert SECRET not in exported
    assert "password" not in exported
    assert "module_0" not in exported


def restored(recorder: CallRecorder) -> CallRecorder:
    fresh = CallRecorder("conv", settings=recorder.settings)
    fresh.restore_state(json.loads(json.dumps(recorder.export_state())))
    return fresh


def beyond_prefix(done: CallRecord) -> int:
    """What the exact rule credits past the whole messages: an edit's kept start, a reply."""
    assert done.cache_rule == "exact"
    return done.expected_cached_tokens - done.prefix_tokens_local


async def call(recorder: CallRecorder, prompt: Messages, reply: str = "ok") -> CallRecord:
    wire = {"model": MODEL, "messages": prompt, "api_base": "http://127.0.0.1:9/v1"}
    response = text(reply, usage=usage(10, 1))
    return await recorder.record(
        model=MODEL, wire_kwargs=wire, transcript=prompt, response=response
    )


async def test_a_restored_recorder_credits_the_unchanged_start_of_an_edited_message() -> None:
    head = "You are a careful agent. " * 40  # about 1,000 characters the edit keeps
    first: Messages = [
        {"role": "system", "content": head + "Today is Monday."},
        {"role": "user", "content": "go"},
    ]
    second = [{"role": "system", "content": head + "Today is Tuesday."}, first[1]]
    recorder = CallRecorder("conv", settings=Settings())
    await call(recorder, first)
    carried = beyond_prefix(await call(restored(recorder), second))
    exact = beyond_prefix(await call(recorder, second))
    # The ladder's longest agreed rung (512 characters) is a lower bound of the exact measure.
    assert 0 < carried <= exact


async def test_a_restored_recorder_counts_the_reply_a_token_cache_kept() -> None:
    recorder = CallRecorder("conv", settings=Settings())
    first: Messages = [{"role": "user", "content": "go"}]
    reply = "word " * 200
    await call(recorder, first, reply)
    second = [*first, {"role": "assistant", "content": reply}, {"role": "user", "content": "on"}]
    got = await call(restored(recorder), second)
    want = await call(recorder, second)
    assert beyond_prefix(want) > 0
    assert beyond_prefix(got) == beyond_prefix(want)


async def test_a_restored_recorder_fires_the_windowed_alerts_of_the_original() -> None:
    settings = Settings(alert_window=3)
    one = CallRecorder("conv", settings=settings)
    carried: CallRecorder | None = None
    fired = []
    for i in range(8):
        prompt = history(i, lines=400)  # past the cache minimum: every call is warm
        original = await call(one, prompt)
        fresh = CallRecorder("conv", settings=settings) if carried is None else restored(carried)
        again = await call(fresh, prompt)
        assert [a["rule"] for a in again.alerts] == [a["rule"] for a in original.alerts]
        fired += [a["rule"] for a in original.alerts]
        carried = fresh
    assert "low_hit_rate" in fired  # the upstream reads nothing from its cache


async def test_a_restored_recorder_counts_only_the_messages_that_changed() -> None:
    from ctxmw.context.tokens import ApproxCounter

    class Counting(ApproxCounter):
        counted = 0

        def message_tokens(self, model: str, message: Any) -> int:
            Counting.counted += 1
            return super().message_tokens(model, message)

    first = history(3)
    one = CallRecorder("conv", settings=Settings(), token_counter=Counting())
    await call(one, first)
    fresh = CallRecorder("conv", settings=Settings(), token_counter=Counting())
    fresh.restore_state(json.loads(json.dumps(one.export_state())))
    edited = [first[0], {"role": "user", "content": "An edited request."}, *first[2:]]
    Counting.counted = 0
    done = await call(fresh, edited)  # a bust at message 1: the six after it are unchanged
    assert done.bust is not None
    assert Counting.counted == 1
