"""A save_file damaged in the middle: an error naming the line, and nothing ever truncated.

Only the end of the file can hold a torn write (the last write, cut short); a record whose
count runs past lines that cannot be its own is damage, wherever it is.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import ctxmw
from ctxmw.errors import InvalidSaveFileError, InvalidTranscriptError
from ctxmw.runtime._splices import Readbacks
from ctxmw.runtime.revisions import Edit
from ctxmw.runtime.transcript import TranscriptFile, dump_line, encode_lines
from ctxmw.testing import FakeCompletion, text

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"
CALL = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
USER = {"role": "user", "content": "1 + 1?"}
ASKS = {"role": "assistant", "content": None, "tool_calls": [CALL]}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "2"}
ANSWER = {"role": "assistant", "content": "2"}
AGAIN = {"role": "user", "content": "and 2 + 2?"}
ANSWER2 = {"role": "assistant", "content": "4"}


def write(path: Path, lines: list[dict[str, Any]]) -> bytes:
    data = b"".join(dump_line(line) for line in lines)
    path.write_bytes(data)
    return data


@pytest.mark.parametrize("count", [3, 7, 500])
async def test_a_damaged_count_in_the_middle_is_an_error_naming_the_line(
    tmp_path: Path, count: int
) -> None:
    path = tmp_path / "agent.jsonl"
    loop = {"ctxmw": "tool_loop", "count": count}  # ctxmw wrote 2
    data = write(path, [USER, loop, ASKS, RESULT, ANSWER, AGAIN, ANSWER2])
    with pytest.raises(InvalidTranscriptError, match=r"line 2 of .*agent\.jsonl") as caught:
        await TranscriptFile(path).load()
    assert "nothing was cut" in str(caught.value).lower()
    assert path.read_bytes() == data


async def test_a_session_on_a_file_damaged_in_the_middle_truncates_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.jsonl"
    loop = {"ctxmw": "tool_loop", "count": 9}
    data = write(path, [USER, loop, ASKS, RESULT, ANSWER, AGAIN, ANSWER2])
    with pytest.raises(InvalidTranscriptError):
        await ctxmw.Session(MODEL, save_file=path, completion=FakeCompletion(text("x"))).ask("?")
    with pytest.raises(InvalidTranscriptError):
        await ctxmw.acompletion(MODEL, [USER], save_file=path, completion=FakeCompletion(text("x")))
    assert path.read_bytes() == data


async def test_a_damaged_edit_count_before_later_records_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    edit = {"ctxmw": "edit", "ops": [[1, 0, 40]]}  # ctxmw wrote 1 inserted line
    later = {"ctxmw": "tool_loop", "count": 2}
    data = write(path, [USER, edit, AGAIN, later, ASKS, RESULT])
    with pytest.raises(InvalidTranscriptError, match="line 2 "):
        await TranscriptFile(path).load()
    assert path.read_bytes() == data


async def test_a_last_record_cut_off_by_a_torn_write_is_still_a_torn_tail(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.jsonl"
    size = len(dump_line(ASKS)) + len(dump_line(RESULT))
    loop = {"ctxmw": "tool_loop", "count": 2, "bytes": size}
    write(path, [USER, ANSWER, AGAIN, loop, ASKS])  # the write stopped after the call
    file = TranscriptFile(path)
    assert await file.load() == [USER, ANSWER, AGAIN]
    await file.append([ANSWER2])
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert lines == [USER, ANSWER, AGAIN, ANSWER2]


async def written_then_damaged(path: Path) -> bytes:
    """A file ctxmw wrote (an edit, then two more turns), then its edit's count damaged."""
    file = TranscriptFile(path)
    await file.append([USER, ANSWER])
    await file.append([ANSWER2], edit=Edit(((1, 1, 1),), (ANSWER,)))  # a restarted answer
    await file.append([AGAIN, ANSWER2])
    await file.append([AGAIN, ANSWER])
    return damage_the_edit_count(path)


def damage_the_edit_count(path: Path) -> bytes:
    lines = path.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[2])
    assert record["ctxmw"] == "edit"
    record["ops"] = [[1, 1, 40]]  # the damage: ctxmw wrote 1
    lines[2] = dump_line(record)
    data = b"".join(lines)
    path.write_bytes(data)
    return data


async def test_a_damaged_edit_count_before_later_turns_is_an_error_not_a_torn_tail(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.jsonl"
    data = await written_then_damaged(path)
    with pytest.raises(InvalidTranscriptError, match=r"line 3 of .*agent\.jsonl") as caught:
        await TranscriptFile(path).load()
    assert "nothing was cut" in str(caught.value).lower()
    with pytest.raises(InvalidTranscriptError):
        await ctxmw.Session(MODEL, save_file=path, completion=FakeCompletion(text("x"))).ask("?")
    with pytest.raises(InvalidTranscriptError):
        await ctxmw.acompletion(MODEL, [USER], save_file=path, completion=FakeCompletion(text("x")))
    assert path.read_bytes() == data  # the later turns are all there


async def test_a_damaged_size_is_an_error_too(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    data = write(path, [USER, {"ctxmw": "edit", "ops": [[1, 0, 1]], "bytes": 3}, AGAIN, ANSWER2])
    with pytest.raises(InvalidTranscriptError, match="line 2 "):
        await TranscriptFile(path).load()
    assert path.read_bytes() == data


async def test_an_earlier_versions_record_short_of_lines_is_damage_unless_the_end_is_torn(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.jsonl"
    edit = {"ctxmw": "edit", "ops": [[1, 0, 5]]}  # no "bytes": written by an earlier version
    data = write(path, [USER, edit, AGAIN, ANSWER2])
    with pytest.raises(InvalidTranscriptError, match="line 2 "):
        await TranscriptFile(path).load()
    assert path.read_bytes() == data
    path.write_bytes(data + b'{"role": "user", "con')  # a crash cut the write mid-line
    assert await TranscriptFile(path).load() == [USER]


@pytest.mark.parametrize(
    "content",
    [b"hello world\n", b"hello world", b'{"session": "s", "model": "m"}\n', b"[1, 2]\n"],
    ids=["text", "text-no-newline", "a-ledger-line", "json-list"],
)
@pytest.mark.parametrize("how", ["acompletion", "session"])
async def test_a_file_that_is_not_a_save_file_is_never_written(
    tmp_path: Path, content: bytes, how: str
) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    fake = FakeCompletion(text("x"))
    with pytest.raises(InvalidSaveFileError) as caught:
        await one_call(path, fake, how)
    assert repr(str(path)) in str(caught.value)
    assert "not a ctxmw transcript" in str(caught.value)
    assert path.read_bytes() == content
    assert os.listdir(tmp_path) == ["notes.txt"]  # no lock file left
    assert fake.calls == []


async def one_call(path: Path, fake: FakeCompletion, how: str) -> object:
    if how == "session":
        return await ctxmw.Session(MODEL, save_file=path, completion=fake).ask("?")
    return await ctxmw.acompletion(MODEL, [USER], save_file=path, completion=fake)


async def test_a_torn_first_write_is_still_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    path.write_bytes(b'{"role": "user", "cont')  # ctxmw's first write, cut short
    await ctxmw.acompletion(MODEL, [USER], save_file=path, completion=FakeCompletion(text("2")))
    assert [json.loads(x)["role"] for x in path.read_bytes().splitlines()] == ["user", "assistant"]


def test_every_record_ctxmw_writes_states_the_size_of_its_lines() -> None:
    edit = Edit(((1, 1, 1),), (ANSWER2,))
    data = encode_lines(
        [ASKS, RESULT, ANSWER], edit=edit, ours=[True, True], blocks=[(2, Readbacks((ASKS,)))]
    )
    lines = data.splitlines(keepends=True)
    records = [(n, json.loads(line)) for n, line in enumerate(lines) if b'"ctxmw"' in line]
    assert [r["ctxmw"] for _, r in records] == ["edit", "tool_loop", "readback"]
    for n, record in records:
        count = record.get("count", 1)  # the edit inserts one line
        assert record["bytes"] == sum(map(len, lines[n + 1 : n + 1 + count]))
