"""Writers and readers at once: every message delivered exactly once, never half-written."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import anyio
import pytest

import ctxmw
from ctxmw.inbox import deliver, inbox_dir

pytestmark = pytest.mark.anyio

PAYLOAD = "0123456789abcdef" * 256  # 4 KiB: a torn write would show as a short or mixed text


def message(writer: int, index: int) -> str:
    return f"w{writer:02d} m{index:03d} {PAYLOAD} end w{writer:02d} m{index:03d}"


async def write_all(save_file: Path, writers: int, per_writer: int) -> None:
    async def one(writer: int) -> None:
        for index in range(per_writer):
            await deliver(save_file, message(writer, index))
            await anyio.sleep(0.03)  # spread the writes over many reader passes

    async with anyio.create_task_group() as tg:
        for writer in range(writers):
            tg.start_soon(one, writer)


async def read_until(save_file: Path, writing: anyio.Event, seen: list[list[str]]) -> None:
    """Apply the strategy in a loop until a pass begun after the writers finished finds nothing."""
    while True:
        finished = writing.is_set()
        prompt = await ctxmw.prepare_prompt([], "inbox", save_file=save_file)
        seen.append([m["content"] for m in prompt])
        if finished and not prompt:
            return


async def run(save_file: Path, writers: int, per_writer: int, readers: int) -> list[list[str]]:
    writing = anyio.Event()
    seen: list[list[str]] = []

    async def writers_then_flag() -> None:
        await write_all(save_file, writers, per_writer)
        writing.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(writers_then_flag)
        for _ in range(readers):
            tg.start_soon(read_until, save_file, writing, seen)
    return seen


def check_exactly_once(seen: list[list[str]], writers: int, per_writer: int) -> None:
    counts = Counter(text for batch in seen for text in batch)
    expected = {message(w, i) for w in range(writers) for i in range(per_writer)}
    assert set(counts) == expected  # nothing lost, nothing torn or foreign
    assert max(counts.values()) == 1  # nothing twice


def check_writer_order_within_each_batch(seen: list[list[str]]) -> None:
    for batch in seen:
        by_writer: dict[str, list[str]] = {}
        for text in batch:
            by_writer.setdefault(text[:3], []).append(text[4:8])
        assert all(order == sorted(order) for order in by_writer.values())


async def test_twenty_writers_one_reader_exactly_once(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    seen = await run(save_file, writers=20, per_writer=50, readers=1)
    check_exactly_once(seen, 20, 50)
    check_writer_order_within_each_batch(seen)
    assert len([batch for batch in seen if batch]) > 1  # the reader really ran alongside
    assert list(inbox_dir(save_file).iterdir()) == []


async def test_two_racing_readers_never_deliver_a_file_twice(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    seen = await run(save_file, writers=10, per_writer=30, readers=2)
    check_exactly_once(seen, 10, 30)
