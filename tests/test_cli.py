"""The command line: --version and the strategy listing."""

from __future__ import annotations

import subprocess
import sys

import pytest

import ctxmw
from ctxmw.cli import main


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


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "commands" in capsys.readouterr().out


def test_console_entry_point_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ctxmw", "strategies"], capture_output=True, text=True, check=True
    )
    assert "shorten_tools_epoch_increment" in out.stdout
