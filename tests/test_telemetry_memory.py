"""What a CallRecorder holds between calls: the last call's lists, never earlier calls' copies."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from ctxmw.telemetry import ApproxCounter, CallRecorder, LedgerWriter
from tests._tracked import tracked_reachable

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


async def test_what_the_recorder_keeps_for_the_collector_is_bounded(tmp_path: Any) -> None:
    """After many calls a recorder keeps a few dozen tracked objects, whatever the count of
    calls (each full gc pass walks them, times a thousand sessions): the last call's lists per
    slot and their digests, the tracker's snapshot, its locks; not the alert window's records."""
    recorder = CallRecorder("s", save_file=tmp_path / "a.jsonl", token_counter=ApproxCounter())
    transcript: list[Any] = [{"role": "system", "content": "Be brief."}]
    for k in range(40):
        transcript = [*transcript, {"role": "user", "content": f"question {k}"}]
        await _record(recorder, list(transcript), transcript)
        transcript = [*transcript, {"role": "assistant", "content": f"answer {k}"}]
    gc.collect()
    kept = tracked_reachable(recorder, [*transcript, recorder.settings, recorder.logger])
    assert sum(kept.values()) <= 36, kept


async def test_a_ledger_writer_keeps_nothing_for_the_collector_until_it_writes(
    tmp_path: Any,
) -> None:
    """Its path is a string and its lock is made by its first write of its own: a session's
    lines go out in the runtime's trip (``append_now``), which needs neither."""
    writer = LedgerWriter(tmp_path / "a.ledger.jsonl")
    writer.append_now(b'{"a": 1}\n')
    gc.collect()
    assert tracked_reachable(writer) == {"LedgerWriter": 1}
    await writer.write_line(b'{"b": 2}\n')
    assert writer.path == tmp_path / "a.ledger.jsonl"
    assert writer.path.read_bytes() == b'{"a": 1}\n{"b": 2}\n'


async def test_the_held_ledger_lines_are_one_tracked_object(tmp_path: Any) -> None:
    """What a commit's worker-thread trip carries for the ledger (held by a call waiting for
    its thread): one object, not a partial of a bound method."""
    recorder = CallRecorder("s", save_file=tmp_path / "a.jsonl", token_counter=ApproxCounter())
    kwargs = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    await recorder.record(model=MODEL, wire_kwargs=kwargs, transcript=[], hold_ledger=True)
    job = recorder.take_held()
    assert job is not None
    gc.collect()
    assert sum(tracked_reachable(job, [recorder.ledger]).values()) == 1
    job()
    assert recorder.ledger_path is not None
    assert recorder.ledger_path.read_bytes().count(b"\n") == 1
