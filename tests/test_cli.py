"""The command line: --version, the strategy listing, and one error path for every command."""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import ctxmw
from ctxmw.cli import main
from tests._runs import session_folder


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"ctxmw {ctxmw.__version__}"


def test_strategies_lists_every_registered_one_with_a_description(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["strategies"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in lines]
    assert names == [info.name for info in ctxmw.list_strategies()]
    assert all(len(line.split(maxsplit=1)) == 2 for line in lines)
    assert not any("``" in line for line in lines)  # plain text, not the docstrings' RST
    assert max(map(len, lines)) <= 120
    (clear,) = [line for line in lines if line.startswith("clear_tool_results ")]
    assert "the newest 'keep' once" in clear


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "commands" in capsys.readouterr().out


def test_console_entry_point_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ctxmw", "strategies"], capture_output=True, text=True, check=True
    )
    assert "shorten_tools_epoch_increment" in out.stdout


def cli(argv: list[str]) -> tuple[int, str, str]:
    """Run ``ctxmw argv`` in-process: (exit code, stdout, stderr); argparse's exits included."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def one_line(err: str) -> str:
    """The single stderr line of a failed command (never a traceback)."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def write_transcript(path: Path, n: int = 400) -> Path:
    lines = [
        json.dumps({"role": "user", "content": f"message {i} " + "x" * 1000}) for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_show_into_a_closed_pipe_prints_no_traceback(tmp_path: Path) -> None:
    save_file = write_transcript(tmp_path / "agent.jsonl")
    command = f"{shlex.quote(sys.executable)} -m ctxmw show --full {shlex.quote(str(save_file))}"
    shown = subprocess.run(
        f"{command} | head -1",
        shell=True,
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.strip()
    assert shown.stderr == ""


@pytest.mark.parametrize("command", ["stats", "replay"])
def test_plot_into_a_missing_folder_is_a_usage_error(tmp_path: Path, command: str) -> None:
    transcript, ledger = session_folder(tmp_path)
    given = ledger if command == "stats" else transcript
    bad = tmp_path / "no" / "such" / "plot.png"
    code, _, err = cli(
        [command, str(given), "--plot", str(bad)] + (["--fast"] * (command == "replay"))
    )
    assert code == 2
    assert str(bad.parent) in one_line(err)


def test_demo_out_on_a_file_is_a_usage_error(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    code, _, err = cli(["demo", "--calls", "2", "--out", str(taken)])
    assert code == 2
    assert repr(str(taken)) in one_line(err)


def test_demo_unknown_strategy_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = cli(["demo", "--calls", "2", "--out", str(tmp_path), "--strategies", "nosuch"])
    assert code == 2
    line = one_line(err)
    assert "'nosuch' in the --strategies option" in line
    assert "shorten_tools_epoch_increment" in line


def test_replay_unknown_strategy_names_the_option_and_the_close_name() -> None:
    code, _, err = cli(["replay", "--synthetic", "3", "--fast", "--strategies", "shorten_tool"])
    assert code == 2
    line = one_line(err)
    assert "'shorten_tool' in the --strategies option. Did you mean 'shorten_tools'?" in line


def test_demo_bad_environment_value_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXMW_EPOCH_SIZE", "abc")
    code, _, err = cli(["demo", "--calls", "2", "--out", str(tmp_path)])
    assert code == 2
    assert "CTXMW_EPOCH_SIZE" in one_line(err)


def test_demo_unknown_model_is_a_one_line_runtime_error(tmp_path: Path) -> None:
    code, _, err = cli(["demo", "--calls", "2", "--out", str(tmp_path), "--model", "nosuch"])
    assert code == 1
    assert one_line(err).startswith("ctxmw demo: ")
    assert "nosuch" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "--synthetic", "5", "--window", "-1"],
        ["replay", "--synthetic", "5", "--window", "0"],
        ["show", "--width", "-5", "agent.jsonl"],
        ["demo", "--calls", "0"],
        ["replay", "--synthetic", "0"],
    ],
)
def test_out_of_range_numbers_are_usage_errors(argv: list[str]) -> None:
    code, out, err = cli(argv)
    assert code == 2
    assert out == ""
    assert "must be" in one_line(err)
