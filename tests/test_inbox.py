"""``ctxmw.inbox``: the path rule, the writers, the listing, the public surface."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

import ctxmw
from ctxmw import inbox as inbox_module
from ctxmw.errors import SettingsError, UsageError
from ctxmw.inbox import abort, deliver, inbox_dir, inbox_removed_dir, list_inbox
from ctxmw.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
DELIVERED_NAME = re.compile(r"\d{20}_\d+_\d{6}")


@pytest.fixture
def save_file(tmp_path: Path) -> Path:
    return tmp_path / "agent.jsonl"


@pytest.mark.parametrize(
    ("save", "inbox", "removed"),
    [
        (
            "dir/x.files/agent.jsonl",
            "dir/x.files/agent.jsonl.inbox",
            "dir/x.files/agent.jsonl.inbox_removed",
        ),
        ("dir/a.b.jsonl", "dir/a.b.jsonl.inbox", "dir/a.b.jsonl.inbox_removed"),
        ("dir/agent", "dir/agent.inbox", "dir/agent.inbox_removed"),
        ("dir/agent.json", "dir/agent.json.inbox", "dir/agent.json.inbox_removed"),
    ],
)
def test_path_rule_follows_the_whole_file_name(save: str, inbox: str, removed: str) -> None:
    assert inbox_dir(save) == Path(inbox)
    assert inbox_removed_dir(Path(save)) == Path(removed)


def test_path_rule_refuses_a_save_file_without_a_name() -> None:
    with pytest.raises(UsageError, match="names no file"):
        inbox_dir("")


@pytest.mark.anyio
async def test_deliver_creates_the_inbox_and_writes_the_text(save_file: Path) -> None:
    path = await deliver(save_file, "héllo\n")
    assert path.parent == inbox_dir(save_file)
    assert DELIVERED_NAME.fullmatch(path.name)
    assert path.read_bytes() == "héllo\n".encode()
    assert sorted(p.name for p in save_file.parent.iterdir()) == ["agent.jsonl.inbox"]


@pytest.mark.anyio
async def test_deliver_appends_the_name_label(save_file: Path) -> None:
    path = await deliver(save_file, "x", name="report.md")
    assert path.name.endswith("_report.md")
    assert DELIVERED_NAME.fullmatch(path.name.removesuffix("_report.md"))


@pytest.mark.anyio
async def test_deliver_names_sort_in_call_order(save_file: Path) -> None:
    paths = [await deliver(save_file, f"m{i}") for i in range(50)]
    assert sorted(paths, key=lambda p: os.fsencode(p.name)) == paths


@pytest.mark.anyio
async def test_deliver_order_survives_a_clock_stepping_back(
    save_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock: Iterator[int] = iter([3_000, 2_000, 1_000])
    monkeypatch.setattr(inbox_module, "_last_ns", 0)
    monkeypatch.setattr(inbox_module.time, "time_ns", lambda: next(clock))
    paths = [await deliver(save_file, f"m{i}") for i in range(3)]
    assert sorted(paths, key=lambda p: os.fsencode(p.name)) == paths


@pytest.mark.anyio
async def test_deliver_never_overwrites_a_taken_name(
    save_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stamps = iter(["same", "same", "fresh"])
    monkeypatch.setattr(inbox_module, "_stamp", lambda: next(stamps))
    first = await deliver(save_file, "first")
    second = await deliver(save_file, "second")
    assert (first.name, second.name) == ("same", "fresh")
    assert first.read_text() == "first"
    assert second.read_text() == "second"


@pytest.mark.anyio
async def test_deliver_leaves_no_temporary_files(save_file: Path) -> None:
    for i in range(5):
        await deliver(save_file, f"m{i}")
    assert not [p for p in inbox_dir(save_file).iterdir() if p.name.startswith(".")]


@pytest.mark.anyio
@pytest.mark.parametrize("text", ["", "  \n"])
async def test_deliver_refuses_blank_text(save_file: Path, text: str) -> None:
    with pytest.raises(UsageError, match="blank"):
        await deliver(save_file, text)
    assert not inbox_dir(save_file).exists()


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", "x" * 101, "sp ace"])
async def test_deliver_refuses_unsafe_names(save_file: Path, name: str) -> None:
    with pytest.raises(UsageError, match=re.escape(repr(name))):
        await deliver(save_file, "x", name=name)


@pytest.mark.anyio
async def test_deliver_refuses_a_missing_save_file_folder(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        await deliver(tmp_path / "nope" / "agent.jsonl", "x")
    assert not (tmp_path / "nope").exists()


@pytest.mark.anyio
async def test_abort_writes_a_file_named_abort(save_file: Path) -> None:
    path = await abort(save_file, "budget spent")
    assert path == inbox_dir(save_file) / "abort"
    assert path.read_text() == "budget spent"


@pytest.mark.anyio
async def test_abort_keeps_the_first_pending_reason(
    save_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await abort(save_file, "first")
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        path = await abort(save_file, "second")
    assert path.read_text() == "first"
    assert "already pending" in caplog.text
    assert [p.name for p in inbox_dir(save_file).iterdir()] == ["abort"]


@pytest.mark.anyio
async def test_written_abort_stops_the_strategy(save_file: Path) -> None:
    await deliver(save_file, "seen first")
    await abort(save_file, "stop here")
    with pytest.raises(ctxmw.Aborted, match="stop here"):
        await ctxmw.prepare_prompt([], "inbox", save_file=save_file)


@pytest.mark.anyio
async def test_list_inbox_shows_pending_then_delivered(save_file: Path) -> None:
    first = await deliver(save_file, "one")
    await ctxmw.prepare_prompt([], "inbox", save_file=save_file)
    second = await deliver(save_file, "three!")
    os.utime(second, (1_700_000_000, 1_700_000_000))
    (inbox_dir(save_file) / ".tmp").write_text("in progress")
    entries = await list_inbox(save_file)
    assert [(e.name, e.delivered, e.size) for e in entries] == [
        (second.name, False, 6),
        (first.name, True, 3),
    ]
    assert entries[0].path == second
    assert entries[1].path == inbox_removed_dir(save_file) / first.name
    assert entries[0].written == datetime.fromtimestamp(1_700_000_000, tz=UTC)


@pytest.mark.anyio
async def test_list_inbox_of_nothing_is_empty_and_creates_nothing(save_file: Path) -> None:
    assert await list_inbox(save_file) == []
    assert list(save_file.parent.iterdir()) == []


def test_inbox_module_is_public_and_not_shadowed() -> None:
    assert ctxmw.inbox is inbox_module
    assert ctxmw.inbox.deliver is deliver
    assert "inbox" in ctxmw.__all__
    assert ctxmw.__all__ == sorted(ctxmw.__all__)
    assert "inbox" in {info.name for info in ctxmw.list_strategies()}


def test_inbox_settings_defaults_and_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings()
    assert settings.inbox_max_bytes == 1_048_576
    assert settings.inbox_persist is False
    monkeypatch.setenv("CTXMW_INBOX_MAX_BYTES", "-1")
    with pytest.raises(SettingsError, match="CTXMW_INBOX_MAX_BYTES"):
        Settings()


def test_inbox_abort_example_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "inbox_abort.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Aborted" in done.stdout
