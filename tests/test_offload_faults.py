"""The offload store under faults: a short write, a damaged record, a symlink, a dead writer's
temporary file, a huge argument echoed back."""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest

import ctxmw
from ctxmw import errors
from ctxmw.context.offload import FileResultStore, OffloadedResult, handle_for, store_dir
from ctxmw.context.readback import READBACK_TOOL_NAME, answer
from ctxmw.testing import FakeCompletion, text, tool_calls

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"
BIG = "".join(f"row {i:05d} secret-{i * 7}\n" for i in range(2000))  # about 46,000 characters
SETTINGS = {"offload_threshold": 500}


def read_log() -> str:
    """Read the server log."""
    return BIG


def handle_in(content: str) -> str:
    return content.split("[ctxmw offload ", 1)[1][:16]


def session(save_file: Path, *replies: Any) -> ctxmw.Session:
    fake = FakeCompletion(*replies)
    return ctxmw.Session(
        MODEL,
        save_file=save_file,
        tools=[read_log],
        completion=fake,
        prompt_strategies="none",
        offload=True,
        settings=SETTINGS,
    )


def fake_of(s: ctxmw.Session) -> FakeCompletion:
    fake = s._completion
    assert isinstance(fake, FakeCompletion)
    return fake


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def short_writes_into(folder: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Writes into ``folder`` write half of what they are asked, then fail as a full disk does.

    Returns a switch: clear it to free the space.
    """
    real, full = os.write, [1]

    def write(fd: int, data: Any) -> int:
        if full and str(folder) in os.readlink(f"/proc/self/fd/{fd}"):
            if len(data) < 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(fd, bytes(data[: len(data) // 2]))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    return full


async def test_a_short_record_write_raises_naming_the_record_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_file = tmp_path / "agent.jsonl"
    folder = store_dir(save_file)
    agent = session(save_file, tool_calls(("read_log", {})), text("read it"))
    full = short_writes_into(folder, monkeypatch)
    with pytest.raises(errors.SaveFileWriteError) as caught:
        await agent.ask("Read the log.")
    handle = handle_for(agent.messages[1]["tool_calls"][0]["id"], BIG)
    assert str(folder / f"{handle}.json") in str(caught.value)
    assert caught.value.what == "offload record"
    assert caught.value.errno == errno.ENOSPC
    assert leftovers(folder) == []  # no record, no temporary file
    assert len(fake_of(agent).calls) == 1  # the prompt naming the handle was never sent
    full.clear()
    reply = await agent.run()
    assert reply.choices[0].message.content == "read it"
    sent = fake_of(agent).calls[-1]["messages"][-1]["content"]
    assert handle_in(sent) == handle
    assert leftovers(folder) == [f"{handle}.json"]
    assert json.loads((folder / f"{handle}.json").read_text())["content"] == BIG


async def first_turn(save_file: Path) -> str:
    """One turn that offloads the log; returns its handle."""
    agent = session(save_file, tool_calls(("read_log", {})), text("read it"))
    await agent.ask("Read the log.")
    return handle_in(fake_of(agent).calls[-1]["messages"][-1]["content"])


def damage(record: Path) -> None:
    """Cut a record short, as a write on a full disk that nobody checked did."""
    data = record.read_bytes()
    record.write_bytes(data[: len(data) // 2])


async def test_a_damaged_record_is_reported_once_and_the_conversation_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    save_file = tmp_path / "agent.jsonl"
    handle = await first_turn(save_file)
    record = store_dir(save_file) / f"{handle}.json"
    damage(record)
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        for question in ("And now?", "And then?"):
            agent = session(save_file, text("fine"))
            reply = await agent.ask(question)
            assert reply.choices[0].message.content == "fine"
    warnings = [r for r in caplog.records if "damaged" in r.getMessage()]
    assert len(warnings) == 1
    assert str(record) in warnings[0].getMessage()
    assert "secret-" not in caplog.text  # never the content
    # The strategy wrote the original again from the transcript: readable back, whole.
    assert json.loads(record.read_text())["content"] == BIG
    assert (record.parent / f".{handle}.json.damaged").exists()  # kept for inspection


async def test_a_damaged_record_never_hides_the_original_the_conversation_holds(
    tmp_path: Path,
) -> None:
    save_file = tmp_path / "agent.jsonl"
    damaged: list[str] = []

    def expand_after_damage(call: dict[str, Any]) -> Any:
        handle = handle_in(call["messages"][-1]["content"])
        damage(store_dir(save_file) / f"{handle}.json")
        damaged.append(handle)
        return tool_calls((READBACK_TOOL_NAME, {"handle": handle, "offset": 0, "limit": 50}))

    agent = session(save_file, tool_calls(("read_log", {})), expand_after_damage, text("ok"))
    await agent.ask("Read the log.")
    reply = fake_of(agent).calls[-1]["messages"][-1]
    assert reply["role"] == "tool"
    assert reply["content"].endswith("\n" + BIG[:50])  # from the transcript, which keeps it
    # Without the conversation the damaged record is read as missing, and the model told so.
    store = FileResultStore(store_dir(save_file))
    gone = await answer(expand_call(json.dumps({"handle": damaged[0]})), [], store=store)
    assert "no longer in the conversation" in gone["content"]
    assert "secret-" not in gone["content"]


def outside_record(tmp_path: Path) -> OffloadedResult:
    """A well-formed record somewhere outside the store (what a planted link points to)."""
    record = OffloadedResult(handle_for("c1", "private"), "c1", "read", "private", "preview")
    (tmp_path / "elsewhere.json").write_bytes(record.to_json())
    return record


async def test_a_symlink_in_the_store_is_never_followed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    record = outside_record(tmp_path)
    store = FileResultStore(tmp_path / "store")
    (tmp_path / "store").mkdir(mode=0o700)
    link = tmp_path / "store" / f"{record.handle}.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        assert await store.get(record.handle) is None
    assert "symbolic link" in caplog.text


async def test_a_put_replaces_a_planted_symlink_and_leaves_its_target_alone(
    tmp_path: Path,
) -> None:
    record = outside_record(tmp_path)
    before = (tmp_path / "elsewhere.json").read_bytes()
    (tmp_path / "store").mkdir(mode=0o700)
    link = tmp_path / "store" / f"{record.handle}.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    mine = OffloadedResult(record.handle, "c1", "read", "private", "mine")
    await FileResultStore(tmp_path / "store").put(mine)
    assert not link.is_symlink()
    assert json.loads(link.read_text())["preview"] == "mine"
    assert (tmp_path / "elsewhere.json").read_bytes() == before


def aged(path: Path, seconds: float) -> Path:
    path.write_bytes(b'{"handle": "cut')
    now = path.stat().st_mtime
    os.utime(path, (now - seconds, now - seconds))
    return path


async def test_a_dead_writers_temporary_file_is_removed_and_a_live_ones_kept(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "store"
    folder.mkdir(mode=0o700)
    dead = aged(folder / ".dead.tmp", 2 * 3600)
    live = aged(folder / ".live.tmp", 0)
    record = OffloadedResult(handle_for("c1", "x"), "c1", "read", "x", "preview")
    await FileResultStore(folder).put(record)
    assert not dead.exists()
    assert live.exists()
    assert (folder / f"{record.handle}.json").exists()


def expand_call(arguments: str) -> dict[str, Any]:
    return {
        "id": "c9",
        "type": "function",
        "function": {"name": READBACK_TOOL_NAME, "arguments": arguments},
    }


STORED = OffloadedResult(handle_for("c1", "x" * 100), "c1", "read", "x" * 100, "preview")
HUGE = "9" * 5_000_000


@pytest.mark.parametrize(
    "arguments",
    [
        json.dumps({"handle": HUGE}),
        json.dumps({"handle": STORED.handle, "offset": HUGE}),
        json.dumps({"handle": STORED.handle, "offset": 0, "limit": HUGE}),
        "[" * 5_000_000,
    ],
    ids=["handle", "offset", "limit", "not-json"],
)
async def test_expand_never_echoes_a_huge_argument_back(arguments: str, tmp_path: Path) -> None:
    store = FileResultStore(tmp_path / "store")
    await store.put(STORED)
    reply = await answer(expand_call(arguments), [], store=store)
    assert reply["content"].startswith("Error: ")
    assert len(reply["content"]) < 600


async def test_the_save_files_folders_are_owner_only_under_umask_0(tmp_path: Path) -> None:
    save_file = tmp_path / "runs" / "today" / "agent.jsonl"
    agent = session(save_file, tool_calls(("read_log", {})), text("read it"))
    existing = stat.S_IMODE(os.stat(tmp_path).st_mode)
    old = os.umask(0)
    try:
        await agent.ask("Read the log.")
    finally:
        os.umask(old)
    for folder in (tmp_path / "runs", tmp_path / "runs" / "today", store_dir(save_file)):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700, folder
    assert stat.S_IMODE(os.stat(tmp_path).st_mode) == existing  # not ctxmw's: left alone
