"""Bust attribution: tools, the caller's transcript, or the strategy that moved the prefix."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from ctxmw.history import _facts as digests_module
from ctxmw.telemetry import ApproxCounter, CallRecorder
from ctxmw.telemetry import recorder as recorder_module
from ctxmw.telemetry.bust import CallShape, attribute_bust


def shape(
    transcript: list[bytes], *stages: tuple[str, list[bytes]], tools: bytes = b"t"
) -> CallShape:
    return CallShape(tools, transcript, list(stages))


def test_no_bust_on_a_first_call_or_an_extension() -> None:
    cur = shape([b"a", b"b"], ("s", [b"a", b"b"]))
    assert attribute_bust(None, cur, None, False) is None
    assert attribute_bust(shape([b"a"], ("s", [b"a"])), cur, 1, False) is None


def test_tools_change_is_named_first() -> None:
    prev = shape([b"a"], ("s", [b"a"]))
    cur = shape([b"x"], ("s", [b"x"]), tools=b"u")
    assert attribute_bust(prev, cur, 0, True) == {
        "cause": "tools",
        "strategy": None,
        "message_index": None,
    }


def test_an_edited_transcript_is_the_callers() -> None:
    prev = shape([b"a", b"b"], ("s", [b"a", b"b"]))
    cur = shape([b"a", b"B", b"c"], ("s", [b"a", b"B", b"c"]))
    bust = attribute_bust(prev, cur, 1, True)
    assert bust == {"cause": "transcript", "strategy": None, "message_index": 1}


def test_the_first_strategy_that_stopped_extending_is_named() -> None:
    prev = shape([b"a", b"b"], ("one", [b"a", b"b"]), ("two", [b"a", b"n", b"b"]))
    cur = shape([b"a", b"b", b"c"], ("one", [b"a", b"b", b"c"]), ("two", [b"a", b"N", b"b", b"c"]))
    bust = attribute_bust(prev, cur, 1, True)
    assert bust == {"cause": "strategy", "strategy": "two", "message_index": 1}


def test_a_transient_message_dropped_at_the_end_names_its_strategy() -> None:
    prev = shape([b"a"], ("epoch", [b"a"]), ("inbox", [b"a", b"note"]))
    cur = shape([b"a", b"b"], ("epoch", [b"a", b"b"]), ("inbox", [b"a", b"b"]))
    assert attribute_bust(prev, cur, 1, True) == {
        "cause": "strategy",
        "strategy": "inbox",
        "message_index": 1,
    }


def test_untraced_change_after_the_chain_names_no_strategy() -> None:
    prev = shape([b"a"])
    cur = shape([b"a", b"b"])
    assert attribute_bust(prev, cur, 0, True) == {
        "cause": "strategy",
        "strategy": None,
        "message_index": 0,
    }


def test_a_moved_system_prompt_is_named_before_the_transcript() -> None:
    prev = shape([b"s", b"a"], ("x", [b"s", b"a"]))
    cur = shape([b"S", b"a", b"b"], ("x", [b"S", b"a", b"b"]))
    assert attribute_bust(prev, cur, 0, True, system=True) == {
        "cause": "system",
        "strategy": None,
        "message_index": 0,
    }


def test_a_system_prompt_a_strategy_moved_names_it() -> None:
    prev = shape([b"a"], ("stamp", [b"s1", b"a"]))
    cur = shape([b"a", b"b"], ("stamp", [b"s2", b"a", b"b"]))
    bust = attribute_bust(prev, cur, 0, True, system=True)
    assert bust == {"cause": "system", "strategy": "stamp", "message_index": 0}


@pytest.mark.anyio
async def test_a_long_transcript_is_digested_between_loop_steps_and_only_when_needed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A resumed 3,000-message transcript and a strategy's copy of it: at most a chunk of
    messages is digested per loop step (one step digesting them all stalled every session);
    the first call digests the payload only, the transcript waits for a bust to attribute."""
    steps, digested = [0], Counter[int]()
    real = digests_module.message_digest

    def counted(message: Any) -> bytes:
        digested[steps[0]] += 1
        return real(message)

    monkeypatch.setattr(digests_module, "message_digest", counted)
    transcript = [{"role": "user", "content": f"message {i}"} for i in range(3000)]
    copy = [dict(m) for m in transcript]
    recorder = CallRecorder("s", token_counter=ApproxCounter())

    async def ticker(done: anyio.Event) -> None:
        while not done.is_set():
            steps[0] += 1
            await anyio.lowlevel.checkpoint()

    async def call(output: list[dict[str, Any]]) -> Any:
        async with anyio.create_task_group() as tg:
            done = anyio.Event()
            tg.start_soon(ticker, done)
            record = await recorder.record(
                model="gpt-4o",
                wire_kwargs={"messages": output},
                transcript=transcript,
                trace=[("copy", output)],
            )
            done.set()
        return record

    await call(copy)
    assert sum(digested.values()) == 3000  # the payload (6,000 when every list was digested)
    assert max(digested.values()) <= 256
    digested.clear()
    shifted = [{"role": "user", "content": "a new first message"}, *copy]
    record = await call(shifted)
    assert record.bust == {"cause": "strategy", "strategy": "copy", "message_index": 0}
    assert 3000 <= sum(digested.values()) <= 3001  # the transcript, once; the rest is reused
    assert max(digested.values()) <= 256


@pytest.mark.anyio
async def test_a_call_whose_prefix_held_digests_no_list_but_the_payload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    digested = [0]
    real = digests_module.message_digest

    def counted(message: Any) -> bytes:
        digested[0] += 1
        return real(message)

    monkeypatch.setattr(digests_module, "message_digest", counted)
    transcript = [{"role": "user", "content": f"message {i}"} for i in range(100)]
    recorder = CallRecorder("s", token_counter=ApproxCounter())
    for n in range(3):
        transcript = [*transcript, {"role": "user", "content": f"more {n}"}]
        output = [{"role": "system", "content": "stamp"}, *transcript]
        digested[0] = 0
        record = await recorder.record(
            model="gpt-4o",
            wire_kwargs={"messages": output},
            transcript=transcript,
            trace=[("stamp", output)],
        )
        assert record.bust is None
        assert digested[0] == (102 if n == 0 else 2)  # the payload's new messages only


@pytest.mark.anyio
async def test_a_record_that_fails_after_measuring_leaves_no_lookup_for_the_next_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Digests found by object id are valid only while the call's objects live: a lookup kept
    # past a failed record could hand a dead message's digest to a new one with its id.
    recorder = CallRecorder("s", token_counter=ApproxCounter())

    def broken(response: object, stream: object, kw: object) -> Any:
        raise RuntimeError("usage unreadable")

    monkeypatch.setattr(recorder_module, "read_call_usage", broken)
    messages = [{"role": "user", "content": "hello"}]
    with pytest.raises(RuntimeError, match="usage unreadable"):
        await recorder.record(model="gpt-4o", wire_kwargs={"messages": messages}, transcript=[])
    assert recorder._digests._fresh == {}
    assert recorder._digests._lists == {}
