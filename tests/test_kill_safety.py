"""Kill safety: a SIGKILLed tool loop leaves a save_file that loads and ends at a round boundary."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest

from ctxmw.runtime.transcript import TranscriptFile

AGENT = Path(__file__).with_name("_kill_agent.py")
TRIALS = 24
DELAY = 0.01  # seconds per model call: the 50 rounds take about 0.5 s


def _spawn(save_file: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(AGENT), str(save_file), str(DELAY)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _complete_run(tmp_path: Path) -> list[dict[str, object]]:
    save_file = tmp_path / "complete.jsonl"
    with _spawn(save_file) as proc:
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return anyio.run(TranscriptFile(save_file).load)


def _killed_run(save_file: Path, seed: int) -> int:
    with _spawn(save_file) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "started"
        # Kill at a random point of the loop, measured from its first saved round: on a loaded
        # machine the start alone may outlast a delay counted from "started".
        _wait_for(save_file, proc)
        time.sleep(random.Random(seed).uniform(0.0, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    return proc.returncode


def _wait_for(save_file: Path, proc: subprocess.Popen[str]) -> None:
    """Until the agent has saved its first round (or ended): polled, for 60 s at most."""
    for _ in range(6000):
        if save_file.exists() or proc.poll() is not None:
            return
        time.sleep(0.01)


def _round_boundaries(full: list[dict[str, object]]) -> set[int]:
    """Lengths a prefix may have: nothing, or everything up to the end of a round."""
    ends = {0, len(full)}
    for i, message in enumerate(full):
        if message.get("role") == "tool" and (i + 1 == len(full) or full[i + 1]["role"] != "tool"):
            ends.add(i + 1)
    return ends


@pytest.mark.slow
def test_sigkill_leaves_a_loadable_prefix_ending_at_a_round_boundary(tmp_path: Path) -> None:
    full = _complete_run(tmp_path)
    assert len(full) == 1 + 49 * 3 + 1  # user, 49 rounds of (assistant + 2 results), answer
    boundaries = _round_boundaries(full)
    paths = [tmp_path / f"killed{n}.jsonl" for n in range(TRIALS)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        codes = list(pool.map(_killed_run, paths, range(TRIALS)))
    lengths = []
    for path, code in zip(paths, codes, strict=True):
        loaded = anyio.run(TranscriptFile(path).load)
        assert len(loaded) in boundaries, f"{path.name}: {len(loaded)} messages"
        assert loaded == full[: len(loaded)]
        lengths.append((len(loaded), code))
    killed_mid_loop = [n for n, code in lengths if 0 < n < len(full) and code == -signal.SIGKILL]
    assert len(killed_mid_loop) >= TRIALS // 2, lengths  # the kills really hit the loop
