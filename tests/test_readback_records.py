"""The save_file's ``readback`` records: their lines belong to no revision; a splice is kept by
its reply's call ids while that reply is in the conversation; a torn one is a torn tail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxmw.errors import InvalidTranscriptError
from ctxmw.runtime.transcript import TranscriptFile, dump_line

pytestmark = pytest.mark.anyio


def call(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


USER = {"role": "user", "content": "go"}
ROUND = [
    {"role": "assistant", "tool_calls": [call("rb1", "ctxmw_expand")]},
    {"role": "tool", "tool_call_id": "rb1", "content": "[…: lines 1-1 of 1]\n     1\tx"},
]
REPLY = {"role": "assistant", "content": "done"}
SPLICE = [
    {"role": "assistant", "tool_calls": [call("own1", "read"), call("rb2", "ctxmw_expand")]},
    {"role": "tool", "tool_call_id": "rb2", "content": "[…]\n     1\tx"},
]
OWN = {"role": "assistant", "tool_calls": [call("own1", "read")]}


def write(path: Path, lines: list[dict[str, Any]]) -> bytes:
    data = b"".join(dump_line(line) for line in lines)
    path.write_bytes(data)
    return data


async def test_read_back_lines_belong_to_no_revision_and_a_splice_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    write(
        path,
        [
            USER,
            {"ctxmw": "readback", "count": 2},
            *ROUND,
            REPLY,
            {"ctxmw": "readback", "count": 2, "splice": True},
            *SPLICE,
            OWN,
        ],
    )
    file = TranscriptFile(path)
    assert await file.load() == [USER, REPLY, OWN]
    (key,) = file.splices
    assert key == ("own1",)
    assert file.splices[key].calls == [call("rb2", "ctxmw_expand")]
    assert file.splices[key].answers == (SPLICE[1],)


async def test_a_splice_whose_reply_was_edited_away_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    splice = {"ctxmw": "readback", "count": 2, "splice": True}
    edit = {"ctxmw": "edit", "ops": [[1, 1, 1]]}
    write(path, [USER, splice, *SPLICE, OWN, edit, REPLY])
    file = TranscriptFile(path)
    assert await file.load() == [USER, REPLY]
    assert file.splices == {}


async def test_a_read_back_record_cut_by_a_torn_write_is_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    size = len(dump_line(ROUND[0])) + len(dump_line(ROUND[1]))  # as ctxmw writes it
    write(path, [USER, REPLY, {"ctxmw": "readback", "count": 2, "bytes": size}, ROUND[0]])
    assert await TranscriptFile(path).load() == [USER, REPLY]


async def test_a_read_back_record_over_lines_that_cannot_be_its_own_is_damage(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.jsonl"
    data = write(path, [USER, {"ctxmw": "readback", "count": 2}, *ROUND[:1], REPLY, REPLY])
    with pytest.raises(InvalidTranscriptError, match=r"line 2 of"):
        await TranscriptFile(path).load()
    assert path.read_bytes() == data
    assert json.loads(data.splitlines()[1]) == {"ctxmw": "readback", "count": 2}
