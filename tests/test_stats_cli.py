"""ctxmw stats --check, --html and --follow, on ledgers written by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import ctxmw
from ctxmw.cli import main
from ctxmw.telemetry.follow import follow_ledgers
from ctxmw.telemetry.report import bust_runs, report_data, report_html
from ctxmw.testing import FakeCompletion, text, usage

TOOLS_BUST = {"cause": "tools", "strategy": None, "message_index": None}
EPOCH_BUST = {"cause": "strategy", "strategy": "shorten_tools_epoch", "message_index": 4}


def rec(n: int, read: int | None, session: str = "a", **extra: Any) -> dict[str, Any]:
    return {
        "session": session, "model": "gpt-4o", "round": n, "prompt_tokens": 2000,
        "prompt_tokens_local": 2000, "cache_read_tokens": read,
        "expected_cached_tokens": 1920 if n else 0, "cache_write_tokens": None,
        "cost_usd": 0.004, "bust": None, "epoch": n // 4, **extra,
    }  # fmt: skip


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


HEALTHY = [rec(0, 0), *[rec(n, 1920) for n in range(1, 6)]]
BROKEN = [rec(0, 0, "b"), rec(1, 1920, "b"), rec(2, 0, "b", bust=TOOLS_BUST)]


def test_check_passes_a_healthy_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", str(write(tmp_path / "a.ledger.jsonl", HEALTHY)), "--check"]) == 0
    assert "check: 0 alert(s) over 6 calls" in capsys.readouterr().out


def test_check_exits_non_zero_when_a_rule_fires(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "b.ledger.jsonl", [*HEALTHY, *BROKEN])
    assert main(["stats", str(path), "--check"]) == 1
    out = capsys.readouterr().out
    assert "ALERT bust_tools: Session 'b', call 3: broke" in out


def test_check_reads_the_alert_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    low = [rec(0, 0), *[rec(n, 1000) for n in range(1, 12)]]  # 50% read where 96% expected
    path = write(tmp_path / "c.ledger.jsonl", low)
    monkeypatch.setenv("CTXMW_ALERT_MAX_DRIFT", "0.6")
    monkeypatch.setenv("CTXMW_ALERT_MIN_HIT_RATE", "0.4")
    assert main(["stats", str(path), "--check"]) == 0
    monkeypatch.setenv("CTXMW_ALERT_MIN_HIT_RATE", "0.6")
    assert main(["stats", str(path), "--check"]) == 1
    assert "low_hit_rate" in capsys.readouterr().out


def test_the_html_page_is_self_contained_and_holds_every_session(tmp_path: Path) -> None:
    path = write(tmp_path / "d.ledger.jsonl", [*HEALTHY, *BROKEN, rec(0, None, "c</script>")])
    out = tmp_path / "report.html"
    assert main(["stats", str(path), "--html", str(out)]) == 0
    page = out.read_text()
    assert not re.search(r"""(src|href)\s*=|<link|@import|url\(|fetch\(""", page)
    assert page.count("</script>") == 2  # the data cannot close its element early
    data = json.loads(re.search(r'id="ctxmw-data">(.*?)</script>', page, re.S)[1])  # type: ignore[index]
    assert [s["session"] for s in data["sessions"]] == ["c</script>", "b", "a"]  # by cost


def test_the_table_is_sorted_by_cost_with_hidden_and_read_backs_beside_it() -> None:
    records = [rec(n, 0, "dear") for n in range(4)] + [rec(0, 0, "free", cost_usd=None)]
    records += [rec(n, 0, "cheap", readback=n == 1) for n in range(2)]
    data = report_data(
        [{"readback": False, **r} for r in records], hidden={"dear": 0.0, "cheap": 0.125}
    )
    assert [row["session"] for row in data["table"]] == ["cheap", "dear", "free"]
    assert [s["session"] for s in data["sessions"]] == ["cheap", "dear", "free"]
    assert [row["hidden"] for row in data["table"]] == [0.125, 0.0, None]
    assert [row["readbacks"] for row in data["table"]] == [1, 0, 0]
    assert data["show"] == {"hidden": True, "readbacks": True}
    plain = report_data(records[:5])
    assert plain["show"] == {"hidden": False, "readbacks": False}
    assert plain["table"][0]["readbacks"] is None  # no read-back line: no column


def test_ledgers_that_record_read_backs_show_the_column_with_zero_where_none_was_made() -> None:
    records = [rec(n, 0, "quiet", readback=False) for n in range(3)] + [rec(0, 0, "old")]
    data = report_data(records)
    assert data["show"]["readbacks"] is True  # the field says none was made: 0 is a figure
    by_session = {row["session"]: row["readbacks"] for row in data["table"]}
    assert by_session == {"quiet": 0, "old": None}  # an older ledger does not say


def test_a_replays_lists_are_tabled_cheapest_first_with_what_they_hid() -> None:
    def entry(auto: float, hidden: float, **more: Any) -> dict[str, Any]:
        cost = {"auto": auto, "breakpoints": auto + 1, "end_breakpoint": auto + 2}
        return {"cost": cost, "hidden_share": hidden, "recoverable_share": 0.0, **more}

    replay = {"strategies": {"none": entry(9.0, 0.0), "default": entry(4.0, 0.02)}}
    rows = report_data([rec(0, 0)], replay=replay)["replay"]
    assert [(r["name"], r["cost"]["auto"], r["hidden"]) for r in rows] == [
        ("default", 4.0, 0.02), ("none", 9.0, 0.0)
    ]  # fmt: skip
    assert rows[0]["readbacks"] is None  # the replay does not say
    replay["strategies"]["default"] = entry(4.5, 0.01, readback_calls=7)
    assert report_data([rec(0, 0)], replay=replay)["replay"][0]["readbacks"] == 7


def test_report_data_keeps_null_apart_from_zero() -> None:
    data = report_data([rec(0, None), rec(1, 0)])
    calls = data["sessions"][0]["calls"]
    assert [c["read"] for c in calls] == [None, 0]
    assert data["table"][0]["hit_rate"] == 0.0
    assert report_data([rec(0, None)])["table"][0]["hit_rate"] is None
    assert "{{DATA}}" not in report_html([rec(0, None)])


def test_report_data_carries_busts_epochs_costs_and_alerts() -> None:
    data = report_data([*BROKEN, rec(3, 1920, "b", bust=EPOCH_BUST)])
    (session,) = data["sessions"]
    assert [c["bust"] for c in session["calls"]] == [
        None, None, "tools", "strategy:shorten_tools_epoch"
    ]  # fmt: skip
    assert [c["epoch"] for c in session["calls"]] == [0, 0, 0, 0]
    assert data["table"][0]["cost_usd"] == pytest.approx(0.016)
    assert (data["table"][0]["bust_calls"], data["table"][0]["alerts"]) == (2, 1)
    assert [a["rule"] for a in session["alerts"]] == ["bust_tools"]
    assert session["bust_runs"] == [
        {"start": 3, "end": 3, "label": "tools", "count": 1},
        {"start": 4, "end": 4, "label": "strategy:shorten_tools_epoch", "count": 1},
    ]


def test_busts_of_one_cause_every_call_or_every_other_are_one_run() -> None:
    busts = [*["s"] * 5, None, "s", None, None, "s", "t"]
    calls = [{"n": n, "bust": b} for n, b in enumerate(busts, start=1)]
    assert [(r["start"], r["end"], r["label"], r["count"]) for r in bust_runs(calls)] == [
        (1, 7, "s", 6), (10, 10, "s", 1), (11, 11, "t", 1)
    ]  # fmt: skip


def test_the_data_block_holds_no_markup_character() -> None:
    """A session id is any client's text: inside the script element it must not be able to
    open a comment, close the element or re-open one (``<!--<script>`` left the page blank)."""
    page = report_html([rec(0, 0, "<!--<script>"), rec(1, 0, "</script>&")])
    block = re.search(r'id="ctxmw-data">(.*?)</script>', page, re.S)[1]  # type: ignore[index]
    assert not set("<>&") & set(block)
    assert [s["session"] for s in json.loads(block)["sessions"]] == ["<!--<script>", "</script>&"]


def test_replay_references_are_charted_when_the_replay_measured_them(tmp_path: Path) -> None:
    measured = {"references_shown": 90, "references_recoverable": 4, "references_gone": 6}
    replay = {"strategies": {"none": {"references_shown": 100, "references_recoverable": 0,
              "references_gone": 0}, "shorten_tools_economic": measured}}  # fmt: skip
    assert report_data([rec(0, 0)], replay=replay)["references"][1] == {
        "name": "shorten_tools_economic", "shown": 90, "recoverable": 4, "gone": 6
    }  # fmt: skip
    assert (
        report_data([rec(0, 0)], replay={"strategies": {"none": {"cost": 1}}})["references"] == []
    )
    path = write(tmp_path / "r.ledger.jsonl", HEALTHY)
    (tmp_path / "replay.json").write_text(json.dumps(replay))
    out = tmp_path / "r.html"
    args = ["stats", str(path), "--html", str(out), "--replay", str(tmp_path / "replay.json")]
    assert main(args) == 0
    assert "shorten_tools_economic" in out.read_text()


def test_follow_yields_what_is_there_then_each_new_record(tmp_path: Path) -> None:
    path = write(tmp_path / "f.ledger.jsonl", HEALTHY[:2])
    pending = [
        json.dumps(HEALTHY[2]) + "\n",
        json.dumps(HEALTHY[3])[:10],
        json.dumps(HEALTHY[3])[10:] + "\n",
    ]
    clock = iter(range(100))

    def sleep(_: float) -> None:
        if pending:
            with path.open("a") as f:
                f.write(pending.pop(0))

    batches = list(
        follow_ledgers([path], poll_s=0.5, idle_s=3, sleep=sleep, clock=lambda: next(clock))
    )
    rounds = [[r["round"] for r in batch] for batch in batches]
    assert rounds == [[0, 1], [2], [3]]  # a half-written line waits for its newline


def test_follow_reads_a_rotated_file_again_and_waits_for_a_missing_one(tmp_path: Path) -> None:
    path = tmp_path / "g.ledger.jsonl"
    steps = [lambda: write(path, HEALTHY[:3]), lambda: write(path, HEALTHY[:1])]
    clock = iter(range(100))

    def sleep(_: float) -> None:
        if steps:
            steps.pop(0)()

    batches = list(follow_ledgers([path], idle_s=3, sleep=sleep, clock=lambda: next(clock)))
    assert [[r["round"] for r in b] for b in batches] == [[], [0, 1, 2], [0]]


def test_follow_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "h.ledger.jsonl", [*HEALTHY, *BROKEN])
    assert main(["stats", str(path), "--follow", "--idle", "0", "--poll", "0.01"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["session", "model", "calls"]
    assert main(["stats", str(path), "--follow", "--poll", "0"]) == 2
    assert "--poll 0.0 must be" in capsys.readouterr().err


def test_follow_prints_each_new_call_and_its_alerts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctxmw.telemetry.follow as follow

    path = write(tmp_path / "i.ledger.jsonl", BROKEN[:1])
    pending = [BROKEN[1], BROKEN[2]]

    def sleep(_: float) -> None:  # each poll, the agent has finished one more call
        if not pending:
            raise KeyboardInterrupt
        with path.open("a") as f:
            f.write(json.dumps(pending.pop(0)) + "\n")

    monkeypatch.setattr(follow.time, "sleep", sleep)
    assert main(["stats", str(path), "--follow", "--check"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[0] == "session"
    calls = [line for line in lines if line.startswith("call b ")]
    assert len(calls) == 2
    assert "cached=96.0% expected=96.0%" in calls[0]
    assert calls[1].endswith("bust=tools")
    assert lines[-1].startswith("ALERT bust_tools: Session 'b', call 3: ")


SYSTEM = {"role": "system", "content": "You review code. " + "Be precise and brief. " * 300}


@pytest.mark.anyio
async def test_check_exits_1_on_a_ledger_where_a_strategy_busts_every_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real session whose strategy stamps the first user message on every call (a clock, a
    counter): each call after the first breaks the cached prefix right after the system prompt."""
    stamps = iter(range(100))

    def stamp(messages: list[dict[str, Any]], ctx: Any) -> list[dict[str, Any]]:
        first = {**messages[1], "content": f"[{next(stamps)}] {messages[1]['content']}"}
        return [messages[0], first, *messages[2:]]

    save_file = tmp_path / "agent.jsonl"
    history: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": "Review wrapper.py"}]
    fake = FakeCompletion(*[text("ok", usage=usage(1900, 5, cached_tokens=1792))] * 15)
    for n in range(15):
        await ctxmw.acompletion(
            "openai/gpt-4o", history, prompt_strategies=[stamp], save_file=save_file,
            completion=fake,
        )  # fmt: skip
        history = [*history, {"role": "assistant", "content": f"{n}"}]
        history.append({"role": "user", "content": f"next {n}"})
    ledger = str(tmp_path / "agent.jsonl.ledger.jsonl")
    assert main(["stats", "--check", ledger]) == 1
    out = capsys.readouterr().out
    assert "ALERT bust_every_call: Session " in out
    assert "each of its 10 warm calls so far broke the cached prefix" in out
    assert "check: 1 alert(s) over 15 calls" in out


def test_follow_with_no_argument_waits_for_the_default_ledger(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["stats", "--follow", "--idle", "0", "--poll", "0.01"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split()[:3] == ["session", "model", "calls"]


def test_control_characters_of_a_session_id_are_escaped_on_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxmw.cli.stats import call_line

    session = "team:a/run\x1b]0;owned\x07\x1b[2J\n"
    records = [rec(0, 0, session), rec(1, 1920, session, bust=TOOLS_BUST)]
    assert main(["stats", str(write(tmp_path / "c.ledger.jsonl", records))]) == 0
    out = capsys.readouterr().out + call_line(records[1])
    assert not any(c in out for c in "\x1b\x07")
    assert "run\\x1b]0;owned\\x07\\x1b[2J\\n" in out
