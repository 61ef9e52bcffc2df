"""The save_file lock: one writer at a time, stale locks of dead processes reclaimed."""

from __future__ import annotations

import logging
import multiprocessing
import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from ctxmw import SaveFileBusy
from ctxmw.runtime.lock import SaveFileLock, lock_path
from tests._lock import lock_is_free

pytestmark = pytest.mark.anyio


async def test_a_second_writer_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    first, second = SaveFileLock(save_file), SaveFileLock(save_file)
    await first.acquire()
    with pytest.raises(SaveFileBusy) as info:
        await second.acquire()
    assert info.value.holder == os.getpid()
    assert "agent.jsonl.lock" in str(info.value)
    await second.release()  # not held: a no-op, the first lock stays
    assert not lock_is_free(save_file)
    await first.release()
    assert lock_is_free(save_file)
    await second.acquire()
    await second.release()


async def test_lock_file_is_owner_only_and_names_its_holder_while_held(tmp_path: Path) -> None:
    lock = SaveFileLock(tmp_path / "agent.jsonl")
    await lock.acquire()
    assert lock.path.stat().st_mode & 0o777 == 0o600
    assert lock.path.read_text().split("\n")[:2] == [str(os.getpid()), socket.gethostname()]
    await lock.release()
    assert [p.name async for p in anyio.Path(tmp_path).iterdir()] == ["agent.jsonl.lock"]
    assert lock.path.read_bytes() == b""  # names nobody once given back


async def test_a_given_back_lock_is_taken_again_without_a_stale_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The file stays between turns (no directory update per turn); the next writer finds it
    # empty and takes it as free, and the same file serves every turn.
    save_file = tmp_path / "agent.jsonl"
    first = SaveFileLock(save_file)
    await first.acquire()
    inode = first.path.stat().st_ino
    await first.release()
    second = SaveFileLock(save_file)
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        await second.acquire()
    assert second.path.stat().st_ino == inode
    assert second.path.read_text().startswith(f"{os.getpid()}\n")
    assert caplog.records == []
    await second.release()
    assert lock_is_free(save_file)


async def test_a_lock_file_removed_between_turns_is_made_again(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    lock = SaveFileLock(save_file)
    await lock.acquire()
    await lock.release()
    lock.path.unlink()  # a human tidying the folder
    await lock.acquire()
    assert lock.path.read_text().startswith(f"{os.getpid()}\n")
    await lock.release()


async def test_a_stale_lock_of_a_dead_process_is_reclaimed(tmp_path: Path) -> None:
    dead = await anyio.run_process([sys.executable, "-c", "import os; print(os.getpid())"])
    save_file = tmp_path / "agent.jsonl"
    lock_path(save_file).write_text(f"{dead.stdout.decode().strip()}\n{socket.gethostname()}\n")
    lock = SaveFileLock(save_file)
    await lock.acquire()
    assert lock.path.read_text().startswith(f"{os.getpid()}\n")
    await lock.release()


async def test_a_lock_from_another_host_is_never_taken(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    lock_path(save_file).write_text("1\nsome-other-host\n")
    with pytest.raises(SaveFileBusy, match="process 1"):
        await SaveFileLock(save_file).acquire()


async def test_a_stale_lock_naming_our_own_pid_is_taken_back(tmp_path: Path) -> None:
    # A restarted agent in a container gets the dead one's pid: its stale lock names "us".
    save_file = tmp_path / "agent.jsonl"
    lock_path(save_file).write_text(f"{os.getpid()}\n{socket.gethostname()}\n")
    lock = SaveFileLock(save_file)
    await lock.acquire()
    assert lock.held
    await lock.release()
    assert lock_is_free(save_file)


def _racer(save_file: str, trials: int, barrier: Any, wins: Any, index: int) -> None:
    for trial in range(trials):
        lock, held = SaveFileLock(Path(save_file)), None
        barrier.wait()  # the parent wrote a stale lock: all racers go at once
        try:
            held = lock._acquire()  # the descriptor holding the lock (None before the fix)
        except SaveFileBusy:
            pass
        else:
            wins[trial * 3 + index] = 1
        barrier.wait()  # everyone has tried: the winner gives the lock back
        if isinstance(held, int):
            os.close(held)
        barrier.wait()


def test_racers_on_one_stale_lock_never_both_take_it(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    trials, racers = 150, 3
    save_file = tmp_path / "agent.jsonl"
    barrier = ctx.Barrier(racers + 1)
    wins = ctx.Array("i", trials * racers)
    procs = [
        ctx.Process(target=_racer, args=(str(save_file), trials, barrier, wins, i))
        for i in range(racers)
    ]
    for proc in procs:
        proc.start()
    for _ in range(trials):
        lock_path(save_file).write_text("999999999\n" + socket.gethostname() + "\n")  # stale
        for _ in range(3):
            barrier.wait()
    for proc in procs:
        proc.join(timeout=120)
    per_trial = [sum(wins[t * racers : (t + 1) * racers]) for t in range(trials)]
    assert per_trial == [1] * trials
