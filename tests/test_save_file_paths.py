"""A save_file path that cannot hold a transcript: a ctxmw error naming it, nothing left on disk."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import ctxmw
from ctxmw.errors import InvalidSaveFileError, UsageError
from ctxmw.testing import FakeCompletion, text

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"
HISTORY = [{"role": "user", "content": "hi"}]


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


async def call(save_file: Path, how: str) -> Any:
    fake = FakeCompletion(text("ok"))
    if how == "session":
        return await ctxmw.Session(MODEL, save_file=save_file, completion=fake).ask("hi")
    if how == "load":
        return await ctxmw.Session(MODEL, save_file=save_file, completion=fake).load()
    stream = how == "stream"
    return await ctxmw.acompletion(
        MODEL, HISTORY, save_file=save_file, completion=fake, stream=stream
    )


@pytest.mark.parametrize("how", ["acompletion", "session", "stream", "load"])
async def test_a_folder_as_save_file_is_refused_and_nothing_is_left(
    tmp_path: Path, how: str
) -> None:
    folder = tmp_path / "adir.jsonl"
    folder.mkdir()
    before = tree(tmp_path)
    with pytest.raises(InvalidSaveFileError) as caught:
        await call(folder, how)
    assert isinstance(caught.value, UsageError)
    assert repr(str(folder)) in str(caught.value)
    assert "it is a folder" in str(caught.value)
    assert tree(tmp_path) == before  # no adir.jsonl.lock


@pytest.mark.parametrize("how", ["acompletion", "session", "stream"])
async def test_a_save_file_whose_path_runs_through_a_file_is_named(
    tmp_path: Path, how: str
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    save_file = tmp_path / "notes.txt" / "runs" / "agent.jsonl"
    with pytest.raises(InvalidSaveFileError) as caught:
        await call(save_file, how)
    assert repr(str(save_file)) in str(caught.value)
    assert repr(str(tmp_path / "notes.txt")) in str(caught.value)
    assert tree(tmp_path) == ["notes.txt"]


async def test_a_folder_that_cannot_be_made_leaves_none_of_its_parents(tmp_path: Path) -> None:
    save_file = tmp_path / "new" / ("x" * 300) / "agent.jsonl"  # a name too long for a folder
    with pytest.raises(InvalidSaveFileError) as caught:
        await call(save_file, "acompletion")
    assert repr(str(save_file)) in str(caught.value)
    assert "cannot be made" in str(caught.value)
    assert tree(tmp_path) == []  # "new" was made, then removed again


async def test_a_fifo_as_save_file_is_refused_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "agent.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(InvalidSaveFileError, match="not a regular file"):
        await call(fifo, "acompletion")
    assert tree(tmp_path) == ["agent.jsonl"]
