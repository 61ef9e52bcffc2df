"""Not reported is null, never 0: in the usage read, the record, the ledger and the stats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxmw.cli import main
from ctxmw.telemetry import ApproxCounter, CallRecorder
from ctxmw.telemetry.stats import format_table, summarise
from ctxmw.telemetry.usage import read_usage

MSGS = [{"role": "system", "content": "sys " * 400}, {"role": "user", "content": "hi"}]


def test_a_usage_without_cache_fields_reads_as_not_reported() -> None:
    report = read_usage({"usage": {"prompt_tokens": 900, "completion_tokens": 3}})
    assert (report.cache_read_tokens, report.cache_write_tokens) == (None, None)
    assert not report.estimated


def test_a_reported_zero_stays_zero() -> None:
    usage = {"prompt_tokens": 900, "completion_tokens": 3, "prompt_tokens_details": {}}
    usage["prompt_tokens_details"] = {"cached_tokens": 0}
    report = read_usage({"usage": usage})
    assert (report.cache_read_tokens, report.cache_write_tokens) == (0, None)


def test_no_usage_at_all_is_not_reported() -> None:
    report = read_usage(None)
    assert (report.cache_read_tokens, report.cache_write_tokens, report.estimated) == (
        None,
        None,
        True,
    )


@pytest.mark.anyio
async def test_the_ledger_writes_null_for_an_unreported_cache(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    recorder = CallRecorder("s", save_file=save_file, token_counter=ApproxCounter())
    response = {"usage": {"prompt_tokens": 420, "completion_tokens": 3}}
    record = await recorder.record(
        model="gpt-4o", wire_kwargs={"model": "gpt-4o", "messages": MSGS}, transcript=MSGS,
        response=response,
    )  # fmt: skip
    assert (record.cache_read_tokens, record.cache_write_tokens) == (None, None)
    line = json.loads((tmp_path / "agent.jsonl.ledger.jsonl").read_text())
    assert (line["cache_read_tokens"], line["cache_write_tokens"]) == (None, None)


def rec(prompt: int, read: int | None, expected: int = 0, session: str = "a") -> dict[str, Any]:
    return {
        "session": session, "model": "m", "prompt_tokens": prompt, "prompt_tokens_local": prompt,
        "cache_read_tokens": read, "expected_cached_tokens": expected, "cost_usd": None,
    }  # fmt: skip


def test_the_hit_rate_is_token_weighted_over_the_calls_that_reported() -> None:
    (stats,) = summarise([rec(1000, 900), rec(3000, None), rec(1000, 100)])
    assert stats.cache_read_tokens == 1000
    assert stats.reported_calls == 2
    assert stats.hit_rate == pytest.approx(1000 / 2000)


def test_a_session_that_never_reported_has_no_hit_rate() -> None:
    (stats,) = summarise([rec(1000, None), rec(2000, None)])
    assert (stats.cache_read_tokens, stats.hit_rate, stats.reported_calls) == (None, None, 0)
    row = format_table([stats]).splitlines()[1].split()
    assert row[4] == "null"
    assert row[6] == "null"


def test_stats_prints_null_not_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.ledger.jsonl"
    path.write_text(json.dumps(rec(1000, None)) + "\n" + json.dumps(rec(500, 0, session="b")))
    assert main(["stats", str(path)]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:3]]
    assert (rows[0][4], rows[0][6]) == ("null", "null")
    assert (rows[1][4], rows[1][6]) == ("0", "0.0%")
