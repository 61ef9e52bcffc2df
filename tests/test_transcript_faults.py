"""The save_file under faults: odd strings, torn rounds, a full disk, a retried turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxmw import Session, errors
from ctxmw.runtime.transcript import TranscriptFile
from ctxmw.telemetry.stats import load_ledgers
from ctxmw.testing import FakeCompletion, text, tool_calls
from tests._disk import full_disk

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"
LONE = "report_\udcff.txt"  # os.listdir's name for a file whose name is not UTF-8


def list_files() -> str:
    """List the files of the folder."""
    return LONE


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


async def test_a_tool_result_with_a_lone_surrogate_is_saved_and_loads_back(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(tool_calls(("list_files", {})), text("one file"))
    session = Session(MODEL, save_file=save_file, tools=[list_files], completion=fake)
    await session.ask("what is there?")
    assert [m.get("content") for m in session.messages][-2:] == [LONE, "one file"]
    loaded = await TranscriptFile(save_file).load()
    assert loaded == session.messages
    save_file.read_bytes().decode("utf-8")  # the file itself stays valid UTF-8


def round_lines(call_id: str = "c1") -> tuple[bytes, bytes]:
    call = {"id": call_id, "type": "function", "function": {"name": "add", "arguments": "{}"}}
    assistant = {"role": "assistant", "content": None, "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": call_id, "content": "2"}
    return (json.dumps(assistant) + "\n").encode(), (json.dumps(result) + "\n").encode()


async def test_a_write_torn_inside_the_first_tool_result_loads_without_the_call(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.jsonl"
    user = (json.dumps({"role": "user", "content": "go"}) + "\n").encode()
    assistant, result = round_lines()
    path.write_bytes(user + assistant + result[: len(result) // 2])
    loaded = await TranscriptFile(path).load()
    assert loaded == [{"role": "user", "content": "go"}]


async def test_the_next_run_after_a_torn_first_result_sends_no_unanswered_call(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.jsonl"
    user = (json.dumps({"role": "user", "content": "go"}) + "\n").encode()
    assistant, result = round_lines()
    path.write_bytes(user + assistant + result[:10])
    fake = FakeCompletion(text("resumed"))
    await Session(MODEL, save_file=path, completion=fake).run()
    assert [m["role"] for m in fake.prompts[0]] == ["user"]
    assert [m.get("content") for m in await TranscriptFile(path).load()] == ["go", "resumed"]
    # The call is set aside, not cut: it stays in the file as an earlier revision.
    assert [m.get("role", m.get("ctxmw")) for m in lines(path)] == [
        "user",
        "assistant",
        "edit",
        "assistant",
    ]


async def test_a_full_disk_raises_a_ctxmw_error_naming_the_file_and_keeps_the_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_file = tmp_path / "agent.jsonl"
    ran: list[int] = []

    def counted_add(a: int, b: int) -> int:
        """Add two integers."""
        ran.append(1)
        return a + b

    fake = FakeCompletion(tool_calls(("counted_add", {"a": 1, "b": 2})), text("3"))
    session = Session(MODEL, save_file=save_file, tools=[counted_add], completion=fake)
    broken = full_disk(monkeypatch)
    with pytest.raises(errors.SaveFileWriteError) as caught:
        await session.ask("1 + 2?")
    assert isinstance(caught.value, errors.CtxmwRuntimeError)
    assert str(save_file) in str(caught.value)
    assert "No space left on device" in str(caught.value)
    assert isinstance(caught.value.__cause__, OSError)
    # The round (its tool already ran) is still in memory; nothing half-written is on disk.
    assert [m["role"] for m in session.messages] == ["user", "assistant", "tool"]
    assert save_file.read_bytes() == b""
    broken.clear()
    await session.run()
    assert ran == [1]
    assert [m["role"] for m in lines(save_file)] == ["user", "assistant", "tool", "assistant"]


async def test_a_retried_ask_after_a_round_2_error_writes_the_user_turn_once(
    tmp_path: Path,
) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(
        tool_calls(("add", {"a": 1, "b": 1})), ConnectionError("provider down"), text("2")
    )
    session = Session(MODEL, save_file=save_file, tools=[add], completion=fake)
    with pytest.raises(ConnectionError):
        await session.ask("1 + 1?")
    await session.ask("1 + 1?")
    stored = lines(save_file)
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert [m.get("content") for m in fake.prompts[-1]].count("1 + 1?") == 1


async def test_asking_the_same_after_a_finished_turn_is_a_new_question(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(text("hi"), text("hi again"))
    session = Session(MODEL, save_file=save_file, completion=fake)
    await session.ask("hello")
    await session.ask("hello")
    assert [m["content"] for m in lines(save_file)] == ["hello", "hi", "hello", "hi again"]


async def test_a_record_appended_after_a_torn_ledger_line_is_kept(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    session = Session(MODEL, save_file=save_file, completion=FakeCompletion(text("a"), text("b")))
    await session.ask("one")
    ledger = save_file.with_name("agent.jsonl.ledger.jsonl")
    with ledger.open("ab") as handle:
        handle.write(b'{"ts": "2026-01-01T00:00:00Z", "sess')  # a writer killed mid-append
    await session.ask("two")
    records = load_ledgers([ledger])
    assert [r["round"] for r in records] == [0, 0]
    assert len(ledger.read_bytes().splitlines()) == 3
