"""ctxmw stats: the table per session and model, busts with causes, the optional plot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxmw.cli import main
from ctxmw.telemetry.stats import format_table, load_ledgers, summarise
from tests._runs import session_folder


def rec(
    session: str, model: str, prompt: int, read: int, bust: Any = None, cost: Any = 0.01
) -> dict[str, Any]:
    return {
        "session": session, "model": model, "prompt_tokens": prompt, "cache_read_tokens": read,
        "expected_cached_tokens": read + 10, "cost_usd": cost, "bust": bust,
    }  # fmt: skip


def write(path: Path, records: list[dict[str, Any]], torn: bool = False) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in records)
    path.write_text(text + ('{"session": "a", "mod' if torn else ""))
    return path


EPOCH = {"cause": "strategy", "strategy": "shorten_tools_epoch_increment", "message_index": 2}
LEDGER = [
    rec("a", "gpt-4o", 1000, 0),
    rec("a", "gpt-4o", 2000, 1024, cost=None),
    rec("a", "gpt-4o", 3000, 0, bust=EPOCH),
    rec("b", "claude", 500, 0, bust={"cause": "tools", "strategy": None, "message_index": None}),
]


def test_summary_per_session_and_model(tmp_path: Path) -> None:
    records = load_ledgers([write(tmp_path / "x.ledger.jsonl", LEDGER, torn=True)])
    a, b = summarise(records)
    assert (a.calls, a.prompt_tokens, a.cache_read_tokens, a.expected_cached_tokens) == (
        3,
        6000,
        1024,
        1054,
    )
    assert a.cost_usd == pytest.approx(0.02)
    assert a.hit_rate == pytest.approx(1024 / 6000)
    assert dict(a.busts) == {"strategy:shorten_tools_epoch_increment": 1}
    assert (b.session, dict(b.busts)) == ("b", {"tools": 1})
    table = format_table([a, b])
    assert "17.1%" in table
    assert "busts a gpt-4o: strategy:shorten_tools_epoch_increment x1" in table


def test_cli_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "x.ledger.jsonl", LEDGER)
    assert main(["stats", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == [
        "session", "model", "calls", "prompt", "read", "expected", "hit", "cost_usd"
    ]  # fmt: skip
    assert "busts b claude: tools x1" in out


def test_cli_names_a_missing_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl" in capsys.readouterr().err


def test_cli_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = write(tmp_path / "x.ledger.jsonl", LEDGER)
    png = tmp_path / "out.png"
    assert main(["stats", str(path), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    path = write(tmp_path / "x.ledger.jsonl", LEDGER)
    assert main(["stats", str(path), "--plot", str(tmp_path / "o.png")]) == 2
    assert "pip install matplotlib (in a ctxmw checkout: pip install -e '.[plot]')" in (
        capsys.readouterr().err
    )


def test_cli_skips_a_transcript_matched_by_the_glob(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    transcript, ledger = session_folder(tmp_path)
    assert main(["stats", str(transcript), str(ledger)]) == 0
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        f"ctxmw stats: skipped {str(transcript)!r}: it holds messages (a transcript), not a "
        "ledger's call records."
    ]
    assert "openai/gpt-4o-mini 2 " in " ".join(captured.out.split())


def test_cli_given_only_a_transcript_says_which_file_it_wanted_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    transcript, ledger = session_folder(tmp_path)
    assert main(["stats", str(transcript)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no empty table
    last = captured.err.strip().splitlines()[-1]
    assert f"No ledger to read: {str(transcript)!r} holds messages" in last
    assert repr(str(ledger)) in last  # the file it wanted


def test_the_table_fits_120_columns_whatever_the_names() -> None:
    deep = "/home/someone/projects/agents/runs/2026-12-02/" + "nightly-evaluation-" * 4 + "a.jsonl"
    model = "bedrock/anthropic.claude-3-5-sonnet-20241022-v2:0"
    epoch = {"cause": "strategy", "strategy": "shorten_tools_epoch_increment", "message_index": 2}
    records = [rec(deep, model, 12_345_678, 9_876_543, bust=epoch, cost=1234.5)] * 3
    records += [rec("short", "gpt-4o", 1000, 0)]
    lines = format_table(summarise(records)).splitlines()
    assert max(map(len, lines)) <= 120
    row = lines[1].split()
    assert row[0].startswith("/home/someone/")
    assert "…" in row[0]
    assert row[0].endswith("a.jsonl")
    assert row[2:] == ["3", "37,037,034", "29,629,629", "29,629,659", "80.0%", "3,703.50"]
    assert lines[2].split()[0] == "short"


def test_money_is_to_the_cent() -> None:
    (stats,) = summarise([rec("a", "m", 10, 0, cost=0.0031)])
    assert format_table([stats]).splitlines()[1].split()[-1] == "<0.01"
    (stats,) = summarise([rec("a", "m", 10, 0, cost=12.3681)])
    assert format_table([stats]).splitlines()[1].split()[-1] == "12.37"
