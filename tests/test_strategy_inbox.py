"""The ``inbox`` strategy: the contract of strategies.md section 6, one behaviour per test."""

from __future__ import annotations

import importlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import pytest

import ctxmw
from ctxmw.inbox import inbox_dir, inbox_removed_dir
from ctxmw.settings import Settings
from ctxmw.strategies._chain import apply_strategies
from ctxmw.strategies.inbox import inbox
from ctxmw.types import Messages, StrategyContext

pytestmark = pytest.mark.anyio

# The package re-exports the function under the module's name; the module itself is here.
inbox_strategy_module = importlib.import_module("ctxmw.strategies.inbox")

BASE: Messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "go"}]
OLD_MTIME = 1_000_000_000


def ctx_for(save_file: Path | None, **settings: Any) -> StrategyContext:
    return StrategyContext(settings=Settings(**settings), save_file=save_file)


def drop(save_file: Path, name: str, data: str | bytes, *, mtime: int | None = None) -> Path:
    folder = inbox_dir(save_file)
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def added(result: Messages) -> list[Any]:
    return [m["content"] for m in result[len(BASE) :]]


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def save_file(tmp_path: Path) -> Path:
    return tmp_path / "agent.jsonl"


async def test_no_save_file_is_a_noop_that_creates_nothing(tmp_path: Path) -> None:
    result = await inbox(BASE, ctx_for(None))
    assert result is BASE
    assert tree(tmp_path) == []


async def test_missing_inbox_dir_is_a_noop_that_creates_nothing(save_file: Path) -> None:
    ctx = ctx_for(save_file)
    assert await inbox(BASE, ctx) is BASE
    assert tree(save_file.parent) == []
    assert "inbox" not in ctx.stats


@pytest.mark.parametrize(
    ("save_name", "inbox_name"),
    [
        ("x.files/agent.jsonl", "x.files/agent.jsonl.inbox"),
        ("a.b.jsonl", "a.b.jsonl.inbox"),
        ("agent", "agent.inbox"),
    ],
)
async def test_reads_the_inbox_named_by_the_path_rule(
    tmp_path: Path, save_name: str, inbox_name: str
) -> None:
    save_file = tmp_path / save_name
    save_file.parent.mkdir(exist_ok=True)
    (tmp_path / inbox_name).mkdir()
    (tmp_path / inbox_name / "m").write_text("hello")
    assert added(await inbox(BASE, ctx_for(save_file))) == ["hello"]


async def test_delivers_in_byte_order_of_names_and_moves_with_mtimes(save_file: Path) -> None:
    names = ["b_x", "é_x", "10_x", "a_x", "A_x", "2_x"]
    for name in names:
        drop(save_file, name, f"from {name}", mtime=OLD_MTIME)
    ctx = ctx_for(save_file)
    result = await inbox(BASE, ctx)
    order = ["10_x", "2_x", "A_x", "a_x", "b_x", "é_x"]
    assert added(result) == [f"from {name}" for name in order]
    assert result[-1] == {"role": "user", "content": "from é_x"}
    assert list(inbox_dir(save_file).iterdir()) == []
    removed = inbox_removed_dir(save_file)
    assert sorted(p.name for p in removed.iterdir()) == sorted(names)
    assert {(removed / n).stat().st_mtime for n in names} == {OLD_MTIME}


async def test_skips_and_leaves_directories_dotfiles_and_symlinks(save_file: Path) -> None:
    secret = save_file.parent / "secret.txt"
    secret.write_text("do not show")
    drop(save_file, "ok", "shown")
    folder = inbox_dir(save_file)
    (folder / "sub").mkdir()
    (folder / "sub" / "inner").write_text("nested")
    drop(save_file, ".hidden", "dotfile")
    (folder / "link").symlink_to(secret)
    (folder / "dangling").symlink_to(folder / "nowhere")
    result = await inbox(BASE, ctx_for(save_file))
    assert added(result) == ["shown"]
    assert sorted(p.name for p in folder.iterdir()) == [".hidden", "dangling", "link", "sub"]
    assert (folder / "link").is_symlink()
    assert secret.read_text() == "do not show"


async def test_consume_once_second_application_adds_nothing(save_file: Path) -> None:
    drop(save_file, "m", "once")
    first = await inbox(BASE, ctx_for(save_file))
    assert added(first) == ["once"]
    second = await inbox(BASE, ctx_for(save_file))
    assert second is BASE


@pytest.mark.parametrize(
    ("name", "existing", "expected"),
    [
        ("note.txt", ["note.txt", "note.1.txt"], "note.2.txt"),
        ("memo", ["memo"], "memo.1"),
        ("a.b.txt", ["a.b.txt"], "a.b.1.txt"),
    ],
)
async def test_collision_in_removed_dir_numbers_before_extension(
    save_file: Path, name: str, existing: list[str], expected: str
) -> None:
    removed = inbox_removed_dir(save_file)
    removed.mkdir()
    for old in existing:
        (removed / old).write_text(f"old {old}")
    drop(save_file, name, "new")
    assert added(await inbox(BASE, ctx_for(save_file))) == ["new"]
    assert (removed / expected).read_text() == "new"
    assert all((removed / old).read_text() == f"old {old}" for old in existing)


async def test_unreadable_file_is_skipped_and_others_delivered(
    save_file: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("a", "bad", "c"):
        drop(save_file, name, name)
    real_open = os.open

    def refusing_open(path: Any, *args: Any, **kwargs: Any) -> int:
        if Path(path).name == "bad":
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        result = await inbox(BASE, ctx_for(save_file))
    assert added(result) == ["a", "c"]
    assert (inbox_dir(save_file) / "bad").exists()
    assert "bad" in caplog.text
    assert "Permission denied" in caplog.text


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
async def test_unreadable_file_by_mode_is_skipped(save_file: Path) -> None:
    drop(save_file, "a", "a")
    drop(save_file, "bad", "bad").chmod(0)
    drop(save_file, "c", "c")
    assert added(await inbox(BASE, ctx_for(save_file))) == ["a", "c"]


async def test_abort_raises_consumes_before_and_leaves_after(save_file: Path) -> None:
    drop(save_file, "10_x", "before")
    drop(save_file, "abort", "  secret stop reason \n")
    drop(save_file, "b_x", "after")
    ctx = ctx_for(save_file)
    with pytest.raises(ctxmw.Aborted) as caught:
        await inbox(BASE, ctx)
    assert caught.value.reason == "secret stop reason"
    assert ctx.stats["inbox"]["files"] == ["10_x"]
    assert "secret" not in json.dumps(ctx.stats["inbox"]["delivered"])
    assert sorted(p.name for p in inbox_removed_dir(save_file).iterdir()) == ["10_x", "abort"]
    assert [p.name for p in inbox_dir(save_file).iterdir()] == ["b_x"]
    later = await inbox(BASE, ctx_for(save_file))
    assert added(later) == ["after"]


async def test_empty_abort_has_a_reason_naming_the_file(save_file: Path) -> None:
    drop(save_file, "abort", " \n")
    with pytest.raises(ctxmw.Aborted) as caught:
        await inbox(BASE, ctx_for(save_file))
    assert str(inbox_dir(save_file) / "abort") in caught.value.reason


async def test_aborted_is_not_wrapped_by_the_chain(save_file: Path) -> None:
    drop(save_file, "abort", "halt")
    with pytest.raises(ctxmw.Aborted, match="halt"):
        await ctxmw.prepare_prompt(BASE, "inbox", save_file=save_file)


@pytest.mark.parametrize("name", ["abort.txt", "Abort", "abort_", "xabort"])
async def test_names_close_to_abort_are_ordinary_messages(save_file: Path, name: str) -> None:
    drop(save_file, name, "just a message")
    assert added(await inbox(BASE, ctx_for(save_file))) == ["just a message"]


async def test_second_abort_still_aborts_when_removed_abort_exists(save_file: Path) -> None:
    drop(save_file, "abort", "first")
    with pytest.raises(ctxmw.Aborted):
        await inbox(BASE, ctx_for(save_file))
    drop(save_file, "abort", "second")
    with pytest.raises(ctxmw.Aborted) as caught:
        await inbox(BASE, ctx_for(save_file))
    assert caught.value.reason == "second"
    removed = inbox_removed_dir(save_file)
    assert (removed / "abort").read_text() == "first"
    assert (removed / "abort.1").read_text() == "second"


async def test_non_utf8_file_is_delivered_with_replacement(save_file: Path) -> None:
    drop(save_file, "m", b"caf\xe9 \xff ok")
    assert added(await inbox(BASE, ctx_for(save_file))) == ["caf\ufffd \ufffd ok"]


async def test_file_over_max_bytes_is_skipped_with_warning_and_left(
    save_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    drop(save_file, "big", "x" * 11)
    drop(save_file, "fits", "y" * 10)
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        result = await inbox(BASE, ctx_for(save_file, inbox_max_bytes=10))
    assert added(result) == ["y" * 10]
    assert (inbox_dir(save_file) / "big").read_text() == "x" * 11
    assert "big" in caplog.text
    assert "inbox_max_bytes=10" in caplog.text


async def test_blank_file_is_consumed_but_not_shown(save_file: Path) -> None:
    drop(save_file, "blank", "  \n")
    drop(save_file, "real", "text")
    assert added(await inbox(BASE, ctx_for(save_file))) == ["text"]
    assert not (inbox_dir(save_file) / "blank").exists()


async def test_reports_delivered_dicts_and_file_names_in_stats(save_file: Path) -> None:
    drop(save_file, "1_a", "one")
    drop(save_file, "2_b", "two")
    ctx = ctx_for(save_file)
    result = await inbox(BASE, ctx)
    report = ctx.stats["inbox"]
    assert report == {
        "delivered": [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
        "files": ["1_a", "2_b"],
    }
    assert all(a is b for a, b in zip(report["delivered"], result[len(BASE) :], strict=True))


async def test_input_is_not_mutated_and_kept_messages_are_the_same_objects(
    save_file: Path,
) -> None:
    messages = [dict(m) for m in BASE]
    before = json.dumps(messages)
    drop(save_file, "m", "new")
    result = await inbox(messages, ctx_for(save_file))
    assert json.dumps(messages) == before
    assert all(a is b for a, b in zip(result, messages, strict=False))


async def test_default_strategies_include_inbox(save_file: Path) -> None:
    assert await ctxmw.prepare_prompt(BASE) == BASE
    drop(save_file, "m", "from the operator")
    result = await ctxmw.prepare_prompt(BASE, save_file=save_file)
    assert result[-1] == {"role": "user", "content": "from the operator"}


def tool_transcript(calls: int) -> Messages:
    messages = list(BASE)
    for i in range(calls):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"out {i} " * 100})
    return messages


@pytest.mark.parametrize(
    "order",
    [["shorten_tools_epoch_increment", "inbox"], ["inbox", "shorten_tools_epoch_increment"]],
)
async def test_composes_with_epoch_shortening_in_both_orders(
    save_file: Path, order: list[str]
) -> None:
    transcript = tool_transcript(60)
    drop(save_file, "m", "operator note")
    result = await ctxmw.prepare_prompt(transcript, order, save_file=save_file)
    ctxmw.validate(result)
    notices = [m for m in result if "[Context note from ctxmw]" in str(m.get("content"))]
    assert len(notices) == 1
    assert result[-1] == {"role": "user", "content": "operator note"}


async def test_without_hard_links_collisions_are_still_numbered(
    save_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(*args: Any, **kwargs: Any) -> None:
        raise PermissionError(1, "Operation not permitted")  # as on filesystems without links

    removed = inbox_removed_dir(save_file)
    removed.mkdir()
    (removed / "note.txt").write_text("old")
    drop(save_file, "note.txt", "new")
    monkeypatch.setattr(os, "link", no_links)
    assert added(await inbox(BASE, ctx_for(save_file))) == ["new"]
    assert (removed / "note.txt").read_text() == "old"
    assert (removed / "note.1.txt").read_text() == "new"
    assert sorted(p.name for p in removed.iterdir()) == ["note.1.txt", "note.txt"]


async def test_keyboard_interrupt_is_not_swallowed_and_earlier_files_are_reported(
    save_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_take = inbox_strategy_module.take

    def interrupted(folder: Path, removed: Path, name: str, max_bytes: int) -> bytes:
        if name == "2_b":
            raise KeyboardInterrupt
        return real_take(folder, removed, name, max_bytes)

    drop(save_file, "1_a", "one")
    drop(save_file, "2_b", "two")
    monkeypatch.setattr(inbox_strategy_module, "take", interrupted)
    ctx = ctx_for(save_file)
    with pytest.raises(KeyboardInterrupt):
        await inbox(BASE, ctx)
    assert ctx.stats["inbox"]["files"] == ["1_a"]


async def test_cancellation_is_not_swallowed(
    save_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_take = inbox_strategy_module.take
    drop(save_file, "1_a", "one")
    drop(save_file, "2_b", "two")
    ctx = ctx_for(save_file)
    finished = False
    with anyio.CancelScope() as scope:

        def cancelling(folder: Path, removed: Path, name: str, max_bytes: int) -> bytes:
            anyio.from_thread.run_sync(scope.cancel)
            return real_take(folder, removed, name, max_bytes)

        monkeypatch.setattr(inbox_strategy_module, "take", cancelling)
        await inbox(BASE, ctx)
        finished = True
    assert scope.cancelled_caught
    assert not finished


async def test_twice_in_one_chain_reports_every_delivery(save_file: Path) -> None:
    def drop_another(messages: Messages, ctx: StrategyContext) -> Messages:
        drop(save_file, "later", "second")
        return messages

    drop(save_file, "early", "first")
    ctx = ctx_for(save_file)
    chain = [("inbox", inbox), ("drop", drop_another), ("inbox", inbox)]
    result = await apply_strategies(BASE, chain, ctx)
    assert added(result) == ["first", "second"]
    assert ctx.stats["inbox"]["files"] == ["early", "later"]
