"""The inbox under faults and attack: a consumed note is never lost, an abort always stops.

Each test reproduces a fault an audit found (issue 10, items 10 and 11).
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import ctxmw
from ctxmw import Aborted, Session, Settings
from ctxmw.inbox import _files as inbox_files
from ctxmw.inbox import abort, deliver, inbox_dir, inbox_removed_dir, list_inbox
from ctxmw.testing import FakeCompletion, text

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
def save_file(tmp_path: Path) -> Path:
    return tmp_path / "agent.jsonl"


def contents(messages: list[dict[str, Any]]) -> list[Any]:
    return [m.get("content") for m in messages]


async def pending(save_file: Path) -> list[str]:
    return [e.name for e in await list_inbox(save_file) if not e.delivered]


async def next_prompt(save_file: Path) -> list[Any]:
    """What the next call on ``save_file`` sends (a fresh process would send the same)."""
    fake = FakeCompletion(text("ok"))
    await ctxmw.acompletion(MODEL, HELLO, save_file=save_file, completion=fake)
    return contents(fake.prompts[0])


# A consumed note is delivered again when its round does not commit.


async def test_a_note_whose_stream_breaks_is_delivered_again(save_file: Path) -> None:
    await deliver(save_file, "NOTE")

    async def breaking(**kwargs: Any) -> AsyncIterator[Any]:
        async def chunks() -> AsyncIterator[Any]:
            yield {"choices": []}
            raise ConnectionError("stream cut")

        return chunks()

    stream = await ctxmw.acompletion(
        MODEL, HELLO, save_file=save_file, stream=True, completion=breaking
    )
    with pytest.raises(ConnectionError):
        async for _ in stream:
            pass
    assert await next_prompt(save_file) == ["hello", "NOTE"]


async def test_a_note_whose_call_is_cancelled_is_delivered_again(save_file: Path) -> None:
    await deliver(save_file, "NOTE")
    called = anyio.Event()

    async def hangs(**kwargs: Any) -> Any:
        called.set()
        await anyio.sleep_forever()

    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: ctxmw.acompletion(MODEL, HELLO, save_file=save_file, completion=hangs)
        )
        await called.wait()
        group.cancel_scope.cancel()
    assert await pending(save_file) != []
    assert await next_prompt(save_file) == ["hello", "NOTE"]


async def test_a_session_call_cancelled_keeps_the_note_for_its_retry(save_file: Path) -> None:
    await deliver(save_file, "NOTE")
    called = anyio.Event()

    async def hangs(**kwargs: Any) -> Any:
        called.set()
        await anyio.sleep_forever()

    session = Session(MODEL, save_file=save_file, completion=hangs)
    async with anyio.create_task_group() as group:
        group.start_soon(session.ask, "hello")
        await called.wait()
        group.cancel_scope.cancel()
    session._completion = fake = FakeCompletion(text("ok"))
    await session.ask("hello")
    assert contents(fake.prompts[0]) == ["hello", "NOTE"]
    assert await pending(save_file) == []


AGENT = """
import sys, anyio, ctxmw

async def hangs(**kwargs):
    print("called", flush=True)
    await anyio.sleep_forever()

anyio.run(ctxmw.Session("openai/gpt-4o-mini", save_file=sys.argv[1], completion=hangs).ask, "hi")
"""


@pytest.mark.slow  # kills a child process mid-round
def test_a_note_whose_process_is_killed_before_the_round_commits_is_delivered_again(
    save_file: Path,
) -> None:
    anyio.run(deliver, save_file, "NOTE")
    with subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(AGENT), str(save_file)],
        stdout=subprocess.PIPE,
        text=True,
    ) as agent:
        assert agent.stdout is not None
        assert agent.stdout.readline().strip() == "called"
        agent.send_signal(signal.SIGKILL)
        agent.communicate(timeout=60)
    assert anyio.run(next_prompt, save_file) == ["hello", "NOTE"]
    assert anyio.run(pending, save_file) == []


async def test_a_committed_round_moves_its_note_to_the_removed_folder(save_file: Path) -> None:
    await deliver(save_file, "NOTE")
    assert await next_prompt(save_file) == ["hello", "NOTE"]
    assert [e.name for e in await list_inbox(save_file) if e.delivered] != []
    assert sorted(p.name for p in inbox_dir(save_file).iterdir()) == []


# An abort entry of any kind stops the agent.


def make_abort(kind: str, folder: Path, outside: Path) -> None:
    folder.mkdir(exist_ok=True)
    path = folder / "abort"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        outside.write_text("stop")
        path.symlink_to(outside)
    elif kind == "oversize":
        path.write_text("x" * 20)


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink", "oversize"])
async def test_an_abort_entry_of_any_kind_stops_the_agent(
    save_file: Path, tmp_path: Path, kind: str
) -> None:
    make_abort(kind, inbox_dir(save_file), tmp_path / "elsewhere.txt")
    assert "abort" in await pending(save_file)  # what `ctxmw inbox list` reports
    settings = Settings(inbox_max_bytes=10)
    with pytest.raises(Aborted) as caught:
        await ctxmw.prepare_prompt(HELLO, "inbox", save_file=save_file, settings=settings)
    assert str(inbox_dir(save_file) / "abort") in caught.value.reason
    assert "abort" not in await pending(save_file)  # consumed, like an abort file
    if kind == "symlink":
        assert (tmp_path / "elsewhere.txt").read_text() == "stop"  # never followed


async def test_an_abort_beyond_the_per_call_cap_still_stops(save_file: Path) -> None:
    for n in range(3):
        await deliver(save_file, f"note {n}")
    await abort(save_file, "halt")
    settings = Settings(inbox_max_messages=2)
    with pytest.raises(Aborted, match="halt"):
        await ctxmw.prepare_prompt(HELLO, "inbox", save_file=save_file, settings=settings)


# Hard links, modes, retention.


async def test_a_hard_link_to_a_file_outside_the_inbox_is_never_delivered(
    save_file: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("API_KEY=hunter2")
    inbox_dir(save_file).mkdir()
    os.link(secret, inbox_dir(save_file) / "note")
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        prompt = await ctxmw.prepare_prompt(HELLO, "inbox", save_file=save_file)
    assert prompt == HELLO
    assert "hard link" in caplog.text
    assert "hunter2" not in caplog.text
    assert secret.read_text() == "API_KEY=hunter2"


@pytest.fixture
def open_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("open_umask")
async def test_inbox_folders_and_files_are_owner_only_whatever_the_umask(save_file: Path) -> None:
    written = await deliver(save_file, "note")
    pending_abort = await abort(save_file, "stop")
    assert (mode(inbox_dir(save_file)), mode(written), mode(pending_abort)) == (0o700, 0o600, 0o600)
    (inbox_dir(save_file) / "00_by_hand").write_text("dropped by an operator")
    (inbox_dir(save_file) / "00_by_hand").chmod(0o644)
    with pytest.raises(Aborted):
        await ctxmw.prepare_prompt(HELLO, "inbox", save_file=save_file)
    removed = inbox_removed_dir(save_file)
    assert mode(removed) == 0o700
    assert {p.name: mode(p) for p in removed.iterdir()} == {
        written.name: 0o600,
        "abort": 0o600,
        "00_by_hand": 0o600,
    }


@pytest.mark.usefixtures("open_umask")
async def test_the_transcript_lock_and_ledger_are_owner_only_whatever_the_umask(
    save_file: Path,
) -> None:
    await Session(MODEL, save_file=save_file, completion=FakeCompletion(text("ok"))).ask("hi")
    ledger = save_file.with_name("agent.jsonl.ledger.jsonl")
    assert (mode(save_file), mode(ledger)) == (0o600, 0o600)


async def test_delivered_notes_are_kept_only_up_to_the_retention_bound(save_file: Path) -> None:
    names = [(await deliver(save_file, f"note {n}")).name for n in range(5)]
    settings = Settings(inbox_keep_delivered=2)
    prompt = await ctxmw.prepare_prompt([], "inbox", save_file=save_file, settings=settings)
    assert contents(prompt) == [f"note {n}" for n in range(5)]
    assert sorted(p.name for p in inbox_removed_dir(save_file).iterdir()) == names[-2:]


async def test_no_note_content_reaches_the_logs(
    save_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await abort(save_file, "first reason")
    with caplog.at_level(logging.DEBUG, logger="ctxmw"):
        await abort(save_file, "SECRET second reason")
    assert "already pending" in caplog.text
    assert "SECRET" not in caplog.text


# Order and volume.


async def test_at_most_inbox_max_messages_per_call_and_the_rest_wait_in_order(
    save_file: Path,
) -> None:
    for n in range(5):
        await deliver(save_file, f"note {n}")
    settings = Settings(inbox_max_messages=3)
    first = await ctxmw.prepare_prompt([], "inbox", save_file=save_file, settings=settings)
    second = await ctxmw.prepare_prompt([], "inbox", save_file=save_file, settings=settings)
    assert (contents(first), contents(second)) == (
        ["note 0", "note 1", "note 2"],
        ["note 3", "note 4"],
    )
    assert Settings().inbox_max_messages == 100


async def test_a_listing_that_misses_an_earlier_note_never_delivers_a_later_one_first(
    save_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A directory listing taken while a writer adds files is not a snapshot: a file linked
    # during it may be missed while one linked later is returned. Simulate one such listing.
    first = (await deliver(save_file, "first")).name
    await deliver(save_file, "second")
    real_scan, calls = inbox_files.scan, []

    def racy_scan(folder: Path) -> list[inbox_files.FileEntry]:
        calls.append(1)
        entries = real_scan(folder)
        return [e for e in entries if e.name != first] if len(calls) == 1 else entries

    monkeypatch.setattr(inbox_files, "scan", racy_scan)
    monkeypatch.setattr(
        importlib.import_module("ctxmw.strategies.inbox"), "scan", racy_scan, raising=False
    )
    seen: list[Any] = []
    for _ in range(2):
        seen += contents(await ctxmw.prepare_prompt([], "inbox", save_file=save_file))
    assert seen == ["first", "second"]
