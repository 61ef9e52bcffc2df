"""ctxmw demo: the simulated provider, the scripted agent, and a reduced end-to-end run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

import ctxmw
from ctxmw.cli import main
from ctxmw.context.readback import READBACK_TOOL_NAME
from ctxmw.demo._agent import next_calls
from ctxmw.demo._provider import SimulatedProvider
from ctxmw.demo._run import SIMULATED_MODEL
from ctxmw.demo._script import PlanStep, make_plan
from ctxmw.demo._tools import ToolBox
from ctxmw.replay import replay
from ctxmw.runtime.tool_schema import ToolSet
from ctxmw.runtime.transcript import TranscriptFile
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


def run_plan(plan: list[PlanStep]) -> dict[str, tuple[int, str]]:
    """Every call of the plan run in order on a fresh tool box: id -> (position, output)."""
    box, outputs, position = ToolBox(ROOT), {}, 0
    for k, step in enumerate(plan):
        for j, (name, args) in enumerate(step.calls):
            outputs[f"call_{k:04d}_{j}"] = (position, str(getattr(box, name)(**args)))
            position += 1
    return outputs


def test_an_edit_quotes_lines_an_earlier_read_showed_some_many_calls_before() -> None:
    plan = make_plan(ROOT, 240)
    outputs, edits, gaps = run_plan(plan), 0, []
    for k, step in enumerate(plan):
        for j, (name, args) in enumerate(step.calls):
            if name != "edit_file":
                continue
            edits += 1
            (need,) = step.needs
            at, shown = outputs[need.source]
            # Every quoted line is a line of that earlier read, number and text as it showed them.
            assert all(line in shown.splitlines() for line in need.text)
            assert [line.split("→", 1)[1] for line in need.text] == str(args["old"]).splitlines()
            assert outputs[f"call_{k:04d}_{j}"][1].startswith("Edited ")  # the quote matched
            gaps.append(outputs[f"call_{k:04d}_{j}"][0] - at)
    assert edits >= 30
    assert min(gaps) < 10 < 50 < max(gaps)  # some right after the read, some long after


def test_a_fix_follows_a_line_an_earlier_grep_found() -> None:
    plan = make_plan(ROOT, 240)
    outputs = run_plan(plan)
    follows = [
        (step, need)
        for step in plan
        for need in step.needs
        if step.calls[0][0] == "read_file" and need.again[0] == "grep"
    ]
    assert follows
    for step, need in follows:
        path, line, _ = need.text[0].split(":")
        assert need.text[0] in outputs[need.source][1]
        assert step.calls[0][1]["path"] == path
        assert int(line) in range(int(str(step.calls[0][1]["start"])), int(line) + 1)


def agent_prompt(plan: list[PlanStep], upto: int, shown: dict[str, str]) -> list[dict[str, Any]]:
    """The prompt the agent gets before step ``upto``: every earlier call and its result, the
    results named in ``shown`` replaced by that text (what a strategy made of them)."""
    outputs = run_plan(plan[:upto])
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for k, step in enumerate(plan[:upto]):
        ids = [f"call_{k:04d}_{j}" for j in range(len(step.calls))]
        calls = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in zip(ids, step.calls, strict=True)
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        for i in ids:
            messages.append(
                {"role": "tool", "tool_call_id": i, "content": shown.get(i, outputs[i][1])}
            )
    return messages


def first_far_edit(plan: list[PlanStep]) -> int:
    return next(
        k
        for k, step in enumerate(plan)
        if step.calls[0][0] == "edit_file" and step.needs[0].again[0] == "read_file"
    )


def test_the_agent_edits_when_its_prompt_shows_the_lines() -> None:
    plan = make_plan(ROOT, 60)
    k = first_far_edit(plan)
    (call,) = next_calls(plan, agent_prompt(plan, k, {})) or []
    assert call["id"] == f"call_{k:04d}_0"
    assert json.loads(call["function"]["arguments"]) == plan[k].calls[0][1]


def test_the_agent_reads_back_through_the_handle_its_prompt_shows() -> None:
    plan = make_plan(ROOT, 60)
    k = first_far_edit(plan)
    need = plan[k].needs[0]
    handle = "0123456789abcdef"
    compacted = f"[compacted: 2 of 120 lines shown; ctxmw_expand handle {handle}]"
    (call,) = next_calls(plan, agent_prompt(plan, k, {need.source: compacted})) or []
    assert call["function"]["name"] == READBACK_TOOL_NAME
    assert json.loads(call["function"]["arguments"]) == {"handle": handle, **need.readback}


def test_the_agent_reads_the_file_again_when_the_result_was_cleared() -> None:
    plan = make_plan(ROOT, 60)
    k = first_far_edit(plan)
    need = plan[k].needs[0]
    prompt = agent_prompt(plan, k, {need.source: "[cleared]"})
    (call,) = next_calls(plan, prompt) or []
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == need.again
    # Once it fetched, it edits with what it got (it never loops on a fetch).
    prompt += [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "[cleared again]"},
    ]
    (edit,) = next_calls(plan, prompt) or []
    assert edit["function"]["name"] == "edit_file"


def test_the_tools_edit_in_memory_and_the_tests_see_the_edit() -> None:
    box = ToolBox(ROOT)
    before = (ROOT / "_files.py").read_text()
    report = box.run_tests("_files.py")
    failing = next(line for line in report.splitlines() if line.endswith("FAILED"))
    where = next(line for line in report.splitlines() if line.startswith("_files.py:"))
    line = int(where.split(":")[1])
    first = box.text_lines("_files.py")[line - 1]
    assert box.edit_file("_files.py", first, first + "  # reviewed").startswith("Edited ")
    assert (ROOT / "_files.py").read_text() == before  # the tree is never written
    assert f"{line:>6}→{first}  # reviewed" in box.read_file("_files.py", line, 1)
    assert failing not in box.run_tests("_files.py")
    assert "it must be once" in box.edit_file("_files.py", "import", "x")


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
        ctxmw.validate(saved(out / f"{name}.jsonl"))
    assert (out / "cache.png").stat().st_size > 10_000
    check_replay_agrees(out, "shorten_tools_epoch_increment")
    check_replay_agrees(out, "shorten_tools_economic")
    # The hidden column is replay's loss measure of each row's own transcript.
    assert rows["none"][-1] == "0.0%"
    for name in ("shorten_tools", "shorten_tools_economic"):
        assert rows[name][-1] == f"{hidden_share(out, name):.1%}"


def saved(path: Path) -> list[dict[str, Any]]:
    """A save_file's conversation, as the session reads it (read-back rounds set aside)."""
    return anyio.run(TranscriptFile(path).load)


def hidden_share(out: Path, name: str) -> float:
    transcript = saved(out / f"{name}.jsonl")
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
    transcript = saved(out / f"{name}.jsonl")
    settings = {"cache_rule": "openai"}
    result = anyio.run(
        lambda: replay(
            {name: transcript}, [name], model=SIMULATED_MODEL, tools=tools, settings=settings
        )
    )
    lines = (out / f"{name}.jsonl.ledger.jsonl").read_text().splitlines()
    # The calls ctxmw made past a reply that only read back are not call points of the
    # transcript: a later prompt never holds their end, so they change no later read.
    ledger = [r for r in map(json.loads, lines) if not r["readback"]]
    calls = result.strategies[name].calls
    assert len(calls) == len(ledger)
    for call, record in zip(calls, ledger, strict=True):
        assert call.splits["auto"].reads == record["cache_read_tokens"]


def demo_table(stdout: str) -> dict[str, dict[str, str]]:
    """The printed table: per strategy list, its cells by column header."""
    lines = stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("strategies "))
    header = lines[at].split()
    rows = {}
    for line in lines[at + 1 :]:
        if not line.strip():
            break
        cells = line.split()
        rows[cells[0]] = dict(zip(header, cells, strict=True))
    return rows


def money(cell: str) -> float:
    return float(cell.lstrip("$").replace(",", ""))


def share(cell: str) -> float:
    return float(cell.rstrip("%"))


@pytest.mark.slow
def test_the_default_demo_ranks_strategies_as_real_sessions_do(demo_run: DemoRun) -> None:
    """The default costs no more than clearing old results and hides less; nothing is hidden
    without a strategy; only the default, which shows handles, reads back."""
    rows = demo_table(demo_run.stdout)
    default, clear, none = (
        rows["shorten_tools_economic"],
        rows["clear_tool_results"],
        rows["none"],
    )
    assert money(default["cost"]) <= money(clear["cost"])
    assert share(default["hidden"]) < share(clear["hidden"])
    assert share(none["hidden"]) == 0
    assert money(default["cost"]) < money(none["cost"])
    assert int(default["read-backs"]) > 0
    assert all(int(row["read-backs"]) == 0 for row in rows.values() if row is not default)
    # Lost content costs calls: a strategy that hides results makes the agent call more.
    assert all(int(row["calls"]) >= int(none["calls"]) for row in rows.values())


@pytest.mark.slow
def test_every_edit_of_the_demo_quotes_lines_its_session_showed_before(demo_run: DemoRun) -> None:
    """Whatever a strategy hid, each edit copies lines that a read, a second read or a
    read-back (the save_file's readback lines) showed earlier in that session."""
    for transcript in demo_run.out.glob("*.jsonl"):
        if transcript.name.endswith(".ledger.jsonl"):
            continue
        lines = [json.loads(x) for x in transcript.read_text().splitlines()]
        shown = ""
        for line in lines:
            for call in line.get("tool_calls") or []:
                if call["function"]["name"] == "edit_file":
                    old = json.loads(call["function"]["arguments"])["old"]
                    assert all(f"→{row}\n" in shown for row in old.splitlines()), transcript
            if line.get("role") == "tool":
                shown += str(line.get("content")) + "\n"
