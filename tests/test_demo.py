"""ctxmw demo: the simulated provider, the scripted agent, and a reduced end-to-end run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

import ctxmw
from ctxmw.cli import main
from ctxmw.demo._provider import SimulatedProvider
from ctxmw.demo._run import SIMULATED_MODEL
from ctxmw.demo._script import PlanStep, make_plan
from ctxmw.demo._tools import ToolBox
from ctxmw.replay import replay
from ctxmw.runtime.tool_schema import ToolSet
from ctxmw.telemetry.counters import ApproxCounter
from tests.conftest import DemoRun

ROOT = Path(ctxmw.__file__).parent


def provider(steps: int = 3) -> SimulatedProvider:
    plan = [PlanStep((("read_file", {"path": "x"}),))] * steps
    return SimulatedProvider(plan, ApproxCounter(), "gpt-4o")


def post(p: SimulatedProvider, messages: list[dict[str, Any]]) -> dict[str, Any]:
    status, body = p.handle(
        ["POST", "/v1/chat/completions"], json.dumps({"messages": messages}).encode()
    )
    assert status == "200 OK"
    return body


def test_provider_follows_the_plan_by_the_newest_call_id() -> None:
    p = provider()
    first = post(p, [{"role": "user", "content": "go"}])["choices"][0]
    assert first["finish_reason"] == "tool_calls"
    assert first["message"]["tool_calls"][0]["id"] == "call_0000_0"
    # Old calls may have been dropped by a strategy: only the newest id matters.
    later = [{"role": "assistant", "tool_calls": [{"id": "call_0001_0"}]}]
    assert post(p, later)["choices"][0]["message"]["tool_calls"][0]["id"] == "call_0002_0"
    done = post(p, [{"role": "assistant", "tool_calls": [{"id": "call_0002_0"}]}])
    assert done["choices"][0]["finish_reason"] == "stop"
    assert "simulated" in done["choices"][0]["message"]["content"]


def test_provider_caches_like_openai() -> None:
    p = provider()
    big = [{"role": "user", "content": "w " * 3000}]
    assert post(p, big)["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    usage = post(p, [*big, {"role": "user", "content": "more"}])["usage"]
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    assert cached % 128 == 0
    assert 0 < usage["prompt_tokens"] - cached < 128 + 10
    p.forget()
    assert post(p, big)["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


def test_provider_caches_nothing_under_the_minimum() -> None:
    p = provider()
    small = [{"role": "user", "content": "hello"}]
    post(p, small)
    assert post(p, small)["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


def test_provider_refuses_other_routes() -> None:
    status, _ = provider().handle(["GET", "/v1/models"], b"")
    assert status.startswith("404")


def test_tools_read_real_files_and_stay_inside_the_tree() -> None:
    box = ToolBox(ROOT)
    assert "settings/_model.py" in box.list_files("settings")
    assert "class Settings" in box.read_file("settings/_model.py", start=1, lines=400)
    assert "settings/_model.py:" in box.grep("class Settings", ".")
    with pytest.raises(ValueError, match="outside"):
        box.read_file("../../etc/passwd")


def test_plan_is_deterministic_with_parallel_calls_and_repeats() -> None:
    plan = make_plan(ROOT, 60)
    assert plan == make_plan(ROOT, 60)
    calls = [c for step in plan for c in step.calls]
    assert len(calls) >= 60
    assert any(len(step.calls) > 1 for step in plan)
    keys = [json.dumps(c, sort_keys=True) for c in calls]
    assert len(set(keys)) < len(keys)


@pytest.mark.slow
def test_demo_end_to_end_reduced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--calls", "40", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "SIMULATED" in printed
    rows = {
        line.split()[0]: line.split()
        for line in printed.splitlines()
        if line.startswith(("none ", "shorten"))
    }
    assert set(rows) >= {
        "none",
        "shorten_tools_economic",
        "shorten_tools",
        "shorten_tools_epoch",
        "shorten_tools_epoch_increment",
    }
    for name in rows:
        lines = (out / f"{name}.jsonl.ledger.jsonl").read_text().splitlines()
        ledger = [json.loads(x) for x in lines]
        reported = sum(r["cache_read_tokens"] for r in ledger)
        expected = sum(r["expected_cached_tokens"] for r in ledger)
        # ctxmw's expectation, from what it sent, is exactly what the provider reported.
        assert reported == expected
        assert f"{reported:,}" in rows[name]
        ctxmw.validate([json.loads(x) for x in (out / f"{name}.jsonl").read_text().splitlines()])
    assert (out / "cache.png").stat().st_size > 10_000
    check_replay_agrees(out, "shorten_tools_epoch_increment")
    check_replay_agrees(out, "shorten_tools_economic")
    # The hidden column is replay's loss measure of each row's own transcript.
    assert rows["none"][-1] == "0.0%"
    for name in ("shorten_tools", "shorten_tools_economic"):
        assert rows[name][-1] == f"{hidden_share(out, name):.1%}"


def hidden_share(out: Path, name: str) -> float:
    transcript = [json.loads(x) for x in (out / f"{name}.jsonl").read_text().splitlines()]
    settings = {"cache_rule": "openai"}
    result = anyio.run(
        lambda: replay({name: transcript}, [name], model=SIMULATED_MODEL, settings=settings)
    )
    return result.strategies[name].hidden_share


@pytest.mark.slow
def test_the_default_demo_fits_the_terminal_alerts_nothing_and_writes_its_report(
    demo_run: DemoRun, capsys: pytest.CaptureFixture[str]
) -> None:
    assert demo_run.code == 0
    assert demo_run.warnings == []  # no alert, for none (99% read) or any other row
    assert max(map(len, demo_run.stdout.splitlines())) <= 120
    page = demo_run.out / "report.html"
    assert f"report: {page}" in demo_run.stdout
    assert page.stat().st_size > 10_000
    header = demo_run.stdout.splitlines()[0:1]
    assert "tool calls" in header[0]
    table = [line.split() for line in demo_run.stdout.splitlines() if line.startswith("none ")]
    ledger = (demo_run.out / "none.jsonl.ledger.jsonl").read_text()
    assert table[0][1] == str(len(ledger.splitlines()))
    assert main(["stats", "--check", *demo_run.ledgers]) == 0
    assert "check: 0 alert(s) over" in capsys.readouterr().out


def check_replay_agrees(out: Path, name: str) -> None:
    """Replay's expected reads for the demo's transcript, call by call, are what was reported."""
    box = ToolBox(ROOT)
    tools = ToolSet.build(
        [box.list_files, box.read_file, box.grep, box.run_tests, box.edit_file]
    ).schemas
    transcript = [json.loads(x) for x in (out / f"{name}.jsonl").read_text().splitlines()]
    settings = {"cache_rule": "openai"}
    result = anyio.run(
        lambda: replay(
            {name: transcript}, [name], model=SIMULATED_MODEL, tools=tools, settings=settings
        )
    )
    ledger = [json.loads(x) for x in (out / f"{name}.jsonl.ledger.jsonl").read_text().splitlines()]
    calls = result.strategies[name].calls
    assert len(calls) == len(ledger)
    for call, record in zip(calls, ledger, strict=True):
        assert call.splits["auto"].reads == record["cache_read_tokens"]
