"""``ctxmw inbox send|abort|list``."""

from __future__ import annotations

import functools
import io
import re
import sys
from pathlib import Path

import anyio
import pytest

import ctxmw
from ctxmw.cli import main
from ctxmw.inbox import inbox_dir

ISO = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}"


@pytest.fixture
def save_file(tmp_path: Path) -> Path:
    return tmp_path / "agent.jsonl"


def apply_inbox(save_file: Path) -> None:
    anyio.run(functools.partial(ctxmw.prepare_prompt, [], "inbox", save_file=save_file))


def pending(save_file: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in inbox_dir(save_file).iterdir()}


def test_send_delivers_the_text(save_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inbox", "send", str(save_file), "look at the logs"]) == 0
    [(name, text)] = pending(save_file).items()
    assert text == "look at the logs"
    assert name in capsys.readouterr().out


def test_send_dash_reads_stdin(save_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stdin = io.TextIOWrapper(io.BytesIO("café from a pipe\nline two\n".encode()))
    monkeypatch.setattr(sys, "stdin", stdin)
    assert main(["inbox", "send", str(save_file), "-", "--name", "piped"]) == 0
    [(name, text)] = pending(save_file).items()
    assert name.endswith("_piped")
    assert text == "café from a pipe\nline two\n"


def test_abort_with_reason_then_the_strategy_aborts(save_file: Path) -> None:
    assert main(["inbox", "abort", str(save_file), "wrong repository"]) == 0
    assert pending(save_file) == {"abort": "wrong repository"}
    with pytest.raises(ctxmw.Aborted, match="wrong repository"):
        apply_inbox(save_file)


def test_abort_without_reason_writes_an_empty_abort(save_file: Path) -> None:
    assert main(["inbox", "abort", str(save_file)]) == 0
    assert pending(save_file) == {"abort": ""}


def test_list_shows_pending_and_delivered_with_iso_times(
    save_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["inbox", "send", str(save_file), "first"])
    apply_inbox(save_file)
    main(["inbox", "send", str(save_file), "second"])
    capsys.readouterr()
    assert main(["inbox", "list", str(save_file)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(rf"pending    {ISO} +6  \d+_\d+_\d+", lines[0])
    assert re.fullmatch(rf"delivered  {ISO} +5  \d+_\d+_\d+", lines[1])
    assert len(lines) == 2


def test_list_of_an_empty_inbox_says_so(
    save_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inbox", "list", str(save_file)]) == 0
    assert "No messages" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["inbox", "send", "{missing}", "hi"],
        ["inbox", "abort", "{missing}"],
        ["inbox", "send", "{save}", "hi", "--name", "../escape"],
        ["inbox", "send", "{save}", "   "],
    ],
)
def test_usage_errors_exit_2_with_a_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    missing, save = tmp_path / "nope" / "agent.jsonl", tmp_path / "agent.jsonl"
    argv = [a.format(missing=missing, save=save) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("ctxmw inbox: ")
    assert "Traceback" not in err


def test_filesystem_refusal_exits_1(save_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inbox_dir(save_file).write_text("a file where the inbox folder should be")
    assert main(["inbox", "send", str(save_file), "hi"]) == 1
    assert "the filesystem refused" in capsys.readouterr().err


def test_inbox_without_subcommand_prints_help_and_exits_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["inbox"]) == 2
    assert "send" in capsys.readouterr().err


def test_send_says_the_message_is_pending_as_list_does(
    save_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    save_file.write_text("")
    assert main(["inbox", "send", str(save_file), "look at the logs"]) == 0
    said = capsys.readouterr()
    assert "pending until the agent's next model call" in said.out
    assert "Delivered" not in said.out
    assert said.err == ""
    assert main(["inbox", "list", str(save_file)]) == 0
    assert capsys.readouterr().out.startswith("pending ")


def test_send_to_a_save_file_nobody_wrote_warns_and_names_the_near_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "agent.jsonl").write_text("")
    assert main(["inbox", "send", str(tmp_path / "agnet.jsonl"), "hello"]) == 0
    err = capsys.readouterr().err
    assert "does not exist yet, so no agent has written it" in err
    assert f"Did you mean {str(tmp_path / 'agent.jsonl')!r}?" in err
