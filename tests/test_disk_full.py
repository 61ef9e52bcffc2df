"""Fault tier: a disk that really fills up (``RLIMIT_FSIZE`` in a subprocess), and a short write
injected in-process, during an offload write and during a save_file append."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxmw import SaveFileWriteError, Session
from ctxmw.runtime.transcript import TranscriptFile
from ctxmw.testing import FakeCompletion, text, tool_calls

AGENT = Path(__file__).with_name("_disk_full_agent.py")
MODEL = "openai/gpt-4o-mini"


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """What each scenario of the subprocess saw (one run: litellm is imported once)."""
    folder = tmp_path_factory.mktemp("disk")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, str(AGENT), str(folder)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {line.pop("scenario"): line for line in lines}


@pytest.mark.slow
def test_a_stateless_offload_write_on_a_full_disk_fails_cleanly_and_recovers(
    seen: dict[str, dict[str, Any]],
) -> None:
    got = seen["stateless_offload"]
    assert "SaveFileWriteError" in got["error"]
    assert got["what"] == "offload record"
    assert got["path"].endswith(".json")
    assert got["store_after_failure"] == []  # no record, no temporary file
    assert got["save_file_after_failure"] is False  # the failed call wrote nothing
    assert got["reply"] == "read it"
    assert got["records"] == [True]  # once space is freed: one whole record


@pytest.mark.slow
def test_a_session_offload_write_on_a_full_disk_fails_cleanly_and_recovers(
    seen: dict[str, dict[str, Any]],
) -> None:
    got = seen["session_offload"]
    assert "SaveFileWriteError" in got["error"]
    assert got["what"] == "offload record"
    assert got["store_after_failure"] == []
    assert got["calls_after_failure"] == 0  # no prompt naming a handle that was not stored
    assert got["reply"] == "read it"
    assert got["sent_preview"] is True
    assert got["records"] == [True]
    assert got["saved"] == ["user", "assistant", "tool", "user", "assistant"]


@pytest.mark.slow
def test_a_save_file_append_on_a_full_disk_is_cut_back_and_saved_later(
    seen: dict[str, dict[str, Any]],
) -> None:
    got = seen["save_file_append"]
    assert got["error"] == "SaveFileWriteError"
    assert got["what"] == "save_file"
    assert got["unchanged_after_failure"] is True
    assert got["in_memory"] == ["user", "assistant", "user", "assistant", "tool"]
    assert got["reply"] == "read it"
    assert got["tool_runs"] == 1
    assert got["saved"] == ["user", "assistant", "user", "assistant", "tool", "assistant"]


def read() -> str:
    """Read the log."""
    return "x" * 50_000


@pytest.mark.anyio
async def test_an_injected_short_append_is_cut_back_and_saved_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(text("hello"), tool_calls(("read", {})), text("read it"))
    session = Session(MODEL, save_file=save_file, tools=[read], completion=fake)
    await session.ask("Hello.")
    before = save_file.read_bytes()
    real, full = os.write, [1]

    def write(fd: int, data: Any) -> int:
        if full and os.readlink(f"/proc/self/fd/{fd}") == str(save_file):
            if len(data) < 1000:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(fd, bytes(data[:1000]))  # the disk takes 1000 bytes, then is full
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    with pytest.raises(SaveFileWriteError) as caught:
        await session.ask("Read the log.")
    assert caught.value.errno == errno.ENOSPC
    assert save_file.read_bytes() == before
    full.clear()
    await session.run()
    saved = await TranscriptFile(save_file).load()
    assert [m["role"] for m in saved] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
