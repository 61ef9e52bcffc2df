"""ctxmw replay: end to end on a synthetic run, figures consistent with each other and by hand."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from ctxmw import Settings, list_strategies, validate
from ctxmw.cli import main
from ctxmw.errors import UsageError
from ctxmw.replay import DEFAULT_MODEL, ReplayResult, call_points, load_transcript, replay
from ctxmw.replay.caching import model_prices
from ctxmw.replay.synthetic import synthetic_transcript
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.telemetry.counters import ApproxCounter
from ctxmw.types import Messages, StrategyContext
from tests._runs import session_folder
from tests.transcripts import call as _call
from tests.transcripts import group as _group

LISTS = ["shorten_tools", "shorten_tools_epoch", "shorten_tools_epoch_increment"]
KEYS = {
    "prompt_tokens_total",
    "prompt_tokens_peak",
    "reuse_fraction",
    "breaks",
    "over_window_calls",
    "retained_full",
    "retained_compacted",
    "cost",
    "cost_ratio_to_none",
    "cost_ratio_to_optimal",
}
MODELS = {"auto", "breakpoints", "end_breakpoint"}
DEFAULT_LISTS_ALL = [info.name for info in list_strategies()]
LEDGER_NOTE = "a telemetry ledger, not a transcript (read it with ctxmw stats)."
# Small epochs and an early clearing trigger, so 40 calls cross many boundaries.
SMALL = {
    "epoch_tool_call_threshold": 10,
    "epoch_size": 4,
    "epoch_full_tool_calls": 3,
    "epoch_compacted_tool_calls": 6,
    "economic_full_tool_calls": 3,
    "economic_compacted_tool_calls": 6,
    "clear_tool_results_trigger": 3000,
}


@pytest.fixture(scope="module")
def cli_json() -> dict[str, Any]:
    """``ctxmw replay --synthetic 60 --json --fast`` run in-process, parsed."""
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        for key in [k for k in os.environ if k.startswith("CTXMW_")]:
            mp.delenv(key)
        assert main(["replay", "--synthetic", "60", "--json", "--fast"]) == 0
    parsed: dict[str, Any] = json.loads(out.getvalue())
    return parsed


@pytest.fixture(scope="module")
def small() -> tuple[Messages, ReplayResult]:
    """A 40-call synthetic run through every default list, with small epochs."""
    messages = synthetic_transcript(40, seed=3)
    result = anyio.run(
        lambda: replay(
            [messages], [*LISTS, "clear_tool_results"], settings=SMALL, counter=ApproxCounter()
        )
    )
    return messages, result


def test_json_has_the_documented_keys(cli_json: dict[str, Any]) -> None:
    assert {"transcripts", "calls", "window", "strategies"} <= set(cli_json)
    assert cli_json["transcripts"] == ["synthetic:60:seed=0"]
    assert cli_json["calls"] == len(call_points(synthetic_transcript(60)))
    assert cli_json["window"] == 200_000
    # The default lists gained the default strategy (issue 12), second after the baseline.
    assert list(cli_json["strategies"]) == [
        "none",
        "shorten_tools_economic",
        *LISTS,
        "clear_tool_results",
    ]
    for entry in cli_json["strategies"].values():
        assert set(entry) >= KEYS
        assert set(entry["cost"]) == set(entry["cost_ratio_to_none"]) == MODELS


def test_none_reuses_everything_and_is_the_baseline(cli_json: dict[str, Any]) -> None:
    none = cli_json["strategies"]["none"]
    assert none["reuse_fraction"] == 1.0
    assert none["breaks"] == 0
    assert none["cost_ratio_to_none"] == dict.fromkeys(MODELS, 1.0)
    assert none["retained_full"] == none["tool_results"] == 60


def test_cli_figures_are_consistent(cli_json: dict[str, Any]) -> None:
    p = model_prices(DEFAULT_MODEL)
    base = cli_json["strategies"]["none"]["cost"]
    for entry in cli_json["strategies"].values():
        total = entry["prompt_tokens_total"]
        assert 0 < entry["prompt_tokens_peak"] <= total
        assert 0.0 <= entry["reuse_fraction"] <= 1.0
        kept = entry["retained_full"] + entry["retained_compacted"] + entry["retained_cleared"]
        assert kept <= entry["tool_results"]
        for key in MODELS:
            assert total * p.cache_read <= entry["cost"][key] <= total * p.cache_write
            assert entry["cost_ratio_to_none"][key] == pytest.approx(
                entry["cost"][key] / base[key], rel=1e-4
            )
        assert entry["cost"]["auto"] <= total * p.input


def test_totals_are_sums_of_the_per_call_figures(small: tuple[Messages, ReplayResult]) -> None:
    messages, result = small
    for s in result.strategies.values():
        assert len(s.calls) == len(call_points(messages)) == result.calls
        assert s.prompt_tokens_total == sum(c.prompt_tokens for c in s.calls)
        assert s.prompt_tokens_peak == max(c.prompt_tokens for c in s.calls)
        assert s.breaks == sum(c.broke for c in s.calls)
        for key, cost in s.cost.items():
            assert cost == pytest.approx(sum(c.cost[key] for c in s.calls))
        for c in s.calls:
            assert c.prefix_tokens <= c.prompt_tokens
            assert all(split.reads + split.writes <= c.prompt_tokens for split in c.splits.values())
            if c.broke:
                assert c.splits["end_breakpoint"].reads == 0
    none = result.strategies["none"].calls
    assert all(c.prefix_tokens == c.previous_tokens for c in none)


async def _epoch_changes(messages: Messages, name: str) -> int:
    s = Settings(**SMALL)
    keys = []
    for point in call_points(messages):
        ctx = StrategyContext(settings=s, model=DEFAULT_MODEL)
        await apply_strategies(messages[:point], resolve_strategies(name, s), ctx)
        stats = ctx.stats.get(name)
        keys.append(
            None if stats is None else (stats["pinned"], stats["truncate_to"] - stats["keep_full"])
        )
    return sum(1 for a, b in itertools.pairwise(keys) if a != b)


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["shorten_tools_epoch", "shorten_tools_epoch_increment"])
async def test_epoch_strategies_break_only_when_the_epoch_changes(
    small: tuple[Messages, ReplayResult], name: str
) -> None:
    messages, result = small
    changes = await _epoch_changes(messages, name)
    assert changes > 2
    assert result.strategies[name].breaks == changes


def test_retention_counts_full_compacted_and_cleared(small: tuple[Messages, ReplayResult]) -> None:
    _, result = small
    assert result.strategies["none"].retention.full == 40
    cleared = result.strategies["clear_tool_results"].retention
    assert (cleared.full, cleared.compacted, cleared.cleared) == (3, 0, 37)
    epoch = result.strategies["shorten_tools_epoch"].retention
    assert epoch.compacted > 0
    assert epoch.dropped == 40 - epoch.full - epoch.compacted > 0


def _two_calls() -> Messages:
    text = "word " * 1500
    return [
        {"role": "system", "content": text},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "first"},
        {"role": "user", "content": text + "more"},
        {"role": "assistant", "content": "second"},
    ]


@pytest.mark.anyio
async def test_cost_matches_a_hand_computation() -> None:
    messages = _two_calls()
    counter = ApproxCounter()
    result = await replay([messages], ["none"], counter=counter)
    p = model_prices(DEFAULT_MODEL)
    size = [counter.message_tokens(DEFAULT_MODEL, m) for m in messages]
    primer = counter.overhead_tokens(DEFAULT_MODEL)  # sent on every call, never cached
    b1, b2 = sum(size[:2]), sum(size[:4])
    assert [c.prompt_tokens for c in result.strategies["none"].calls] == [b1 + primer, b2 + primer]
    read = b1 // 128 * 128
    auto = (b1 + primer) * p.input + (b2 + primer - read) * p.input + read * p.cache_read
    marks = (
        b1 * p.cache_write + b1 * p.cache_read + (b2 - b1) * p.cache_write + 2 * primer * p.input
    )
    expected = {"auto": auto, "breakpoints": marks, "end_breakpoint": marks}
    assert result.strategies["none"].cost == pytest.approx(expected)


@pytest.mark.anyio
async def test_a_save_file_and_a_json_list_replay_the_same(tmp_path: Path) -> None:
    messages = synthetic_transcript(8, seed=1)
    jsonl, listed = tmp_path / "agent.jsonl", tmp_path / "agent.json"
    jsonl.write_text("".join(json.dumps(m) + "\n" for m in messages))
    listed.write_text(json.dumps(messages))
    dataset = tmp_path / "runs.jsonl"
    dataset.write_text(json.dumps({"messages": messages}) + "\n" + json.dumps(messages) + "\n")
    loaded = [await load_transcript(p) for p in (jsonl, listed, dataset)]
    assert [list(d.values()) for d in loaded] == [[messages], [messages], [messages, messages]]
    assert list(loaded[2]) == [f"{dataset}:1", f"{dataset}:2"]
    a, b = [(await replay(d, LISTS, counter=ApproxCounter())).to_json() for d in loaded[:2]]
    assert a["strategies"] == b["strategies"]


def test_strategy_lists_are_split_on_semicolons_and_repeats(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["replay", "--synthetic", "5", "--fast", "--json"]
    lists = [
        "--strategies",
        "shorten_tools,cache_breakpoints; shorten_tools_epoch",
        "--strategies",
        "none",
    ]
    assert main([*argv, *lists]) == 0
    names = list(json.loads(capsys.readouterr().out)["strategies"])
    assert names == ["shorten_tools,cache_breakpoints", "shorten_tools_epoch", "none"]


def test_table_shows_loss_beside_cost_and_retention(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--synthetic", "5", "--fast", "--strategies", "shorten_tools"]) == 0
    lines = capsys.readouterr().out.splitlines()
    heads = [line.split() for line in lines if line.startswith("strategies")]
    assert heads[0] == [
        "strategies",
        "auto",
        "breakpoints",
        "end_breakpoint",
        "read-backs",
        "hidden",
        "recoverable",
    ]
    assert heads[1][-3:] == ["full", "compacted", "cleared"]
    assert [line.split()[0] for line in lines[4:6]] == ["none", "shorten_tools"]


def test_every_line_of_the_table_fits_120_columns(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--synthetic", "40", "--kind", "swe", "--fast"]) == 0
    out = capsys.readouterr().out
    assert "shorten_tools_epoch_increment" in out
    assert max(len(line) for line in out.splitlines()) <= 120


def test_unknown_strategy_and_missing_input_are_usage_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["replay", "--synthetic", "5", "--fast", "--strategies", "nope"]) == 2
    assert "'nope'" in capsys.readouterr().err
    assert main(["replay"]) == 2
    assert "--synthetic" in capsys.readouterr().err


def test_plot_writes_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "replay.png"
    argv = ["replay", "--synthetic", "5", "--fast", "--strategies", "none", "--plot", str(png)]
    assert main(argv) == 0
    assert png.read_bytes().startswith(b"\x89PNG")


@pytest.mark.anyio
async def test_a_transcript_without_call_points_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no call point"):
        await replay([[{"role": "user", "content": "hi"}]], counter=ApproxCounter())


def test_a_glob_matching_a_ledger_skips_it_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = session_folder(tmp_path)
    assert [f.name for f in files] == ["agent.jsonl", "agent.jsonl.ledger.jsonl"]
    assert main(["replay", *map(str, files), "--fast", "--json"]) == 0
    captured = capsys.readouterr()
    assert list(json.loads(captured.out)["transcripts"]) == [str(files[0])]
    notes = [line for line in captured.err.splitlines() if "skipped" in line]
    assert notes == [f"ctxmw replay: skipped {str(files[1])!r}: {LEDGER_NOTE}"]


def test_progress_goes_to_stderr_one_line_per_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = []
    for n in (1, 2):
        path = tmp_path / f"run{n}.json"
        path.write_text(json.dumps(synthetic_transcript(6, seed=n)))
        files.append(str(path))
    argv = ["replay", *files, "--fast", "--json", "--strategies", "shorten_tools"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)  # stdout stays one JSON object
    steps = [line for line in captured.err.splitlines() if line.startswith("ctxmw replay: [")]
    # two lists (shorten_tools and the baseline) x two transcripts, then one optimum each
    assert [s.split("]")[0] for s in steps] == [f"ctxmw replay: [{k}/6" for k in range(1, 7)]
    assert files[1] in steps[1]
    assert "optimum" in steps[-1]


def test_the_optimum_reports_its_progress_while_it_renders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(synthetic_transcript(30, seed=1)))
    argv = ["replay", str(path), "--fast", "--strategies", "shorten_tools"]
    assert main(argv) == 0
    err = capsys.readouterr().err.splitlines()
    parts = [line for line in err if line.startswith(f"ctxmw replay:   optimum: {path}: ")]
    assert len(parts) == 10  # a line at each tenth of the boundaries
    done, of = parts[-1].rsplit(": ", 1)[1].removesuffix(" rendered").split("/")
    assert done == of  # the last line: every boundary
    assert err.index(parts[-1]) < next(i for i, line in enumerate(err) if "] optimum" in line)


@pytest.mark.anyio
async def test_load_transcript_skips_a_ledger(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = (await anyio.to_thread.run_sync(session_folder, tmp_path))[1]
    assert await load_transcript(ledger) == {}
    assert "a telemetry ledger" in caplog.text


def reused_ids_transcript(turns: int = 4) -> Messages:
    """Each turn calls ``call_0`` and ``call_1`` again, as many real transcripts do."""
    msgs: Messages = [{"role": "system", "content": "sys"}]
    for t in range(turns):
        msgs.append({"role": "user", "content": f"task {t}"})
        calls = [_call(f"call_{j}", "read", path=f"f{t}{j}") for j in range(2)]
        msgs += _group(calls, [f"output {t}.{j} " * 20 for j in range(2)])
        msgs.append({"role": "assistant", "content": f"done {t}"})
    return msgs


@pytest.mark.anyio
async def test_reused_ids_are_replayed_as_pairs_and_said(caplog: pytest.LogCaptureFixture) -> None:
    messages = reused_ids_transcript()
    result = await replay({"reused": messages}, ["none"], counter=ApproxCounter())
    kept = result.strategies["none"].retention
    assert (kept.results, kept.full, kept.compacted, kept.dropped) == (8, 8, 0, 0)
    assert "'reused' reuses tool_call ids across turns; 6 call(s)" in caplog.text


@pytest.mark.parametrize("name", [n for n in DEFAULT_LISTS_ALL if n != "none"])
def test_every_strategy_keeps_reused_ids_paired(name: str) -> None:
    messages = reused_ids_transcript(30)
    validate(messages)
    settings = Settings(**SMALL, max_tool_chars=0, context_window=10**9)
    prompt = anyio.run(
        lambda: apply_strategies(
            messages, resolve_strategies(name, settings), StrategyContext(settings=settings)
        )
    )
    validate(prompt)
    if name == "repair_tool_pairs":
        assert prompt == messages  # nothing to repair: reused ids pair within their groups


@pytest.mark.parametrize("fast", [["--fast"], []], ids=["approx", "litellm"])
def test_a_lone_surrogate_escape_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fast: list[str]
) -> None:
    path = tmp_path / "odd.jsonl"
    lines = [
        r'{"role":"user","content":"list /tmp"}',
        r'{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",'
        r'"function":{"name":"ls","arguments":"{}"}}]}',
        r'{"role":"tool","tool_call_id":"c1","content":"caf\udce9.txt \ud800"}',
        r'{"role":"assistant","content":"one file"}',
    ]
    path.write_text("\n".join(lines) + "\n")
    assert main(["replay", str(path), "--json", *fast]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["calls"] == 2
