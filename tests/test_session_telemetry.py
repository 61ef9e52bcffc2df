"""The wrapper feeds the telemetry: one record per model call, every round, every session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ctxmw
from ctxmw.errors import SaveFileWriteError
from ctxmw.runtime.transcript import TranscriptFile
from ctxmw.telemetry import CallRecord, LedgerWriter
from ctxmw.testing import FakeCompletion, text, tool_calls, usage
from tests._lock import lock_is_free
from tests.test_session import MODEL, add

pytestmark = pytest.mark.anyio


def loop_script() -> FakeCompletion:
    return FakeCompletion(
        tool_calls(("add", {"a": 1, "b": 2}), usage=usage(1500, 10, cached_tokens=0)),
        tool_calls(("add", {"a": 3, "b": 4}), usage=usage(1600, 10, cached_tokens=1408)),
        text("done", usage=usage(1700, 5, cached_tokens=1536)),
    )


async def test_every_round_is_recorded_to_hooks_ledger_and_logger(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    records: list[CallRecord] = []
    save_file = tmp_path / "agent.jsonl"
    session = ctxmw.Session(
        MODEL,
        save_file=save_file,
        tools=[add],
        completion=loop_script(),
        prompt_strategies="shorten_tools_epoch_increment",
        on_call=[records.append],
    )
    with caplog.at_level("INFO", logger="ctxmw"):
        await session.ask("Add things.")
    assert [r.round for r in records] == [0, 1, 2]
    assert [r.cache_read_tokens for r in records] == [0, 1408, 1536]
    assert all(r.strategies == ("shorten_tools_epoch_increment",) for r in records)
    assert records[1].prefix_tokens_local > 0
    assert records[2].bust is None
    assert records[0].budget is not None
    assert records[0].budget["band"] == "ok"
    lines = (tmp_path / "agent.jsonl.ledger.jsonl").read_text().splitlines()
    ledger = [json.loads(line) for line in lines]
    assert [entry["round"] for entry in ledger] == [0, 1, 2]
    assert "Add things." not in (tmp_path / "agent.jsonl.ledger.jsonl").read_text()
    assert sum("ctxmw call" in r.getMessage() for r in caplog.records) == 3


async def test_stateless_calls_on_one_save_file_are_one_session(tmp_path: Path) -> None:
    records: list[CallRecord] = []
    save_file = tmp_path / "agent.jsonl"
    history: list[dict[str, Any]] = [{"role": "user", "content": "x " * 3000}]
    fake = FakeCompletion(text("one"), text("two"))
    first = await ctxmw.acompletion(
        MODEL, history, save_file=save_file, completion=fake, on_call=[records.append]
    )
    history += [first.choices[0].message.model_dump(exclude_none=True)]
    history += [{"role": "user", "content": "more"}]
    await ctxmw.acompletion(
        MODEL, history, save_file=save_file, completion=fake, on_call=[records.append]
    )
    assert len(records) == 2
    assert records[1].prefix_tokens_local > 3000
    assert records[1].bust is None
    assert records[0].session == records[1].session == str(save_file)


async def test_a_streamed_call_is_recorded_once_it_has_been_read(tmp_path: Path) -> None:
    records: list[CallRecord] = []
    stream = await ctxmw.acompletion(
        MODEL,
        [{"role": "user", "content": "hi"}],
        save_file=tmp_path / "s.jsonl",
        completion=FakeCompletion(text("hello there", usage=usage(50, 3))),
        stream=True,
        on_call=[records.append],
    )
    assert records == []
    chunks = [chunk async for chunk in stream]
    assert chunks
    assert len(records) == 1
    assert records[0].prompt_tokens == 50


async def test_a_failing_telemetry_never_breaks_the_call(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    session = ctxmw.Session(MODEL, completion=FakeCompletion(text("ok")), prompt_strategies="none")

    async def broken(**kwargs: Any) -> None:
        raise RuntimeError("ledger disk full")

    monkeypatch.setattr(session.recorder, "record", broken)
    reply = await session.ask("hi")
    assert reply.choices[0].message.content == "ok"
    assert "telemetry failed" in caplog.text


async def test_telemetry_can_be_switched_off(tmp_path: Path) -> None:
    records: list[CallRecord] = []
    session = ctxmw.Session(
        MODEL,
        save_file=tmp_path / "a.jsonl",
        completion=FakeCompletion(text("ok")),
        strategy_options={"telemetry": False},
        on_call=[records.append],
    )
    await session.ask("hi")
    assert records == []
    assert not (tmp_path / "a.jsonl.ledger.jsonl").exists()


async def test_budget_layers_kept_incrementally_equal_a_count_from_scratch() -> None:
    from ctxmw.telemetry.counters import LiteLLMCounter

    records: list[CallRecord] = []
    fake = loop_script()
    session = ctxmw.Session(
        MODEL,
        tools=[add],
        completion=fake,
        system="Be exact.",
        prompt_strategies="none",
        on_call=[records.append],
    )
    await session.ask("Add things.")
    counter = LiteLLMCounter()
    for call, record in zip(fake.calls, records, strict=True):
        layers = {"system": 0, "history": 0, "tool_results": 0, "current": 0}
        messages = call["messages"]
        newest = max(i for i, m in enumerate(messages) if m["role"] == "user")
        for i, message in enumerate(messages):
            role = message["role"]
            layer = {"system": "system", "tool": "tool_results"}.get(role, "history")
            layer = "current" if i == newest else layer
            layers[layer] += counter.message_tokens(MODEL, message)
        assert record.budget is not None
        assert {key: record.budget[key] for key in layers} == layers
        assert record.budget["tools"] > 0


async def test_the_ledger_line_is_written_after_the_transcripts_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    real_write = TranscriptFile.write_now
    real_append = LedgerWriter.append_now

    def write_now(self: TranscriptFile, data: bytes) -> None:
        real_write(self, data)
        order.append("transcript")

    def append_now(self: LedgerWriter, data: bytes) -> None:
        order.append("ledger")
        real_append(self, data)

    monkeypatch.setattr(TranscriptFile, "write_now", write_now)
    monkeypatch.setattr(LedgerWriter, "append_now", append_now)
    session = ctxmw.Session(MODEL, save_file=tmp_path / "agent.jsonl", completion=loop_script())
    await session.ask("hi")
    assert order == ["transcript", "ledger"]


async def test_a_ledger_that_cannot_be_written_never_fails_the_transcript_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    save_file = tmp_path / "agent.jsonl"
    (tmp_path / "agent.jsonl.ledger.jsonl").mkdir()  # opening it for append fails
    session = ctxmw.Session(MODEL, save_file=save_file, completion=FakeCompletion(text("ok")))
    response = await session.ask("hi")
    assert response.choices[0].message.content == "ok"
    assert [json.loads(line)["role"] for line in save_file.read_text().splitlines()] == [
        "user",
        "assistant",
    ]
    assert any("ledger" in r.getMessage() for r in caplog.records)


async def test_a_failed_transcript_write_still_writes_the_ledger_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(self: TranscriptFile, data: bytes) -> None:
        raise SaveFileWriteError(str(self.path), OSError(28, "No space left on device"))

    monkeypatch.setattr(TranscriptFile, "write_now", disk_full)
    save_file = tmp_path / "agent.jsonl"
    session = ctxmw.Session(MODEL, save_file=save_file, completion=FakeCompletion(text("ok")))
    with pytest.raises(SaveFileWriteError):
        await session.ask("hi")
    assert (tmp_path / "agent.jsonl.ledger.jsonl").read_text().count("\n") == 1
    assert session.messages[-1]["content"] == "ok"  # kept in memory for the next write


async def test_a_summary_recorded_before_a_failed_call_still_reaches_the_ledger(
    tmp_path: Path,
) -> None:
    async def summarise_then_fail(messages: list[Any], ctx: Any) -> list[Any]:
        await ctx.completion(messages=[{"role": "user", "content": "summarise"}])
        return messages

    fake = FakeCompletion(text("summary"), RuntimeError("provider down"))
    session = ctxmw.Session(
        MODEL,
        save_file=tmp_path / "agent.jsonl",
        completion=fake,
        prompt_strategies=[summarise_then_fail],
    )
    with pytest.raises(RuntimeError, match="provider down"):
        await session.ask("hi")
    ledger = (tmp_path / "agent.jsonl.ledger.jsonl").read_text().splitlines()
    assert [json.loads(line)["kind"] for line in ledger] == ["summary"]
    assert lock_is_free(tmp_path / "agent.jsonl")


@pytest.mark.anyio
async def test_a_notes_one_time_delivery_is_a_bust_of_the_inbox(tmp_path: Path) -> None:
    """A stateless caller never carries the note its previous call delivered: its next call
    breaks the prefix where the note was, and that is the inbox's doing, not the caller's."""
    from ctxmw.inbox import deliver

    save_file = tmp_path / "a.jsonl"
    fake = FakeCompletion(*[text(f"r{n}") for n in range(4)])
    history: list[dict[str, Any]] = [{"role": "system", "content": "sys " * 500}]
    history.append({"role": "user", "content": "go"})
    for n in range(3):
        if n == 1:
            await deliver(save_file, "a note from outside")
        await ctxmw.acompletion("openai/gpt-4o", history, save_file=save_file, completion=fake)
        history = [*history, {"role": "assistant", "content": f"r{n}"}]
        history.append({"role": "user", "content": f"u{n}"})
    assert fake.calls[1]["messages"][-1]["content"] == "a note from outside"
    ledger = [json.loads(x) for x in (tmp_path / "a.jsonl.ledger.jsonl").read_text().splitlines()]
    assert [r["bust"] for r in ledger] == [
        None, None, {"cause": "strategy", "strategy": "inbox", "message_index": 4}
    ]  # fmt: skip
    assert [r["messages_in"] for r in ledger] == [2, 4, 6]  # the note is the inbox's output
