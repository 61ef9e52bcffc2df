"""ctxmw show SAVE_FILE: a readable transcript, long parts folded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxmw.cli import main
from ctxmw.cli.view import format_transcript
from tests._runs import session_folder

MESSAGES = [
    {"role": "user", "content": "Read the log."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {
                    "name": "read_file",
                    "arguments": json.dumps({"path": "/var/log/app.log"}),
                },
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "line\n" * 500},
    {"role": "assistant", "content": "The log is fine."},
]


@pytest.fixture
def save_file(tmp_path: Path) -> Path:
    path = tmp_path / "agent.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in MESSAGES))
    return path


def test_show_prints_roles_tools_sizes_and_folds(
    save_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", str(save_file)]) == 0
    out = capsys.readouterr().out
    assert 'read_file(path="/var/log/app.log") [c1]' in out
    assert "tool" in out
    assert "<- read_file [c1]" in out
    assert "more chars folded" in out
    assert out.count("line") < 50
    assert "-- 4 messages, 1 tool calls" in out


def test_show_full_unfolds(save_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--full", str(save_file)]) == 0
    assert capsys.readouterr().out.count("line") >= 500


def test_show_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(tmp_path / "nope.jsonl")]) == 2  # a usage error, like stats
    assert "no transcript" in capsys.readouterr().err


def test_show_a_ledger_is_refused_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = session_folder(tmp_path)[1]
    assert main(["show", str(ledger)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [
        f"ctxmw show: skipped {str(ledger)!r}: a telemetry ledger, not a transcript (read it "
        "with ctxmw stats)."
    ]


def test_show_escapes_a_lone_surrogate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_text('{"role":"user","content":"caf\\udce9.txt"}\n')
    assert main(["show", str(path)]) == 0
    assert "caf\\udce9.txt" in capsys.readouterr().out


def test_show_revisions_prints_every_revision_oldest_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agent.jsonl"
    lines = [
        {"role": "system", "content": "time 10:00"},
        {"role": "user", "content": "hi"},
        {"ctxmw": "edit", "ops": [[0, 1, 1]]},
        {"role": "system", "content": "time 10:01"},
    ]
    path.write_text("".join(json.dumps(m) + "\n" for m in lines))
    assert main(["show", "--revisions", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.index("== revision 1 of 2 (earlier)") < out.index("time 10:00")
    assert out.index("== revision 2 of 2 (current)") < out.index("time 10:01")
    assert main(["show", str(path)]) == 0
    current = capsys.readouterr().out
    assert "time 10:01" in current
    assert "time 10:00" not in current


def test_a_file_never_edited_is_revision_1_of_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"role": "user", "content": "hi"}) + "\n")
    assert main(["show", "--revisions", str(path)]) == 0
    out = capsys.readouterr().out
    assert "== revision 1 of 1 (current: the only one, the history was never edited)" in out
    assert "revision 0" not in out


def test_sizes_count_what_the_model_reads_not_the_json_around_it() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a":1}'}}
    text = format_transcript(
        [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "2"},
        ]
    )
    lines = text.splitlines()
    assert "  10 chars" in lines[0]  # "add" and '{"a":1}'
    assert "   1 chars" in lines[2]  # the result "2", not 60 characters of JSON
    assert lines[-1].endswith("11 characters")
