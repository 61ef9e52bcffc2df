"""A save_file damaged in the middle: an error naming the line, and nothing ever truncated.

Only the end of the file can hold a torn write (the last write, cut short); a record whose
count runs past lines that cannot be its own is damage, wherever it is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ctxmw
from ctxmw.errors import InvalidTranscriptError
from ctxmw.runtime.transcript import TranscriptFile, dump_line
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
    loop = {"ctxmw": "tool_loop", "count": 2}
    write(path, [USER, ANSWER, AGAIN, loop, ASKS])  # the write stopped after the call
    file = TranscriptFile(path)
    assert await file.load() == [USER, ANSWER, AGAIN]
    await file.append([ANSWER2])
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert lines == [USER, ANSWER, AGAIN, ANSWER2]
