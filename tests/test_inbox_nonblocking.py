"""The inbox never does blocking file I/O on the event loop's thread.

A detector wraps the blocking file functions (``open``, ``os.stat``, ``os.scandir``, ...) so
that a call from the thread running the event loop is recorded and fails. The last test proves
the detector can fail: the same code with its worker-thread hops inlined is caught.
"""

from __future__ import annotations

import builtins
import functools
import io
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

import ctxmw
from ctxmw.inbox import abort, deliver, inbox_dir, list_inbox
from ctxmw.settings import Settings
from ctxmw.strategies.inbox import inbox
from ctxmw.types import StrategyContext

pytestmark = pytest.mark.anyio

OS_CALLS = [
    "open", "stat", "lstat", "fstat", "scandir", "listdir", "rename", "replace", "link",
    "unlink", "mkdir", "makedirs", "rmdir", "utime", "chmod", "fsync", "read", "write",
]  # fmt: skip


class BlockingCallOnLoop(AssertionError):
    """A blocking file function ran on the event loop's thread."""


class Detector:
    """Arm it around an await: any blocking file call from the loop's thread is a violation."""

    def __init__(self) -> None:
        self.loop_thread = threading.get_ident()
        self.armed = False
        self.violations: list[str] = []

    def wrap(self, name: str, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self.armed and threading.get_ident() == self.loop_thread:
                self.violations.append(f"{name}{args[:1]!r}")
                raise BlockingCallOnLoop(f"{name} called on the event loop thread")
            return func(*args, **kwargs)

        return guarded


@pytest.fixture
def detector(monkeypatch: pytest.MonkeyPatch) -> Detector:
    return install_detector(monkeypatch)


def install_detector(monkeypatch: pytest.MonkeyPatch) -> Detector:
    """A :class:`Detector` wrapping the blocking file functions (disarmed until :func:`armed`)."""
    found = Detector()
    for name in OS_CALLS:
        monkeypatch.setattr(os, name, found.wrap(f"os.{name}", getattr(os, name)))
    monkeypatch.setattr(builtins, "open", found.wrap("open", builtins.open))
    monkeypatch.setattr(io, "open", found.wrap("io.open", io.open))
    return found


async def armed(detector: Detector, call: Callable[[], Any]) -> Any:
    detector.armed = True
    try:
        return await call()
    finally:
        detector.armed = False


def populate(save_file: Path) -> None:
    folder = inbox_dir(save_file)
    folder.mkdir()
    for name in ("1_a", "2_b", "big"):
        (folder / name).write_text(name * (100 if name == "big" else 1))
    (folder / "sub").mkdir()
    (folder / ".dot").write_text("hidden")
    (folder / "link").symlink_to(folder / "1_a")
    (save_file.parent / "agent.jsonl.inbox_removed").mkdir()
    (save_file.parent / "agent.jsonl.inbox_removed" / "1_a").write_text("collides")


async def run_strategy(save_file: Path) -> list[Any]:
    ctx = StrategyContext(settings=Settings(inbox_max_bytes=50), save_file=save_file)
    return await inbox([], ctx)


async def test_strategy_does_no_blocking_io_on_the_loop(tmp_path: Path, detector: Detector) -> None:
    save_file = tmp_path / "agent.jsonl"
    populate(save_file)
    result = await armed(detector, lambda: run_strategy(save_file))
    assert [m["content"] for m in result] == ["1_a", "2_b"]
    assert detector.violations == []


async def test_abort_path_does_no_blocking_io_on_the_loop(
    tmp_path: Path, detector: Detector
) -> None:
    save_file = tmp_path / "agent.jsonl"
    populate(save_file)
    (inbox_dir(save_file) / "abort").write_text("stop")
    with pytest.raises(ctxmw.Aborted):
        await armed(detector, lambda: run_strategy(save_file))
    assert detector.violations == []


async def test_writers_and_listing_do_no_blocking_io_on_the_loop(
    tmp_path: Path, detector: Detector
) -> None:
    save_file = tmp_path / "agent.jsonl"
    await armed(detector, lambda: deliver(save_file, "hello", name="n"))
    await armed(detector, lambda: abort(save_file, "first"))
    await armed(detector, lambda: abort(save_file, "second"))
    entries = await armed(detector, lambda: list_inbox(save_file))
    assert len(entries) == 2
    assert detector.violations == []


async def test_detector_catches_the_same_code_run_on_the_loop(
    tmp_path: Path, detector: Detector, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def inline(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return func(*args)  # the deliberately blocking variant: no worker thread

    save_file = tmp_path / "agent.jsonl"
    populate(save_file)
    monkeypatch.setattr(anyio.to_thread, "run_sync", inline)
    with pytest.raises(BlockingCallOnLoop):
        await armed(detector, lambda: run_strategy(save_file))
    with pytest.raises(BlockingCallOnLoop):
        await armed(detector, lambda: deliver(save_file, "hello"))
    assert detector.violations
