"""A stateless call whose round cannot be written: the paid answer is kept, never bought twice.

``ctxmw.acompletion`` has no session to call ``run()`` on: the error carries the answer
(``.response``), and the next call with the same save_file saves it, whether it continues the
conversation with the answer or repeats the call (which then gets the answer without a model
call).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ctxmw
from ctxmw.errors import SaveFileWriteError
from ctxmw.testing import FakeCompletion, text
from tests._disk import full_disk

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"
QUESTION = {"role": "user", "content": "What is 2 + 2?"}


def saved(save_file: Path) -> list[tuple[str, Any]]:
    lines = [json.loads(line) for line in save_file.read_text().splitlines()]
    return [(m["role"], m["content"]) for m in lines]


async def failed_call(save_file: Path, fake: FakeCompletion) -> SaveFileWriteError:
    with pytest.raises(SaveFileWriteError) as caught:
        await ctxmw.acompletion(MODEL, [QUESTION], save_file=save_file, completion=fake)
    return caught.value


async def test_the_error_tells_a_stateless_caller_what_to_do_and_carries_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_file = tmp_path / "agent.jsonl"
    full_disk(monkeypatch)
    error = await failed_call(save_file, FakeCompletion(text("4")))
    assert repr(str(save_file)) in str(error)
    assert "run() on the session" not in str(error)
    assert ".response" in str(error)
    assert error.response.choices[0].message.content == "4"
    assert save_file.read_bytes() == b""  # nothing half-written


async def test_continuing_with_the_answer_saves_it_and_asks_the_model_once_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(text("4"), text("6"))
    broken = full_disk(monkeypatch)
    error = await failed_call(save_file, fake)
    broken.clear()
    answer = error.response.choices[0].message
    follow_up = {"role": "user", "content": "And 3 + 3?"}
    history = [QUESTION, answer, follow_up]
    reply = await ctxmw.acompletion(MODEL, history, save_file=save_file, completion=fake)
    assert reply.choices[0].message.content == "6"
    assert len(fake.calls) == 2  # one call per answer
    assert saved(save_file) == [
        ("user", "What is 2 + 2?"),
        ("assistant", "4"),
        ("user", "And 3 + 3?"),
        ("assistant", "6"),
    ]


async def test_repeating_the_call_returns_the_kept_answer_without_a_model_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(text("4"))
    broken = full_disk(monkeypatch)
    first = await failed_call(save_file, fake)
    again = await failed_call(save_file, fake)  # the disk is still full: kept once more
    assert again.response is first.response
    broken.clear()
    reply = await ctxmw.acompletion(MODEL, [QUESTION], save_file=save_file, completion=fake)
    assert reply is first.response
    assert len(fake.calls) == 1  # paid once
    assert saved(save_file) == [("user", "What is 2 + 2?"), ("assistant", "4")]
    fake.queue(text("5"))  # the answer was saved: a later repeat is a new question
    reply = await ctxmw.acompletion(MODEL, [QUESTION], save_file=save_file, completion=fake)
    assert reply.choices[0].message.content == "5"
