"""The default ledger's place, permissions and rotation (ctxmw.telemetry.default_ledger)."""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxmw
from ctxmw.cli import main
from ctxmw.settings import Settings
from ctxmw.telemetry.default_ledger import (
    DEFAULT_LEDGER_NAME,
    OLD_LEDGER_NAME,
    RotatingLedger,
    default_ledger_path,
    default_ledgers,
    state_dir,
)
from ctxmw.testing import FakeCompletion, text


def test_the_state_folder_setting_wins(tmp_path: Path) -> None:
    assert state_dir(Settings(state_dir=str(tmp_path / "s"))) == tmp_path / "s"


def test_xdg_state_home_then_the_home_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir() == tmp_path / "xdg" / "ctxmw"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/is/ignored")  # the XDG spec says so
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert state_dir() == tmp_path / "home" / ".local" / "state" / "ctxmw"


def test_the_tests_never_point_at_the_real_home() -> None:
    assert Path.home() not in state_dir().parents


def test_the_setting_turns_it_off() -> None:
    assert default_ledger_path(Settings(default_ledger=False)) is None
    assert default_ledger_path(Settings(telemetry=False)) is None
    assert default_ledger_path() == state_dir() / DEFAULT_LEDGER_NAME


@pytest.fixture
def umask_zero() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def line(n: int, pad: int = 0) -> bytes:
    return (json.dumps({"session": "s", "call": n, "pad": "x" * pad}) + "\n").encode()


def test_owner_only_folder_and_file_even_under_umask_zero(tmp_path: Path, umask_zero: None) -> None:
    path = tmp_path / "state" / "deep" / DEFAULT_LEDGER_NAME
    RotatingLedger(path, 1 << 20).append_now(line(1))
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_rotated_by_size_keeping_one_older_file(tmp_path: Path, umask_zero: None) -> None:
    path = tmp_path / DEFAULT_LEDGER_NAME
    ledger = RotatingLedger(path, 4096)
    for n in range(1, 31):
        ledger.append_now(line(n, pad=300))  # about 340 bytes each: 12 fill 4,096
    old = tmp_path / OLD_LEDGER_NAME
    kept = [json.loads(x)["call"] for p in (old, path) for x in p.read_text().splitlines()]
    assert kept == list(range(kept[0], 31))  # nothing lost or reordered since the oldest kept
    assert kept[0] > 1  # the first file was rotated out twice
    assert path.stat().st_size < 4096
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_torn_last_line_stays_one_unreadable_line(tmp_path: Path) -> None:
    path = tmp_path / DEFAULT_LEDGER_NAME
    path.write_bytes(b'{"session": "s", "cal')  # a writer killed mid-line
    RotatingLedger(path, 1 << 20).append_now(line(2))
    assert path.read_bytes().splitlines()[1] == line(2).rstrip()


def test_a_file_rotated_by_another_process_is_not_written_to(tmp_path: Path) -> None:
    path = tmp_path / DEFAULT_LEDGER_NAME
    ledger = RotatingLedger(path, 1 << 20)
    ledger.append_now(line(1))
    path.rename(tmp_path / OLD_LEDGER_NAME)  # what the other process's rotation does
    ledger.append_now(line(2))
    assert path.read_bytes() == line(2)


def test_stats_with_no_argument_reads_the_older_file_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = state_dir()
    folder.mkdir(parents=True)
    record = {"session": "s", "model": "m", "prompt_tokens": 10, "cache_read_tokens": 0}
    (folder / OLD_LEDGER_NAME).write_text(json.dumps(record) + "\n")
    (folder / DEFAULT_LEDGER_NAME).write_text(json.dumps(record) + "\n")
    assert default_ledgers() == [folder / OLD_LEDGER_NAME, folder / DEFAULT_LEDGER_NAME]
    assert main(["stats"]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[:3] == ["s", "m", "2"]


def test_missing_parents_are_made_owner_only_even_under_umask_zero(
    tmp_path: Path, umask_zero: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir(mode=0o700)
    path = default_ledger_path()
    assert path is not None
    RotatingLedger(path, 1 << 20).append_now(line(1))
    made = [tmp_path / "home" / ".local", tmp_path / "home" / ".local" / "state", path.parent]
    assert [stat.S_IMODE(p.stat().st_mode) for p in made] == [0o700] * 3
    assert path.read_bytes() == line(1)


def refused(path: Path, caplog: pytest.LogCaptureFixture) -> str:
    """Append to the ledger at ``path``; the one warning it logged (the call itself went on)."""
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        RotatingLedger(path, 1 << 20).append_now(line(1))
        RotatingLedger(path, 1 << 20).append_now(line(2))
    messages = [r.getMessage() for r in caplog.records if "telemetry ledger" in r.getMessage()]
    assert len(messages) == 1, messages
    assert str(path) in messages[0]
    assert "CTXMW_STATE_DIR" in messages[0]
    assert "CTXMW_DEFAULT_LEDGER=false" in messages[0]
    return messages[0]


def test_a_folder_of_another_user_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.chown(folder, os.getuid() + 4242, -1)
    assert "belongs to user id" in refused(folder / DEFAULT_LEDGER_NAME, caplog)
    assert list(folder.iterdir()) == []


def test_a_folder_others_can_write_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    assert "writable by other users" in refused(folder / DEFAULT_LEDGER_NAME, caplog)
    assert list(folder.iterdir()) == []


def test_a_link_planted_in_the_folder_is_never_followed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    folder = tmp_path / "state"
    folder.mkdir(mode=0o700)
    (folder / DEFAULT_LEDGER_NAME).symlink_to(victim)
    refused(folder / DEFAULT_LEDGER_NAME, caplog)
    assert victim.read_bytes() == b"precious\n"


def test_a_folder_that_is_a_link_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "state").symlink_to(elsewhere)
    assert "symbolic link" in refused(tmp_path / "state" / DEFAULT_LEDGER_NAME, caplog)
    assert list(elsewhere.iterdir()) == []


@pytest.mark.anyio
async def test_an_unwritable_state_folder_is_one_warning_for_many_calls(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("CTXMW_STATE_DIR", str(tmp_path / "a-file" / "ctxmw"))  # cannot be made
    history: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        for n in range(4):
            fake = FakeCompletion(text(f"answer {n}"))
            await ctxmw.acompletion("openai/gpt-4o-mini", history, completion=fake)
            history += [
                {"role": "assistant", "content": f"answer {n}"},
                {"role": "user", "content": "?"},
            ]
    assert len(caplog.records) == 1, [r.getMessage() for r in caplog.records]
    (record,) = caplog.records
    assert record.exc_info is None  # no traceback
    assert str(tmp_path / "a-file" / "ctxmw") in record.getMessage()
    assert "CTXMW_STATE_DIR" in record.getMessage()
    assert "CTXMW_DEFAULT_LEDGER=false" in record.getMessage()
