"""The save_file: JSONL, full fidelity, torn-line tolerant, append-only, owner-only."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import anyio
import pytest

from ctxmw import InvalidTranscriptError
from ctxmw.runtime.transcript import TranscriptFile, dump_line

pytestmark = pytest.mark.anyio

ROUND = [
    {"role": "user", "content": "hi ✓"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
        "thinking_blocks": [{"type": "thinking", "thinking": "hmm", "signature": "sig"}],
        "provider_specific_fields": {"x": 1},
    },
    {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "result",
        "cache_control": {"type": "ephemeral"},
    },
]


async def test_round_trip_keeps_every_key(tmp_path: Path) -> None:
    file = TranscriptFile(tmp_path / "agent.jsonl")
    await file.append(ROUND)
    assert await TranscriptFile(file.path).load() == ROUND
    assert file.path.read_text(encoding="utf-8").count("\n") == 3


async def test_absent_file_is_an_empty_transcript(tmp_path: Path) -> None:
    assert await TranscriptFile(tmp_path / "none.jsonl").load() == []


async def test_created_owner_only(tmp_path: Path) -> None:
    file = TranscriptFile(tmp_path / "sub" / "agent.jsonl")
    await file.append(ROUND[:1])
    assert file.path.stat().st_mode & 0o777 == 0o600


async def test_a_torn_last_line_is_ignored_with_a_warning_and_cut_before_the_next_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "agent.jsonl"
    path.write_bytes(dump_line(ROUND[0]) + b'{"role": "assist')
    file = TranscriptFile(path)
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        assert await file.load() == ROUND[:1]
    assert "torn last line 2" in caplog.text
    await file.append([{"role": "assistant", "content": "ok"}])
    assert await TranscriptFile(path).load() == [ROUND[0], {"role": "assistant", "content": "ok"}]


async def test_a_damaged_line_before_the_end_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    path.write_bytes(dump_line(ROUND[0]) + b"garbage\n" + dump_line(ROUND[0]))
    with pytest.raises(InvalidTranscriptError, match="line 2"):
        await TranscriptFile(path).load()


async def test_a_round_cut_short_is_dropped_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    two_calls = {
        **ROUND[1],
        "tool_calls": [*ROUND[1]["tool_calls"], {**ROUND[1]["tool_calls"][0], "id": "c2"}],
    }
    path = tmp_path / "agent.jsonl"
    path.write_bytes(b"".join(dump_line(m) for m in [ROUND[0], two_calls, ROUND[2]]))
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        assert await TranscriptFile(path).load() == ROUND[:1]
    assert "cut short" in caplog.text


async def test_unanswered_calls_for_the_caller_are_kept(tmp_path: Path) -> None:
    file = TranscriptFile(tmp_path / "agent.jsonl")
    await file.append(ROUND[:2])
    assert await TranscriptFile(file.path).load() == ROUND[:2]


async def test_append_writes_only_the_new_lines(tmp_path: Path) -> None:
    file = TranscriptFile(tmp_path / "agent.jsonl")
    await file.append(ROUND)
    before = file.path.read_bytes()
    inode = file.path.stat().st_ino
    await file.append([{"role": "user", "content": "more"}])
    after = file.path.read_bytes()
    assert after.startswith(before)
    assert file.path.stat().st_ino == inode


async def test_changed_notices_another_writer(tmp_path: Path) -> None:
    file = TranscriptFile(tmp_path / "agent.jsonl")
    await file.append(ROUND[:1])
    assert not await file.changed()
    async with await anyio.open_file(file.path, "ab") as other:
        await other.write(dump_line(ROUND[0]))
    assert await file.changed()


def test_dump_line_is_one_line() -> None:
    line = dump_line({"role": "user", "content": "two\nlines"})
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert os.linesep.encode() not in line[:-1]
