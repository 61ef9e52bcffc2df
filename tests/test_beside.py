"""The files beside a save_file: named from its whole name, and found again under old names."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import ctxmw
from ctxmw._files import LEGACY, Beside
from ctxmw.inbox import deliver
from ctxmw.testing import FakeCompletion, text

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"


def beside_names(save_file: str) -> set[Path]:
    beside = Beside.of(save_file)
    return {beside.lock, *(beside.named(kind) for kind in LEGACY)}


def test_two_save_files_sharing_a_stem_share_no_beside_file() -> None:
    assert not beside_names("d/agent.jsonl") & beside_names("d/agent.json")
    assert not beside_names("d/agent.jsonl") & beside_names("d/agent")


def test_every_name_follows_the_whole_file_name() -> None:
    beside = Beside.of("d/agent.jsonl")
    assert [beside.named(kind).name for kind in LEGACY] == [
        "agent.jsonl.ledger.jsonl",
        "agent.jsonl.inbox",
        "agent.jsonl.inbox_removed",
        "agent.jsonl.offload",
    ]


async def ask(save_file: Path, question: str) -> FakeCompletion:
    fake = FakeCompletion(text("ok"))
    await ctxmw.Session(MODEL, save_file=save_file, completion=fake).ask(question)
    return fake


def user_texts(fake: FakeCompletion) -> list[str]:
    return [m["content"] for m in fake.prompts[-1] if m["role"] == "user"]


async def test_a_note_for_agent_json_never_reaches_agent_jsonl(tmp_path: Path) -> None:
    await deliver(tmp_path / "agent.json", "for the json agent")
    fake = await ask(tmp_path / "agent.jsonl", "hello")
    assert user_texts(fake) == ["hello"]
    fake = await ask(tmp_path / "agent.json", "hello")
    assert user_texts(fake) == ["hello", "for the json agent"]
    assert (tmp_path / "agent.json.ledger.jsonl").read_text().count("\n") == 1
    assert (tmp_path / "agent.jsonl.ledger.jsonl").read_text().count("\n") == 1


def old_files(folder: Path) -> None:
    """What an earlier version left beside agent.jsonl: a pending note, a ledger line."""
    (folder / "agent.inbox").mkdir(mode=0o700)
    (folder / "agent.inbox" / "00000000000000000001_1_000001").write_text("old note")
    (folder / "agent.ledger.jsonl").write_text(json.dumps({"session": "old"}) + "\n")


async def test_old_names_are_moved_on_the_first_turn(tmp_path: Path) -> None:
    old_files(tmp_path)
    fake = await ask(tmp_path / "agent.jsonl", "hello")
    assert user_texts(fake) == ["hello", "old note"]
    assert not (tmp_path / "agent.inbox").exists()
    assert not (tmp_path / "agent.ledger.jsonl").exists()
    ledger = (tmp_path / "agent.jsonl.ledger.jsonl").read_text().splitlines()
    assert json.loads(ledger[0]) == {"session": "old"}  # kept, and the new call after it
    assert len(ledger) == 2


async def test_a_note_in_the_new_inbox_and_one_in_the_old_are_both_delivered(
    tmp_path: Path,
) -> None:
    old_files(tmp_path)
    await deliver(tmp_path / "agent.jsonl", "new note")  # before the agent's first turn
    fake = await ask(tmp_path / "agent.jsonl", "hello")
    assert user_texts(fake) == ["hello", "old note", "new note"]
    assert not (tmp_path / "agent.inbox").exists()


async def test_old_names_another_save_file_may_own_are_left_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old_files(tmp_path)
    (tmp_path / "agent.json").write_text("")
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        fake = await ask(tmp_path / "agent.jsonl", "hello")
        await ask(tmp_path / "agent.jsonl", "again")
    assert user_texts(fake) == ["hello"]
    assert (tmp_path / "agent.inbox" / "00000000000000000001_1_000001").exists()
    warnings = [r.getMessage() for r in caplog.records if "earlier version" in r.getMessage()]
    assert len(warnings) == 1
    assert "agent.json may own them" in warnings[0]
    assert str(tmp_path / "agent.inbox") in warnings[0]


async def test_a_save_file_without_an_extension_keeps_its_names_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await deliver(tmp_path / "agent", "a note")
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        fake = await ask(tmp_path / "agent", "hello")
    assert user_texts(fake) == ["hello", "a note"]
    assert not [r for r in caplog.records if "ctxmw left" in r.getMessage()]
