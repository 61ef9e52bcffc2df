"""A new user's drop-in calls, with no save_file and no session id: measured, logged, recorded.

The promise of the Quick start: call ``ctxmw.acompletion`` where ``litellm.acompletion`` was
called and the cache telemetry works; consecutive calls of one conversation are compared with
each other (found by their head, in this process), their records go to the default ledger, and
``ctxmw stats`` with no argument prints them.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

import ctxmw
from ctxmw.cli import main
from ctxmw.runtime import _heads, wrapper
from ctxmw.runtime._heads import HeadThreads
from ctxmw.runtime.conversations import Conversations
from ctxmw.telemetry.default_ledger import DEFAULT_LEDGER_NAME, state_dir
from ctxmw.testing import FakeCompletion, text, usage

pytestmark = pytest.mark.anyio

SYSTEM = {"role": "system", "content": "You review code. " + "Be precise and brief. " * 300}


def reply(cached: int) -> Any:
    return text("ok", usage=usage(1900, 5, cached_tokens=cached))


def ledger_records() -> list[dict[str, Any]]:
    path = state_dir() / DEFAULT_LEDGER_NAME
    return [json.loads(line) for line in path.read_text().splitlines()]


def info_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ctxmw" and r.levelno == 20]


async def three_calls(fake: FakeCompletion, opening: str = "Review wrapper.py") -> None:
    history: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": opening}]
    for n in range(3):
        await ctxmw.acompletion("openai/gpt-4o", history, completion=fake)
        history = [*history, {"role": "assistant", "content": f"point {n}"}]
        history.append({"role": "user", "content": f"and then {n}?"})


async def test_three_drop_in_calls_are_measured_logged_and_recorded(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeCompletion(reply(0), reply(1792), reply(1792))
    with caplog.at_level(logging.INFO, logger="ctxmw"):
        await three_calls(fake)
    calls = [line for line in info_lines(caplog) if line.startswith("ctxmw call ")]
    assert len(calls) == 3
    expected = [int(line.split(" expected=")[1].split()[0]) for line in calls]
    assert expected[0] == 0
    assert min(expected[1:]) > 0
    assert " hit=" in calls[2]
    records = ledger_records()
    assert [r["call"] for r in records] == [1, 2, 3]
    assert len({r["session"] for r in records}) == 1
    assert [r["bust"] for r in records] == [None, None, None]
    assert await anyio.to_thread.run_sync(main, ["stats"]) == 0
    out = capsys.readouterr().out
    row = next(line.split() for line in out.splitlines() if line.startswith("head-"))
    assert row[1:3] == ["openai/gpt-4o", "3"]
    assert row[5] == f"{sum(r['expected_cached_tokens'] for r in records):,}"


async def test_the_first_call_of_the_process_says_where_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="ctxmw"):
        await three_calls(FakeCompletion(reply(0), reply(1792), reply(1792)))
    notes = [line for line in info_lines(caplog) if line.startswith("ctxmw telemetry:")]
    assert len(notes) == 1
    assert str(state_dir() / DEFAULT_LEDGER_NAME) in notes[0]
    assert "CTXMW_DEFAULT_LEDGER=false" in notes[0]


async def test_the_setting_turns_the_default_ledger_off(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CTXMW_DEFAULT_LEDGER", "false")
    await three_calls(FakeCompletion(reply(0), reply(1792), reply(1792)))
    assert not (state_dir() / DEFAULT_LEDGER_NAME).exists()
    assert await anyio.to_thread.run_sync(main, ["stats"]) == 2
    assert "does not exist yet" in capsys.readouterr().err


async def test_a_save_file_keeps_its_own_ledger_and_not_the_default(tmp_path: Path) -> None:
    fake = FakeCompletion(reply(0))
    await ctxmw.acompletion("openai/gpt-4o", [SYSTEM], completion=fake, save_file=tmp_path / "a")
    assert (tmp_path / "a.ledger.jsonl").exists()
    assert not (state_dir() / DEFAULT_LEDGER_NAME).exists()


async def test_an_explicit_session_without_a_save_file_goes_to_the_default_ledger() -> None:
    await ctxmw.acompletion(
        "openai/gpt-4o", [SYSTEM], completion=FakeCompletion(reply(0)), session="s1"
    )
    assert [r["session"] for r in ledger_records()] == ["s1"]


async def test_two_conversations_sharing_a_head_are_two_sessions_without_made_up_busts() -> None:
    """Two runs of one task open with the same words: each run is its own session, and neither
    is measured against the other's payload (the ledger would show a bust every call)."""
    fake = FakeCompletion(*[reply(0)] * 6)
    one: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": "Review wrapper.py"}]
    two = list(one)
    for n in range(3):  # interleaved, as a batch of evaluations runs them
        await ctxmw.acompletion("openai/gpt-4o", one, completion=fake)
        await ctxmw.acompletion("openai/gpt-4o", two, completion=fake)
        one = [*one, {"role": "assistant", "content": f"A{n}"}, {"role": "user", "content": "go"}]
        two = [*two, {"role": "assistant", "content": f"B{n}"}, {"role": "user", "content": "go"}]
    records = ledger_records()
    sessions = {r["session"] for r in records}
    assert len(sessions) == 2
    assert [r["bust"] for r in records] == [None] * 6
    for session in sessions:
        numbers = [r["call"] for r in records if r["session"] == session]
        assert numbers == list(range(1, len(numbers) + 1))
    # Their first calls are the same payload, indistinguishable from a retry: counted once in
    # the first session, which is what a provider's cache saw too (no bust either way).


async def test_concurrent_conversations_with_one_head_never_share_a_recorder() -> None:
    fake = FakeCompletion(*[reply(0)] * 8)
    base: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": "Review wrapper.py"}]

    async def run(tag: str) -> None:
        history = list(base)
        for n in range(2):
            await ctxmw.acompletion("openai/gpt-4o", history, completion=fake)
            history = [*history, {"role": "assistant", "content": f"{tag}{n}"}]

    async with anyio.create_task_group() as tg:
        for tag in "ABCD":
            tg.start_soon(run, tag)
    assert all(r["bust"] is None for r in ledger_records())


async def test_the_head_session_is_scoped_to_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    await ctxmw.acompletion("openai/gpt-4o", [SYSTEM], completion=FakeCompletion(reply(0)))
    # another process: its own registry and pid, the same head, the same default ledger
    monkeypatch.setattr(wrapper, "_heads", HeadThreads())
    monkeypatch.setattr(wrapper, "_conversations", Conversations())
    monkeypatch.setattr(os, "getpid", lambda: 999_999)
    await ctxmw.acompletion("openai/gpt-4o", [SYSTEM], completion=FakeCompletion(reply(0)))
    first, second = (r["session"] for r in ledger_records())
    assert first.startswith("head-")
    assert second.startswith(first.split("@")[0] + "@")
    assert first != second
    assert "@999999." in second
    assert _heads.process_tag().startswith("999999.")


async def test_a_mock_response_usage_is_not_reported_as_the_providers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """litellm's mock_response makes up its usage (a fixed prompt count): the record says
    not reported (a local count, marked estimated), not 300 prompt tokens against 1,900."""
    with caplog.at_level(logging.INFO, logger="ctxmw"):
        await ctxmw.acompletion("openai/gpt-4o", [SYSTEM], mock_response="fine")
    (record,) = ledger_records()
    assert record["usage_estimated"] is True
    assert record["cache_read_tokens"] is None
    assert record["prompt_tokens"] == record["prompt_tokens_local"] > 1000
    (line,) = [x for x in info_lines(caplog) if x.startswith("ctxmw call ")]
    assert f"prompt={record['prompt_tokens']}~ read=null" in line
