"""Bust attribution: tools, the caller's transcript, or the strategy that moved the prefix."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmw.history import DigestSlots
from ctxmw.history import _facts as digests_module
from ctxmw.telemetry import ApproxCounter, CallRecorder
from ctxmw.telemetry import recorder as recorder_module
from ctxmw.telemetry.bust import (
    CallShape,
    PendingShape,
    attribute_bust,
    attribute_pending,
    call_shape,
)


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


def test_each_bust_is_a_dict_of_its_own() -> None:
    # A record's bust reaches the caller's hooks: changing one must not change the next.
    prev = shape([b"a"], ("s", [b"a"]))
    cur = shape([b"x"], ("s", [b"x"]), tools=b"u")
    first = attribute_bust(prev, cur, 0, True)
    assert first is not None
    first["cause"] = "changed by a hook"
    assert attribute_bust(prev, cur, 0, True) == {
        "cause": "tools",
        "strategy": None,
        "message_index": None,
    }
    slots = DigestSlots()
    old, new = PendingShape(slots, b"t", [], []), PendingShape(slots, b"u", [], [])
    pending = anyio.run(lambda: attribute_pending(old, new, 0))
    pending["cause"] = "changed by a hook"
    assert anyio.run(lambda: attribute_pending(old, new, 0))["cause"] == "tools"


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
    the first call digests the payload only, the transcript waits for a bust to attribute, and
    attributing it digests only the messages whose object changed."""
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

    async def call(output: list[dict[str, Any]], given: list[dict[str, Any]]) -> Any:
        async with anyio.create_task_group() as tg:
            done = anyio.Event()
            tg.start_soon(ticker, done)
            record = await recorder.record(
                model="gpt-4o",
                wire_kwargs={"messages": output},
                transcript=given,
                trace=[("copy", output)],
            )
            done.set()
        return record

    await call(copy, transcript)
    assert sum(digested.values()) == 3000  # the payload (6,000 when every list was digested)
    assert max(digested.values()) <= 256
    digested.clear()
    shifted = [{"role": "user", "content": "a new first message"}, *copy]
    record = await call(shifted, transcript)
    assert record.bust == {"cause": "strategy", "strategy": "copy", "message_index": 0}
    # The payload's new message; the copy's first position, old and new, where it stopped
    # extending; the transcript is the same objects: none of it.
    assert sum(digested.values()) == 3
    digested.clear()
    # The caller rebuilt its transcript (equal dicts, new objects) and the strategy moved again:
    # every position of the transcript is digested, old and new, a chunk per loop step.
    rebuilt = [dict(m) for m in transcript]
    record = await call([{"role": "user", "content": "another first message"}, *copy], rebuilt)
    assert record.bust == {"cause": "strategy", "strategy": "copy", "message_index": 0}
    assert 6000 <= sum(digested.values()) <= 6004
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


# How a call's list differs from the previous call's: kept as it was, grown, its objects
# rebuilt as equal dicts, one message rewritten, one dropped, or a message put first.
CHANGES = ["same", "grown", "rebuilt", "rewritten", "dropped", "first"]


def _changed(items: list[dict[str, Any]], change: str, at: int) -> list[dict[str, Any]]:
    out = list(items)
    if change == "grown":
        out.append({"role": "user", "content": f"new {at}"})
    elif change == "rebuilt":
        out = [dict(m) for m in out]
    elif change == "rewritten" and out:
        out[at % len(out)] = {**out[at % len(out)], "content": f"rewritten {at}"}
    elif change == "dropped" and out:
        del out[at % len(out)]
    elif change == "first":
        out.insert(0, {"role": "system", "content": f"first {at}"})
    return out


@given(
    size=st.integers(0, 12),
    transcript=st.sampled_from(CHANGES),
    stages=st.lists(st.tuples(st.sampled_from(CHANGES), st.booleans()), max_size=3),
    extra_stage=st.booleans(),
    tools_changed=st.booleans(),
    system=st.booleans(),
    at=st.integers(0, 20),
)
@settings(max_examples=200, deadline=None)
def test_comparing_the_lists_names_what_their_digests_name(
    size: int,
    transcript: str,
    stages: list[tuple[str, bool]],
    extra_stage: bool,
    tools_changed: bool,
    system: bool,
    at: int,
) -> None:
    """Two calls of this process are attributed from their lists, digesting only the objects
    that changed: the cause is the one their full digests give."""
    old_transcript = [{"role": "user", "content": f"m{i}"} for i in range(size)]
    new_transcript = _changed(old_transcript, transcript, at)
    old_trace, new_trace = [], []
    for i, (change, renamed) in enumerate(stages):
        old_out = [{"role": "system", "content": f"stage {i}"}, *old_transcript]
        old_trace.append((f"s{i}", old_out))
        new_trace.append((f"r{i}" if renamed else f"s{i}", _changed(old_out, change, at + i)))
    if extra_stage:
        new_trace.append(("late", list(new_transcript)))
    slots = DigestSlots()
    old = PendingShape(slots, b"t", old_transcript, old_trace)
    new = PendingShape(slots, b"u" if tools_changed else b"t", new_transcript, new_trace)
    by_digests = attribute_bust(
        old.resolve_now(DigestSlots()), new.resolve_now(DigestSlots()), 3, True, system=system
    )
    by_lists = anyio.run(lambda: attribute_pending(old, new, 3, system=system, chunk=2))
    assert by_lists == by_digests


def test_call_shape_digests_the_transcript_and_each_stage_and_names_the_moved_one() -> None:
    slots = DigestSlots()
    head = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    old = call_shape(slots, b"t", head, [("shorten", head)])
    slots.end_call()
    shorter = [head[0]]
    new = call_shape(slots, b"t", [*head, {"role": "user", "content": "c"}], [("shorten", shorter)])
    assert len(old.transcript) == 2
    assert new.transcript[:2] == old.transcript
    assert new.stages[0][1] == old.stages[0][1][:1]
    bust = attribute_bust(old, new, 1, True)
    assert bust is not None
    assert bust["cause"] == "strategy"
    assert bust["strategy"] == "shorten"
